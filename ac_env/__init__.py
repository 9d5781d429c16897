"""AutoCompact environments: coding agents that decide when to compact their own context.

Importing this package registers ``AutoCompact-SWE-v0`` and ``AutoCompact-Timing-v0``. It
never imports torch.
"""

from gymnasium.envs.registration import register, registry

from ac_env.actions import Bash, Compact, FormatError, Submit
from ac_env.config import EnvConfig
from ac_env.policy import Policy, PolicyOutput

__all__ = ["Bash", "Compact", "EnvConfig", "FormatError", "Policy", "PolicyOutput", "Submit"]

if "AutoCompact-SWE-v0" not in registry:
    register(
        id="AutoCompact-SWE-v0",
        entry_point="ac_env.env:AutoCompactSWEEnv",
        # command outputs can depend on time (timeouts, dates), so steps are not guaranteed
        # reproducible; seeded resets are (the same task and the same first observation).
        nondeterministic=True,
    )

if "AutoCompact-Timing-v0" not in registry:
    register(
        id="AutoCompact-Timing-v0",
        entry_point="ac_env.timing.env:TimingEnv",
        nondeterministic=True,
    )
