"""Each extension point takes a new piece in the files ``docs/extending.md`` names, and nowhere
else: a throwaway timing rule (one module in ``ac_env/compaction/when/``) is benchmarked by its
name; a throwaway sandbox backend (one entry in ``SANDBOXES``) runs episodes, is checked and
appears in the help text; a throwaway task source (a loader and one entry in ``TASK_SOURCES``)
is loaded, filtered, run and listed; a trainer adapter credits segments through
``segment_group``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import gymnasium as gym
import pytest

import ac_env  # noqa: F401  (registers the ids)
from ac_env.config import EnvConfig
from ac_env.runs.checks import ConfigurationError, check_sandbox
from ac_env.sandbox import SANDBOXES, Sandbox, SandboxBackend, make_sandbox_factory
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks import TASK_SOURCES, Task, TaskFileError, TaskSource, load_tasks
from ac_env.tasks.selection import check_choice, choose_ids
from ac_env.tasks.sources import task_source_help
from ac_env.tasks.swebench_file import read_task_file
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
        "ac_env/tasks/sources.py",
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


THROWAWAY_TASKS: list[Task] = []


def throwaway_tasks(
    split: str | None, subset: str | None, task_ids: Sequence[str] | None
) -> list[Task]:
    """A new source's loader, as the page describes it: tasks made in code (the tiny tasks,
    split ``kata``, subsets by parity), filtered by the three keywords."""
    tasks = list(THROWAWAY_TASKS)
    if split is not None:
        check_choice("split", split, ["kata"])
    if subset is not None:
        check_choice("subset", subset, ["train", "eval"])
        tasks = [t for t in tasks if (t.instance_id.endswith("1")) == (subset == "train")]
    if task_ids is not None:
        tasks = [tasks[p] for p in choose_ids([t.instance_id for t in tasks], task_ids)]
    return tasks


@pytest.fixture
def throwaway_source(monkeypatch: pytest.MonkeyPatch, tiny_task_file: Path) -> Iterator[str]:
    """A new task source, as a newcomer adds one: a loader and one entry in ``TASK_SOURCES``."""
    tasks = [t.model_copy(update={"split": "kata"}) for t in read_task_file(tiny_task_file)]
    THROWAWAY_TASKS[:] = tasks
    source = TaskSource("a throwaway source (the tiny tasks)", f"{__name__}:throwaway_tasks")
    monkeypatch.setitem(TASK_SOURCES, "throwaway", source)
    yield "throwaway"
    THROWAWAY_TASKS.clear()


def test_a_new_task_source_entry_loads_filters_and_runs(throwaway_source):
    assert [t.instance_id for t in load_tasks(throwaway_source)] == ["tiny-calc-1", "tiny-calc-2"]
    picked = load_tasks(throwaway_source, "kata", ["tiny-calc-2"], hide_fail_to_pass_tests=True)
    assert [t.instance_id for t in picked] == ["tiny-calc-2"]
    assert [t.instance_id for t in load_tasks(throwaway_source, subset="eval")] == ["tiny-calc-2"]
    with pytest.raises(ValueError, match="valid splits: kata"):
        load_tasks(throwaway_source, "easy")
    # no impossible split unless the entry says so: the loader refuses it like any other
    with pytest.raises(ValueError, match="valid splits: kata"):
        load_tasks(throwaway_source, "impossible")
    with pytest.raises(TaskFileError, match="or a task source: builtin, real, throwaway"):
        load_tasks("nowhere")
    assert "'throwaway' (a throwaway source" in task_source_help()

    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=throwaway_source,
        sandbox="unisolated",
        disk_quota_mb=None,
    )
    try:
        _, info = env.reset(seed=0)
        _, _, _, _, info = env.step("THOUGHT: look\n```bash\nls\n```")
    finally:
        env.close()
    assert info["exit_reason"] is None
    assert env.unwrapped.config.split is None  # the entry names no default split
