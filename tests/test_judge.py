"""The Judge: the oracle's three checks (each with a case it corrects and one it accepts) on a
real env and workspace, decided from the execution history alone (ground truth only when
asked), and the LLM judge's verdict parsing."""

from __future__ import annotations

import gymnasium as gym
import pytest

import ac_env  # noqa: F401  (registers the ids)
from ac_env.actions import Bash, Compact, TerminalParser
from ac_env.analysis.audit import changed_files
from ac_env.compaction import summary_problems
from ac_env.policy import PolicyOutput
from ac_train.judge.evidence import unsupported_claims
from ac_train.judge.llm import LLMJudge, parse_verdict
from ac_train.judge.oracle import (
    Facts,
    OracleJudge,
    oracle_summary,
    planned_command,
    summary_problems_against_state,
)
from ac_train.judge.review import (
    JudgeView,
    PrivilegedJudgeView,
    PublicTask,
    Verdict,
    apply_verdict,
    correction_rubric,
    judge_view,
)

RUN_TESTS = "```bash\npython3 -m pytest -q -p no:cacheprovider 2>&1 | tail -n 20\n```"
READ_ROOT = "```bash\ncat calc/ops.py\n```"
CRASH_IN_ADD = "```bash\npython3 -c 'from calc.ops import add; add(None, 1)'\n```"
FIX = "```bash\nsed -i 's/a - b/a + b/' calc/ops.py\n```"
GOOD_SUMMARY = """# Auto Context Summary
## Task
add(2, 3) returns -1
## Known
The bug is in `add` in calc/ops.py: it subtracts.
## Workspace
no changes yet
## Tests
1 failed, 1 passed: tests/test_ops.py::test_add fails
## Next
Edit add: `sed -i 's/a - b/a + b/' calc/ops.py`
"""


@pytest.fixture
def env(tiny_task_file):
    env = gym.make("AutoCompact-SWE-v0", task_source=str(tiny_task_file), split=None)
    yield env
    env.close()


def play(env, *outputs: str):
    observation, _ = env.reset(options={"task_id": "tiny-calc-1"})
    for output in outputs:
        observation, *_ = env.step(output)
    return observation


def review(judge, env, observation, text: str) -> Verdict:
    return judge.review(judge_view(judge, env, observation), PolicyOutput(text=text))


def parsed(text: str):
    return TerminalParser().parse(text)


def test_trigger_compact_now_when_located_and_still_searching(env):
    judge = OracleJudge(min_history_chars=0)
    observation = play(env, RUN_TESTS, READ_ROOT, "```bash\nls\n```")
    verdict = review(judge, env, observation, "```bash\ngrep -rn 'def mul' .\n```")
    assert verdict.decision == "correct" and verdict.correction == "trigger"
    summary = verdict.replacement
    assert isinstance(parsed(summary), Compact) and summary_problems(summary) == []
    assert "calc/ops.py" in summary and "`add`" in summary
    assert "no changes yet" in summary and "tests/test_ops.py::test_add" in summary


def test_trigger_lets_the_step_after_locating_and_edits_pass(env):
    judge = OracleJudge(min_history_chars=0)
    observation = play(env, RUN_TESTS, READ_ROOT)
    assert review(judge, env, observation, "```bash\ngrep -rn add .\n```").decision == "accept"
    observation = play(env, RUN_TESTS, READ_ROOT, "```bash\nls\n```")
    assert review(judge, env, observation, FIX).decision == "accept"


def test_trigger_does_not_ask_for_compaction_before_locating(env):
    judge = OracleJudge(min_history_chars=0)
    observation = play(env, RUN_TESTS, "```bash\nls\n```", "```bash\nls tests\n```")
    assert review(judge, env, observation, "```bash\ngrep -rn mul .\n```").decision == "accept"


def test_trigger_not_yet_when_compacting_before_locating(env):
    observation = play(env, RUN_TESTS)
    verdict = review(OracleJudge(), env, observation, GOOD_SUMMARY)
    assert verdict.decision == "correct" and verdict.correction == "trigger"
    assert isinstance(parsed(verdict.replacement), Bash)


def test_trigger_not_yet_right_after_a_compaction(env):
    observation = play(env, RUN_TESTS, READ_ROOT, GOOD_SUMMARY)
    verdict = review(OracleJudge(), env, observation, GOOD_SUMMARY)
    assert verdict.correction == "trigger" and "ago" in verdict.reason


def test_working_state_accepts_a_faithful_summary(env):
    observation = play(env, RUN_TESTS, READ_ROOT)
    assert review(OracleJudge(), env, observation, GOOD_SUMMARY).decision == "accept"


