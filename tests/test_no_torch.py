"""``ac_env`` must import, register and run its model-free parts without torch."""

import subprocess
import sys

PROBE = """
import sys, pkgutil, importlib
import ac_env
for module in pkgutil.walk_packages(ac_env.__path__, "ac_env."):
    importlib.import_module(module.name)
import gymnasium as gym
gym.spec("AutoCompact-SWE-v0")
heavy = sorted(m for m in ("torch", "transformers", "trl", "matplotlib") if m in sys.modules)
print(",".join(heavy))
"""


def test_ac_env_imports_without_torch():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
