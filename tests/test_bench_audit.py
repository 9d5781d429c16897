"""Summary audit (each claim class, a true and a false case) and continuation figures."""

from __future__ import annotations

import gymnasium as gym

import ac_env  # noqa: F401  (registers the ids)
from ac_env.analysis.audit import RunTally, SummaryWorkspace, audit_summary, audit_trajectory
from ac_env.analysis.continuation import continuations, follows
from ac_env.cost import CallCost
from ac_env.tasks.model import GroundTruth, Task
from ac_env.trajectory import CompactionEvent, ModelCall, ToolResult, Trajectory, TrajectoryHeader

TASK = Task(
    instance_id="t-1",
    repo="r",
    problem_statement="p",
    patch="",
    FAIL_TO_PASS=["tests/test_a.py::test_a"],
    PASS_TO_PASS=[],
    ground_truth=GroundTruth(files=["pkg/core.py"], functions=["pkg.core:parse_date"]),
)


def summary(known="- nothing yet", workspace="- no changes yet", tests="- none", next_="- x"):
    return (
        f"# Auto Context Summary\n## Known\n{known}\n## Workspace\n{workspace}\n"
        f"## Tests\n{tests}\n## Next\n{next_}"
    )


def audit(text, changed=(), last_run=None, root_cause_read=False):
    return audit_summary(text, 5, list(changed), last_run, TASK.ground_truth, root_cause_read)


GOOD = summary(
    known="- bug in pkg/core.py parse_date: off by one",
    workspace="- pkg/core.py: changed line 12, not verified yet",
    tests="- 1 failed, 9 passed",
    next_="- run the failing test tests/test_a.py::test_a",
)


def test_a_faithful_summary_passes_every_check():
    result = audit(GOOD, ["pkg/core.py"], RunTally(failed=1, passed=9), root_cause_read=True)
    assert result.problems == []
    assert not any(
        [
            result.missed_key_state,
            result.missed_next_step,
            result.false_workspace_claim,
            result.inconsistent_plan,
        ]
    )


def test_key_state_target_named_or_not():
    dropped = summary(known="- the bug is somewhere in the date code", next_="- read more code")
    assert audit(dropped, root_cause_read=True).missed_key_state
    assert not audit(dropped, root_cause_read=False).missed_key_state  # not found yet: fine
    by_function = summary(known="- parse_date is wrong", next_="- fix it")
    assert not audit(by_function, root_cause_read=True).missed_key_state


def test_key_state_changed_files_named_or_not():
    text = summary(
        known="- pkg/core.py is the culprit", workspace="- pkg/core.py edited", next_="- run tests"
    )
    assert not audit(text, ["pkg/core.py"]).missed_key_state
    assert audit(text, ["pkg/core.py", "pkg/util.py"]).missed_key_state


def test_workspace_claims_against_git_diff():
    no_changes = summary(next_="- run tests")
    assert not audit(no_changes, []).false_workspace_claim
    result = audit(no_changes, ["pkg/core.py"])
    assert result.false_workspace_claim and "claims no changes" in result.problems[-1]
    claims_edit = summary(workspace="- edited pkg/core.py", next_="- run tests")
    assert not audit(claims_edit, ["pkg/core.py"]).false_workspace_claim
    assert audit(claims_edit, []).false_workspace_claim  # the edit is not in the workspace
    kept = summary(
        workspace='- kept fix in pkg/core.py; still failing: ["tests/test_core.py::test_a"]',
        next_="- run tests",
    )
    assert not audit(kept, ["pkg/core.py"]).false_workspace_claim  # a test id claims no edit
    modelled = summary(workspace="- kept fix in pkg/core.py, as in pkg/util.py", next_="- test")
    assert not audit(modelled, ["pkg/core.py"]).false_workspace_claim  # a reference, not an edit
    two_lines = summary(workspace="- kept fix in pkg/core.py\n- pkg/util.py edited", next_="- test")
    assert audit(two_lines, ["pkg/core.py"]).false_workspace_claim


def test_test_claims_against_the_last_real_run():
    passing = summary(workspace="- pkg/core.py fixed", tests="- all tests pass", next_="- submit")
    assert not audit(passing, ["pkg/core.py"], RunTally(failed=0, passed=10)).false_workspace_claim
    assert audit(passing, ["pkg/core.py"], RunTally(failed=2, passed=8)).false_workspace_claim
    assert audit(passing, ["pkg/core.py"], None).false_workspace_claim  # no run at all
    tally = summary(
        workspace="- pkg/core.py", tests="- failing tests after edit -> 3 passed", next_="- submit"
    )
    assert not audit(tally, ["pkg/core.py"], RunTally(failed=0, passed=3)).false_workspace_claim


def test_a_run_of_several_pytest_sessions_counts_them_all():
    """The reference agent's localization runs the failing tests, then the rest: its output
    holds two tallies, and the failing session must not be forgotten."""
    output = "FAILED tests/t.py::test_a - assert 1\n5 failed in 0.08s\n....\n55 passed in 0.11s\n"
    tally = RunTally.of(output)
    assert tally == RunTally(failed=5, passed=55)
    failing = summary(
        workspace="- no changes yet", tests="- 5 tests fail", next_="- read pkg/core.py"
    )
    assert not audit(failing, last_run=tally).false_workspace_claim
    assert RunTally.of("no tests ran") is None