def test_working_state_corrects_a_false_workspace_claim(env):
    observation = play(env, RUN_TESTS, READ_ROOT, FIX)
    wrong = GOOD_SUMMARY.replace("The bug is in `add` in calc/ops.py: it subtracts.", "unknown")
    verdict = review(OracleJudge(), env, observation, wrong)
    assert verdict.correction == "working_state"
    assert "claims no changes" in verdict.reason
    view = JudgeView.of(env, observation)
    assert changed_files(view.diff) == ["calc/ops.py"]
    assert summary_problems_against_state(view, Facts.of(view), verdict.replacement) == []
    assert "calc/ops.py: changed, not verified yet" in verdict.replacement


def test_working_state_writes_the_summary_a_forced_request_did_not_get(tiny_task_file):
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        forced_compaction_threshold=1,
    )
    try:
        observation, _ = env.reset(options={"task_id": "tiny-calc-1"})
        observation, *_ = env.step(RUN_TESTS)
        assert Facts.of(JudgeView.of(env, observation)).forced
        verdict = review(OracleJudge(), env, observation, "```bash\nls\n```")
        assert verdict.correction == "working_state"
        _, _, _, _, info = env.step(apply_verdict(PolicyOutput(text="ls"), verdict))
        assert info["compaction"]["kind"] == "forced"
        call = env.unwrapped.trajectory.model_calls()[-1]
        assert call.produced_by == "judge" and call.correction == "working_state"
    finally:
        env.close()


def corrected_summary(env, observation) -> tuple[bool, str]:
    view = JudgeView.of(env, observation)
    facts = Facts.of(view)
    return facts.located, oracle_summary(view, facts)


@pytest.mark.parametrize(
    "command",
    [
        "head -n 3 calc/ops.py",  # the file's head: its docstring, not the buggy line
        "grep -rn 'def add' .",  # a grep hit naming the file and the function
    ],
)
def test_a_glance_at_the_file_does_not_locate_the_bug(env, command):
    observation = play(env, RUN_TESTS, f"```bash\n{command}\n```")
    located, summary = corrected_summary(env, observation)
    assert not located
    assert "Not located yet" in summary
    for earned_only in ("`add`", "Ruled out", "def add"):  # not shown by the history yet
        assert earned_only not in summary
    assert "calc/ops.py" not in summary.split("## Read so far")[0]


@pytest.mark.parametrize(
    "outputs",
    [
        # the failing statement calls add, then a read shows add's code
        (RUN_TESTS, "```bash\nsed -n 4,6p calc/ops.py\n```"),
        # a traceback passes through add, then a read shows its code
        (CRASH_IN_ADD, "```bash\ngrep -n -A 2 'def add' calc/ops.py\n```"),
    ],
)
def test_a_failing_run_pointing_to_code_that_was_read_locates_the_bug(env, outputs):
    observation = play(env, *outputs)
    located, summary = corrected_summary(env, observation)
    assert located
    assert "`add` in calc/ops.py" in summary and "its code was read at step 1" in summary
    assert "Ruled out" not in summary
    assert unsupported_claims(summary, Facts.of(JudgeView.of(env, observation)).evidence) == []


@pytest.mark.parametrize(
    "outputs",
    [
        (READ_ROOT,),  # the whole file, gold hunk included, but no failing run behind it
        (CRASH_IN_ADD,),  # a traceback into add, but add's code never read
        (RUN_TESTS, "```bash\ncat calc/__init__.py\n```"),  # a failing run, other code read
    ],
)
def test_seeing_the_buggy_code_without_evidence_locates_nothing(env, outputs):
    """The previous default located the bug on a single bulk ``cat`` (it shows the gold hunk's
    lines and names the file); only the ground-truth option still does."""
    observation = play(env, *outputs)
    located, summary = corrected_summary(env, observation)
    assert not located and "Not located yet" in summary and "`add`" not in summary
    early = review(OracleJudge(), env, observation, GOOD_SUMMARY)
    assert early.correction == "trigger" and "not located" in early.reason


def test_the_ground_truth_option_locates_from_the_gold_patch(env):
    observation = play(env, READ_ROOT)
    view = JudgeView.of(env, observation)
    privileged_view = PrivilegedJudgeView.of(env, observation)
    privileged = Facts.of(privileged_view)
    assert privileged.located and not Facts.of(view).located
    summary = oracle_summary(privileged_view, privileged)
    assert "The bug is in `add` in calc/ops.py." in summary
    assert any(p.startswith("location:") for p in unsupported_claims(summary, privileged.evidence))
    untested = GOOD_SUMMARY.split("## Tests")[0] + "## Next" + GOOD_SUMMARY.split("## Next")[1]
    assert review(OracleJudge(ground_truth=True), env, observation, untested) == Verdict(
        decision="accept"
    )
    assert review(OracleJudge(), env, observation, untested).correction == "trigger"


