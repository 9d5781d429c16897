"""The examples run as scripts (in their reduced mode where they have one), so they cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.slow
def test_ppo_timing_quick_prints_the_comparison() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "ppo_timing.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
    for policy in ("ppo", "never", "every", "threshold"):
        assert policy in rows, done.stdout
    success, mean_cost = float(rows["never"][1]), float(rows["never"][2])
    assert 0.0 <= success <= 1.0 and mean_cost > 0.0
