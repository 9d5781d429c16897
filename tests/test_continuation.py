"""The continuation rung: starts right after a compaction whose ``## Next`` names the exact
one-line edit, with the prose and wrong-line controls from the same starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from ac_env.agents.rollout import rollout
from ac_env.policy import PolicyOutput
from ac_train.collect import ReviewLog
from ac_train.grpo.continuation import (
    ContinuationStart,
    PlannedEdit,
    continuation_starts,
    plan_metrics,
    planned_edit,
)
from ac_train.judge.oracle import OracleJudge

TASK = "tiny-calc-1"

EDIT_SCRIPT = """# try: pkg/m.py:54 drop `- 1`
git checkout -- pkg/m.py
python3 - <<'AC_EDIT_END'
PATH = 'pkg/m.py'
LINE = 54
OLD = '    return list(value)[start:stop - 1]'
NEW = '    return list(value)[start:stop]'
AC_EDIT_END
timeout 20 python3 -m pytest -q --tb=no -p no:cacheprovider tests/test_m.py::test_slice 2>&1 | tail
"""


def test_an_edit_script_becomes_a_one_line_sed_and_its_test():
    edit = planned_edit(EDIT_SCRIPT)
    assert edit == PlannedEdit("pkg/m.py", 54, "start:stop - 1", "start:stop", edit.test)
    assert edit.command() == (
        "sed -i '54s/start:stop - 1/start:stop/' pkg/m.py && "
        "python3 -m pytest -q tests/test_m.py::test_slice"
    )
    assert edit.sed(53).startswith("sed -i '53s/")
    assert PlannedEdit("p.py", 3, "a.b[0]", "a/b", "t").sed() == r"sed -i '3s/a\.b\[0\]/a\/b/' p.py"
    multi_line = EDIT_SCRIPT.replace("stop]'", "stop]\\n    pass'")
    assert planned_edit(multi_line) is None
    assert planned_edit("ls") is None


class Runs:
    def __init__(self, text: str) -> None:
        self.text = text

    def act(self, observation: Any) -> PolicyOutput:
        return PolicyOutput(text=self.text)


def continue_from(task_file: Path, start: ContinuationStart, text: str, review: Any = None) -> Any:
    env = make_env(task_file)()
    try:
        return rollout(
            env,
            Runs(text),
            options={"task_id": start.start.task_id},
            start=start.start.snapshot,
            max_steps=1,
            review=review,
        )
    finally:
        env.close()


def make_env(task_file: Path) -> Any:
    return lambda: gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(task_file),
        split=None,
        forced_compaction_threshold=3000,
        max_steps=20,
        context_window=4096,
    )


@pytest.fixture(scope="module")
def starts(tiny_task_file: Path) -> dict[str, ContinuationStart]:
    found = continuation_starts(make_env(tiny_task_file), [TASK], progress=False)
    return {start.kind: start for start in found}


def summary_of(start: ContinuationStart) -> str:
    return [m for m in start.start.snapshot.context.messages if m.kind == "summary"][-1].content


@pytest.mark.slow  # the fixture runs a demonstration and three gradings: about 40 s
def test_the_three_plans_share_a_start_right_after_the_compaction(starts):
    assert set(starts) == {"exact", "prose", "wrong_line"}
    exact, prose, wrong = starts["exact"], starts["prose"], starts["wrong_line"]
    assert {s.id for s in starts.values()} == {f"{TASK}@next-{k}" for k in starts}
    assert exact.start.step == prose.start.step == wrong.start.step
    assert exact.start.snapshot.context.kinds() == ["system", "task", "summary"]
    assert f"`{exact.edit.command()}`" in summary_of(exact)
    assert f"`{exact.edit.command(wrong.wrong_line)}`" in summary_of(wrong)
    assert exact.edit.command() not in summary_of(prose) and "## Next" in summary_of(prose)
    assert wrong.wrong_line != exact.edit.line


@pytest.mark.slow
def test_following_the_exact_plan_passes_and_following_the_wrong_one_does_not(
    tiny_task_file, starts
):
    exact, wrong = starts["exact"], starts["wrong_line"]
    followed = continue_from(tiny_task_file, exact, f"```bash\n{exact.planned_command}\n```")
    metrics = plan_metrics(followed, exact)
    assert metrics is not None and metrics.as_dict() == {
        "success": 1.0,
        "follows_plan": 1.0,
        "valid_action_rate": 1.0,
        "format_error_rate": 0.0,
    }
    misled = continue_from(tiny_task_file, wrong, f"```bash\n{wrong.planned_command}\n```")
    assert plan_metrics(misled, wrong).as_dict()["success"] == 0.0
    assert plan_metrics(misled, wrong).follows_plan == 1.0
    rambling = continue_from(tiny_task_file, exact, "I think the bug is in add.")
    assert plan_metrics(rambling, exact).as_dict() == {
        "success": 0.0,
        "follows_plan": 0.0,
        "valid_action_rate": 0.0,
        "format_error_rate": 1.0,
    }


@pytest.mark.slow
def test_the_judge_replaces_a_first_step_that_ignores_the_plan_with_the_planned_command(
    tiny_task_file, starts
):
    """The continuation correction the collection trains on: no action, or another command,
    right after the compaction becomes the summary's planned command."""
    exact = starts["exact"]
    for text in ("I think the bug is in add.", "```bash\nls\n```"):
        corrected = continue_from(tiny_task_file, exact, text, ReviewLog(OracleJudge()))
        (call,) = corrected.model_calls()[-1:]
        assert call.produced_by == "judge" and call.correction == "continuation"
        assert exact.planned_command in call.output and corrected.reward == 1
