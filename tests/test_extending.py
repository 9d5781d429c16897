"""Each extension point takes a new piece in the files ``docs/extending.md`` names, and nowhere
else: a throwaway timing rule (one module in ``ac_env/compaction/when/``) is benchmarked by its
name; a throwaway sandbox backend (one entry in ``SANDBOXES``) runs episodes, is checked and
appears in the help text; a trainer adapter credits segments through ``segment_group``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import gymnasium as gym
import pytest

import ac_env  # noqa: F401  (registers the ids)
from ac_env.config import EnvConfig
from ac_env.runs.checks import ConfigurationError, check_sandbox
from ac_env.sandbox import SANDBOXES, Sandbox, SandboxBackend, make_sandbox_factory
from ac_env.sandbox.local import LocalSandbox
from ac_env.trajectory import Trajectory

ROOT = Path(__file__).resolve().parents[1]
RULE_DIR = ROOT / "ac_env" / "compaction" / "when"
EXTENDING = ROOT / "docs" / "extending.md"

THROWAWAY_RULE = '''"""``every_other``: compacts on every second turn since the last summary."""

from dataclasses import dataclass

from ac_env.compaction.when.moment import Moment


@dataclass(frozen=True)
class EveryOther:
    name: str = "every_other"
    description: str = "compacts on every second turn since the last summary"

    def __call__(self, moment: Moment) -> bool:
        return moment.turns_since_compaction >= 2


RULE = EveryOther
'''


@pytest.fixture
def rule_module() -> Iterator[Path]:
    """A new rule, as a newcomer adds one: one module in the rules' package, then gone."""
    path = RULE_DIR / "every_other.py"
    assert not path.exists()
    path.write_text(THROWAWAY_RULE)
    try:
        yield path
    finally:
        path.unlink()


def test_the_page_names_the_files_each_extension_touches():
    page = EXTENDING.read_text()
    for named in (
        "ac_env/compaction/when/",
        "ac_env/sandbox/__init__.py",
        "ac_train/advantages.py",
        "autocompact.timing_rules",
    ):
        assert named in page


def test_a_new_rule_file_is_benchmarked_by_its_name(rule_module, tiny_task_file, tmp_path):
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "ac_env.bench.cli",
        "--out",
        str(out),
        "--source",
        str(tiny_task_file),
        "--split",
        "all",
        "--ids",
        "tiny-calc-1",
        "--budgets",
        "1",
        "--workers",
        "1",
        "--no-progress",
        "--strategies",
        "none",
        "rule:every_other",
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    trajectory = out / "trajectories" / "rule:every_other" / "tiny-calc-1__seed0.jsonl"
    # two turns, then the summary (turn 2); two more, the next (turn 5)
    assert [event.step for event in Trajectory.read(trajectory).compactions()] == [2, 5]
    report = (out / "report.md").read_text()
    assert "compacts on every second turn since the last summary" in report


def counted_sandboxes(created: list[Sandbox]) -> Callable[[int | None], Callable[[], Sandbox]]:
    def sandboxes(disk_quota_mb: int | None) -> Callable[[], Sandbox]:
        def make() -> Sandbox:
            sandbox = LocalSandbox(isolation="none", disk_quota_mb=None)
            created.append(sandbox)
            return sandbox

        return make

    return sandboxes


CREATED: list[Sandbox] = []
throwaway_sandboxes = counted_sandboxes(CREATED)


@pytest.fixture
def throwaway_backend(monkeypatch: pytest.MonkeyPatch) -> str:
    """A new backend, as a newcomer adds one: one entry in ``SANDBOXES``."""
    backend = SandboxBackend(
        "a throwaway backend (plain subprocesses, counted)", f"{__name__}:throwaway_sandboxes"
    )
    monkeypatch.setitem(SANDBOXES, "throwaway", backend)
    return "throwaway"


def test_a_new_sandbox_entry_runs_episodes_and_is_checked(throwaway_backend, tiny_task_file):
    CREATED.clear()
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        sandbox=throwaway_backend,
        disk_quota_mb=None,
    )
    try:
        env.reset(seed=0)
        _, _, _, _, info = env.step("THOUGHT: look\n```bash\nls\n```")
    finally:
        env.close()
    assert CREATED and info["exit_reason"] is None
    check_sandbox(throwaway_backend)
    with pytest.raises(ConfigurationError, match="unknown sandbox 'nowhere'.*throwaway"):
        check_sandbox("nowhere")
    with pytest.raises(ValueError, match="does not cache commands"):
        make_sandbox_factory(throwaway_backend, command_cache="cache")


def test_help_texts_read_the_sandbox_map(throwaway_backend):
    # the env's own field description is built when the module is imported; what a new entry
    # changes at run time is the map every help text is made from
    from ac_env.sandbox import sandbox_help

    assert "'throwaway' (a throwaway backend" in sandbox_help()
    assert "'docker'" in EnvConfig.model_fields["sandbox"].description