def test_the_ground_truth_option_refuses_a_task_without_ground_truth(env):
    observation = play(env, READ_ROOT)
    view = PrivilegedJudgeView.of(env, observation)
    bare = view.gold.model_copy(update={"ground_truth": None})
    blind = PrivilegedJudgeView(**{**vars(view), "gold": bare})
    with pytest.raises(ValueError, match="ground_truth"):
        OracleJudge(ground_truth=True).review(blind, PolicyOutput(text=GOOD_SUMMARY))
    assert OracleJudge().review(blind, PolicyOutput(text=GOOD_SUMMARY)).correction == "trigger"


GOLD_FIELDS = ("patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS", "test_order", "test_files")


def test_a_judge_sees_no_gold_field_unless_it_is_the_privileged_one(env):
    """The default oracle and the LLM judge get a view whose task type has no gold field; only
    the ground-truth oracle gets the whole task, and it refuses a view without it."""
    observation = play(env, READ_ROOT)
    view = judge_view(OracleJudge(), env, observation)
    assert type(view) is JudgeView and isinstance(view.task, PublicTask)
    for name in (*GOLD_FIELDS, "ground_truth"):
        assert name not in PublicTask.model_fields and not hasattr(view.task, name), name
    assert view.task.problem_statement == env.unwrapped.task.problem_statement
    assert type(judge_view(LLMJudge(None), env, observation)) is JudgeView
    privileged = judge_view(OracleJudge(ground_truth=True), env, observation)
    assert isinstance(privileged, PrivilegedJudgeView)
    assert privileged.gold.patch == env.unwrapped.task.patch != ""
    with pytest.raises(TypeError, match="PrivilegedJudgeView"):
        OracleJudge(ground_truth=True).review(view, PolicyOutput(text=GOOD_SUMMARY))


def test_working_state_corrects_a_cause_the_history_does_not_show(tiny_task_file):
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        forced_compaction_threshold=1,
    )
    try:
        observation, _ = env.reset(options={"task_id": "tiny-calc-1"})
        observation, *_ = env.step(READ_ROOT)
        guessed = GOOD_SUMMARY.replace("1 failed, 1 passed: tests/test_ops.py::test_add fails", "")
        verdict = review(OracleJudge(), env, observation, guessed)
        assert verdict.correction == "working_state"
        assert "location:" in verdict.reason and "names add, calc/ops.py" in verdict.reason
        assert "`add`" not in verdict.replacement
    finally:
        env.close()


def test_a_stale_passing_run_does_not_verify_a_later_edit(env):
    observation = play(
        env, RUN_TESTS, READ_ROOT, FIX, RUN_TESTS, "```bash\necho '# x' >> calc/ops.py\n```"
    )
    view = JudgeView.of(env, observation)
    facts = Facts.of(view)
    assert facts.evidence.last_run.failed == 0 and not facts.evidence.verified
    summary = oracle_summary(view, facts)
    assert "calc/ops.py: changed, not verified yet" in summary
    claimed = summary.replace("not verified yet", "verified")
    assert any(p.startswith("workspace:") for p in unsupported_claims(claimed, facts.evidence))
    observation = play(env, RUN_TESTS, READ_ROOT, FIX, RUN_TESTS)
    view = JudgeView.of(env, observation)
    assert "changed, verified" in oracle_summary(view, Facts.of(view))


def test_a_forced_summary_before_locating_states_no_conclusion(tiny_task_file):
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        forced_compaction_threshold=1,
    )
    try:
        observation, _ = env.reset(options={"task_id": "tiny-calc-1"})
        observation, *_ = env.step("```bash\nhead -n 3 calc/ops.py\n```")
        verdict = review(OracleJudge(), env, observation, "```bash\nls\n```")
        assert verdict.correction == "working_state"
        assert "Not located yet" in verdict.replacement and "`add`" not in verdict.replacement
        _, _, _, _, info = env.step(apply_verdict(PolicyOutput(text="ls"), verdict))
        assert info["compaction"]["summarizer"] == "judge"
        assert env.unwrapped.trajectory.compactions()[-1].summarizer == "judge"
    finally:
        env.close()


def test_continuation_corrects_a_repeated_search_and_an_ignored_plan(env):
    search = "```bash\ngrep -rn 'def add' .\n```"
    observation = play(env, RUN_TESTS, search, READ_ROOT, GOOD_SUMMARY)
    verdict = review(OracleJudge(), env, observation, search)
    assert verdict.correction == "continuation" and "repeats a search" in verdict.reason
    assert planned_command(verdict.replacement.split("```bash\n")[1]) is None
    assert "sed -i 's/a - b/a + b/' calc/ops.py" in verdict.replacement
    ignored = review(OracleJudge(), env, observation, "```bash\nls\n```")
    assert ignored.correction == "continuation" and "ignores" in ignored.reason