def test_next_step_concrete_or_missing():
    assert not audit(summary(next_="- grep -rn parse_date pkg")).missed_next_step
    assert audit(summary(next_="- keep going")).missed_next_step
    no_next = "# Auto Context Summary\n## Known\n- x\n## Workspace\n- no changes yet"
    assert audit(no_next).missed_next_step


def test_plan_consistent_with_the_stated_state():
    django = summary(
        workspace="- pkg/core.py edited; a syntax error remains",
        tests="- not run",
        next_="- done, stop",
    )
    assert audit(django, ["pkg/core.py"]).inconsistent_plan
    failing = summary(workspace="- pkg/core.py", tests="- 2 failed, 8 passed", next_="- submit")
    assert audit(failing, ["pkg/core.py"], RunTally(failed=2, passed=8)).inconsistent_plan
    finished = summary(workspace="- pkg/core.py, verified", tests="- 10 passed", next_="- submit")
    assert not audit(finished, ["pkg/core.py"], RunTally(failed=0, passed=10)).inconsistent_plan
    still_working = summary(workspace="- pkg/core.py", tests="- 2 failed", next_="- fix line 3")
    assert not audit(still_working, ["pkg/core.py"]).inconsistent_plan


def tool(step, command, output=""):
    return ToolResult(
        step=step,
        command=command,
        output=output,
        exit_code=0,
        timed_out=False,
        truncated=False,
        duration_s=0.0,
    )


def call(step, action):
    return ModelCall(
        step=step,
        segment=0,
        messages=[],
        message_kinds=[],
        output="",
        action=action,
        context_tokens=10,
        cost=CallCost(),
    )


def test_continuation_rereads_researches_and_following_the_next_step():
    text = summary(known="- pkg/core.py line 12", next_="- edit pkg/core.py line 12")
    t = Trajectory(TrajectoryHeader(instance_id="t-1", split="easy"))
    for event in [
        call(0, {"kind": "bash", "command": "cat pkg/core.py"}),
        tool(0, "cat pkg/core.py"),
        call(1, {"kind": "bash", "command": "grep -rn parse pkg"}),
        tool(1, "grep -rn parse pkg"),
        call(2, {"kind": "compact", "summary": text}),
        CompactionEvent(
            step=2,
            trigger="proactive",
            summarizer="policy",
            summary=text,
            rewrite_from=2,
            segment_before=0,
            segment_after=1,
            tokens_before=100,
            tokens_after=20,
            kept_messages=0,
        ),
        call(3, {"kind": "bash", "command": "python3 fix.py pkg/core.py"}),
        tool(3, "python3 fix.py pkg/core.py"),
        call(4, {"kind": "bash", "command": "cat pkg/core.py"}),
        tool(4, "cat pkg/core.py"),
        call(5, {"kind": "bash", "command": "grep -rn parse pkg"}),
        tool(5, "grep -rn parse pkg"),
        call(6, {"kind": "bash", "command": "cat pkg/other.py"}),
        tool(6, "cat pkg/other.py"),
    ]:
        t.append(event)
    (found,) = continuations(t)
    assert (found.step, found.rereads, found.researches) == (2, 1, 1)
    assert found.follows_next_step is True


def test_a_skipped_compaction_wrote_no_summary_to_audit():
    text = summary()
    t = Trajectory(TrajectoryHeader(instance_id="t-1", split="easy"))
    t.append(call(0, {"kind": "compact", "summary": "# Auto Context Summary"}))  # skipped
    t.append(call(1, {"kind": "compact", "summary": text}))
    t.append(
        CompactionEvent(
            step=1,
            trigger="proactive",
            summarizer="policy",
            summary=text,
            rewrite_from=2,
            segment_before=0,
            segment_after=1,
            tokens_before=100,
            tokens_after=20,
            kept_messages=0,
        )
    )
    assert [audit.step for audit in audit_trajectory(t, TASK, {}, None)] == [1]


def test_follows_rules():
    assert follows("- run the tests", {"kind": "bash"}, "python3 -m pytest -q") is True
    assert follows("- run the tests", {"kind": "bash"}, "cat a.py") is False
    assert follows("- submit", {"kind": "submit"}, "") is True
    assert follows("- read pkg/a.py", {"kind": "submit"}, "") is False
    assert follows("- think harder", {"kind": "bash"}, "ls") is None


def test_summary_workspace_records_git_diff_files_when_a_summary_is_written(tiny_task_file):
    env = SummaryWorkspace(
        gym.make("AutoCompact-SWE-v0", task_source=str(tiny_task_file), split=None)
    )
    env.reset(seed=0, options={"task_id": "tiny-calc-1"})
    env.step("```bash\nsed -i 's/a - b/a + b/' calc/ops.py\n```")
    assert env.changed == {}
    env.step(summary(workspace="- calc/ops.py fixed", next_="- run tests"))
    assert env.changed == {1: ["calc/ops.py"]}
    env.close()