def test_continuation_accepts_the_planned_step(env):
    observation = play(env, RUN_TESTS, READ_ROOT, GOOD_SUMMARY)
    assert review(OracleJudge(), env, observation, FIX).decision == "accept"


def test_apply_verdict_records_the_correction():
    candidate = PolicyOutput(text="x", prompt_token_ids=[1, 2], output_token_ids=[3])
    verdict = Verdict(decision="correct", correction="trigger", replacement=GOOD_SUMMARY)
    executed = apply_verdict(candidate, verdict)
    assert executed.produced_by == "judge" and executed.rejected_output == "x"
    assert executed.prompt_token_ids == [1, 2] and executed.output_token_ids is None
    assert apply_verdict(candidate, Verdict(decision="accept")) is candidate


def test_verdict_validation():
    with pytest.raises(ValueError, match="correction"):
        Verdict(decision="correct", replacement="x")
    with pytest.raises(ValueError, match="accept"):
        Verdict(decision="accept", correction="trigger")


def test_parse_verdict():
    text = 'Sure. {"decision": "correct", "correction": "continuation", "replacement": "x"} ok'
    assert parse_verdict(text).correction == "continuation"
    assert parse_verdict('{"decision": "maybe"}') is None
    schema_accept = (
        '{"decision": "accept", "correction": "none", "replacement": "", "reason": "ok"}'
    )
    assert parse_verdict(schema_accept) == Verdict(decision="accept", reason="ok")
    assert parse_verdict('{"decision": "correct", "correction": "trigger"}') is None
    assert parse_verdict("no json here") is None


class Answers:
    """A judge backend answering from a list (the verdict text an LLM would write)."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list = []

    def act(self, observation):
        self.prompts.append(observation)
        return PolicyOutput(text=self.answers.pop(0))


def test_llm_judge_uses_a_valid_verdict_and_accepts_what_it_cannot_use(env):
    observation = play(env, RUN_TESTS)
    replacement = (
        '{"decision": "correct", "correction": "trigger", "replacement": "```bash\\nls\\n```"}'
    )
    bad_action = '{"decision": "correct", "correction": "trigger", "replacement": "just ls"}'
    wrong_kind = replacement.replace('"trigger"', '"working_state"')  # a command, no summary
    backend = Answers(replacement, bad_action, wrong_kind, "I think it is fine")
    judge = LLMJudge(backend)
    assert review(judge, env, observation, GOOD_SUMMARY).replacement == "```bash\nls\n```"
    for _ in range(3):
        assert review(judge, env, observation, GOOD_SUMMARY).decision == "accept"
    assert judge.rejected == {"not_an_action": 1, "wrong_kind": 1, "no_verdict": 1}
    prompt = backend.prompts[0]
    assert "working_state" in prompt[0]["content"] and GOOD_SUMMARY in prompt[1]["content"]


def test_the_llm_judge_is_given_the_oracles_rubric(env):
    observation = play(env, RUN_TESTS)
    backend = Answers('{"decision": "accept"}')
    LLMJudge(backend).review(JudgeView.of(env, observation), PolicyOutput(text=GOOD_SUMMARY))
    system = backend.prompts[0][0]["content"]
    assert correction_rubric() in system
    assert "located only when the history shows" in system


def test_llm_judge_sees_the_real_diff_and_test_tally(env):
    observation = play(env, RUN_TESTS, FIX)
    backend = Answers('{"decision": "accept"}')
    LLMJudge(backend).review(JudgeView.of(env, observation), PolicyOutput(text=GOOD_SUMMARY))
    request = backend.prompts[0][1]["content"]
    assert "-    return a - b\n+    return a + b" in request  # the workspace's real diff
    assert "## Last test run (real)\n1 failed, 1 passed" in request


@pytest.mark.slow
def test_llm_judge_on_a_real_model_never_crashes(env):
    from ac_train.models.checkpoints import tiny_model_and_tokenizer
    from ac_train.models.policy import TransformersPolicy

    model, tokenizer = tiny_model_and_tokenizer()
    judge = LLMJudge(TransformersPolicy(model, tokenizer, max_new_tokens=16, seed=0))
    observation = play(env, RUN_TESTS)
    verdict = review(judge, env, observation, GOOD_SUMMARY)
    assert verdict.decision == "accept" and judge.rejected == {"no_verdict": 1}
