"""The reference agent: its repair templates, its summaries, and whole episodes in the env."""

from __future__ import annotations

import subprocess
from pathlib import Path

import gymnasium as gym
import pytest
from conftest import make_tiny_task
from sandbox_task import GIT

import ac_env  # noqa: F401  (registers the ids)
from ac_env.actions import Bash, Compact, Submit, TerminalParser
from ac_env.agents.localize import Suspect, localize_command, parse_report
from ac_env.agents.reference import (
    RUBRIC_MIN_STALE_TOKENS,
    SRC_LAYOUT,
    PhaseView,
    ReferenceAgent,
    parse_edit,
    read_history,
    replay,
    stale_tokens,
)
from ac_env.agents.repairs import Edit, function_edits, line_fixes
from ac_env.agents.reproduce import from_issue
from ac_env.agents.working_state import WorkingState, read_summary, write_summary
from ac_env.compaction import summary_problems
from ac_env.compaction.texts import COMPACTION_REQUEST
from ac_env.compaction.when import Moment
from ac_env.prompts import SYSTEM_PROMPT, task_message
from ac_env.tasks.model import GroundTruth, Task

ISSUE = "add(2, 3) returns -1 instead of 5."
FAILING = ["tests/test_ops.py::test_add"]
SUSPECT = Suspect("calc/ops.py", 6, 1.0, "add", 4, 6)


def observation(*messages: tuple[str, str], issue: str = ISSUE) -> tuple[dict[str, str], ...]:
    head = (
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task_message(issue)},
    )
    return head + tuple({"role": role, "content": content} for role, content in messages)


def command_of(text: str) -> str:
    action = TerminalParser().parse(text)
    assert isinstance(action, Bash), text
    return action.command


def step_kind(text: str) -> str:
    """The step a command names in its first comment line; ``submit`` for a submission."""
    if isinstance(TerminalParser().parse(text), Submit):
        return "submit"
    return command_of(text).split("\n", 1)[0].split(":", 1)[0].removeprefix("# ")


def run_episode(env: gym.Env, agent: ReferenceAgent, **reset: object):
    obs, _ = env.reset(**reset)
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(agent.act(obs))
    return reward, info, env.unwrapped.trajectory


def commands_after_compactions(trajectory) -> list[str]:
    """The step kind of the first command after each compaction."""
    calls = trajectory.model_calls()
    kinds = []
    for event in trajectory.compactions():
        following = [c for c in calls if c.step > event.step]
        kinds.append(step_kind(following[0].output) if following else "none")
    return kinds


# ---- repair templates --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("buggy", "fixed"),
    [
        ("    return a - b", "    return a + b"),
        ("    if n <= limit:", "    if n < limit:"),
        ("    if key != wanted:", "    if key == wanted:"),
        ("    if key not in table:", "    if key in table:"),
        ("    if value is not None and ok:", "    if value is None and ok:"),
        ("    while not queue:", "    while queue:"),
        ("    if flag or other:", "    if flag and other:"),
        ("    total -= item", "    total += item"),
        ("    return price / rate", "    return price * rate"),
        ("    return price / rate", "    return price // rate"),
        ("    return items[start:end - 1]", "    return items[start:end]"),
        ("    return items[:n]", "    return items[:n - 1]"),
        ("    for i in range(n + 1):", "    for i in range(n):"),
        ("    return parts[2]", "    return parts[1]"),
        ("    return round(x, 3)", "    return round(x, 2)"),
        ("    factor = 0.5", "    factor = 0.25"),
        ("    return pow(exponent, base)", "    return pow(base, exponent)"),
        ("def f(x, strict=False):", "def f(x, strict=True):"),
    ],
)
def test_templates_undo_each_mutation_family(buggy, fixed):
    assert fixed in [fix.new for fix in line_fixes(buggy)]


def test_templates_leave_strings_comments_and_docstrings_alone():
    assert line_fixes("    s = 'a < b'  # c - d") == []
    lines = {
        1: "def f(a):",
        2: '    """Docstring with a < b',
        3: '    and c - d."""',
        4: "    pass",
    }
    assert function_edits("m.py", lines, {4: 1.0}) == []


def test_candidates_rank_suspicious_lines_then_likely_templates():
    lines = {1: "def f(a, b):", 2: "    c = a * 3", 3: "    return c - b"}
    edits = [edit for _, edit in function_edits("m.py", lines, {2: 0.4, 3: 1.0})]
    assert [e.line for e in edits[:1]] == [3]
    assert edits[0].label == "`-` -> `+`"
    assert {e.line for e in edits} == {2, 3}


# ---- localization --------------------------------------------------------------------------


def test_localize_command_ranks_the_buggy_line(tmp_path):
    task = make_tiny_task(tmp_path)
    command = localize_command()
    result = subprocess.run(
        ["bash", "-c", command], cwd=task.snapshot_dir, capture_output=True, text=True
    )
    suspects = parse_report(result.stdout)
    assert suspects[0] == SUSPECT


def test_localize_traces_the_failing_tests_first_and_stops_at_its_budget(tmp_path):
    repo = make_tiny_task(tmp_path).snapshot_dir
    extra = "from calc.ops import mul\n" + "".join(
        f"\n\ndef test_mul_{n}():\n    assert mul({n}, 1) == {n}\n" for n in range(3)
    )
    (repo / "tests" / "test_extra.py").write_text(extra)

    def run(command: str) -> str:
        return subprocess.run(
            ["bash", "-c", command], cwd=repo, capture_output=True, text=True
        ).stdout

    whole = run(localize_command(failing=FAILING))
    assert "(failing runs: 1, passing runs: 4)" in whole
    cut = run(localize_command(failing=FAILING, budget_s=0))
    assert "(failing runs: 1, passing runs: 1)" in cut  # stopped after one passing test
    assert parse_report(cut)[0] == parse_report(whole)[0] == SUSPECT


# ---- working state and summaries ---------------------------------------------------------


def test_summary_round_trip_keeps_the_working_state():
    fix = Edit("calc/ops.py", 6, "    return a - b", "    return a + b", "`-` -> `+`", 0)
    state = WorkingState(
        failing=FAILING,
        suspects=[SUSPECT],
        tried=["calc/ops.py:6 `a` -> `b`"],
        fix=fix,
        last_run="failing tests -> 1 passed, 0 failed",
    )
    summary = write_summary(state, "add is wrong", "verify")
    assert summary_problems(summary) == []
    again = read_summary(summary)
    assert again.failing == FAILING and again.suspects == [SUSPECT]
    assert again.tried == state.tried and again.fix == fix and again.pending is None
    assert again.sources == {} and again.read == set()  # nothing was read


READ_ADD = "calc/ops.py add lines 4-6"
ADD_CODE = {4: "def add(a, b):", 5: '    """Sum."""', 6: "    return a - b"}


def summary_with_the_code_of_add() -> str:
    """A summary written after reading ``add``: its lines under ``## Relevant code``."""
    state = WorkingState(
        failing=FAILING, suspects=[SUSPECT], read={READ_ADD}, sources={"calc/ops.py": ADD_CODE}
    )
    return write_summary(state, "add is wrong", "try the next candidate edit")


def test_summary_carries_the_code_read_and_the_agent_goes_on_without_reading_again():
    summary = summary_with_the_code_of_add()
    assert "## Relevant code" in summary and "     6\t    return a - b" in summary
    again = read_summary(summary)
    assert again.read == {READ_ADD} and again.sources == {"calc/ops.py": ADD_CODE}
    text = ReferenceAgent().act(observation(("user", summary))).text
    assert step_kind(text) == "try"  # without the code it would read add again


def test_a_summary_asked_for_again_at_once_leaves_the_code_out_from_then_on():
    """The context right after a summary with code was at the forced threshold: summaries
    that followed would each be asked for again (a loop), so the agent drops the code."""
    summary = summary_with_the_code_of_add()
    agent = ReferenceAgent()
    step = agent.act(observation(("user", summary))).text
    asked_again = observation(
        ("user", summary),
        ("assistant", step),
        ("user", "[exit code 1]"),
        ("user", COMPACTION_REQUEST),
    )
    lean = agent.act(asked_again).text
    assert isinstance(TerminalParser().parse(lean), Compact) and summary_problems(lean) == []
    assert "## Relevant code" not in lean and read_summary(lean).tight
    assert "read calc/ops.py" in lean.rsplit("## Next", 1)[1]  # it says it reads again
    # later summaries stay lean; a summary asked for after several turns keeps its code
    assert "## Relevant code" not in write_summary(read_summary(lean), "t", "x")
    later = observation(("user", summary), *[("assistant", step), ("user", "[exit code 1]")] * 2)
    assert (
        "## Relevant code"
        in agent.act((*later, {"role": "user", "content": COMPACTION_REQUEST})).text
    )


def test_summary_round_trip_in_reproduction_mode():
    pending = Edit("calc/ops.py", 2, "    return a - b", "    return a * b", "`-` -> `*`", 3)
    state = WorkingState(failing=[], reproduced=True, suspects=[SUSPECT], pending=pending)
    again = read_summary(write_summary(state, "t", "revert, then try the next edit"))
    assert again.failing == [] and again.from_issue and again.reproduced
    assert again.pending == pending and again.fix is None and not again.verified


def test_a_fresh_agent_needs_only_the_observation():
    agent = ReferenceAgent()
    assert step_kind(agent.act(observation()).text) == "test"


def test_forced_compaction_request_gets_a_valid_summary_of_its_state():
    agent = ReferenceAgent()
    suite_output = (
        "[exit code 1]\nFAILED tests/test_ops.py::test_add - assert -1 == 5\n"
        "1 failed, 1 passed in 0.1s"
    )
    first = agent.act(observation()).text
    obs = observation(("assistant", first), ("user", suite_output), ("user", COMPACTION_REQUEST))
    summary = agent.act(obs).text
    assert isinstance(TerminalParser().parse(summary), Compact)
    assert summary_problems(summary) == []
    assert read_summary(summary).failing == FAILING


SUITE_OUTPUT = (
    "[exit code 1]\nFAILED tests/test_ops.py::test_add - assert -1 == 5\n1 failed, 1 passed in 0.1s"
)
LONG_ISSUE = ISSUE + "\n\n" + "The traceback, repeated: add(2, 3) -> -1.\n" * 1500


def after_the_suite(agent: ReferenceAgent, issue: str, *head: tuple[str, str]):
    """The observation after the agent's first command (the suite) and its output."""
    first = agent.act(observation(*head, issue=issue)).text
    return observation(*head, ("assistant", first), ("user", SUITE_OUTPUT), issue=issue)


def after_a_long_suite(agent: ReferenceAgent) -> list[dict[str, str]]:
    """The observation after the suite printed a long log (stale once its result is known)."""
    first = agent.act(observation()).text
    log = "".join(f"tests/test_ops.py::test_case_{n} PASSED\n" for n in range(2000))
    return observation(("assistant", first), ("user", log + SUITE_OUTPUT))


def test_rubric_compacts_past_its_token_size_not_before():
    agent = ReferenceAgent(compact_when="rubric")
    assert isinstance(TerminalParser().parse(agent.act(after_a_long_suite(agent)).text), Compact)
    short = agent.act(after_the_suite(agent, ISSUE)).text
    assert step_kind(short) == "locate"  # running the suite ends no phase: no compaction
    # the agent that compacts after locating does not compact for size
    eager = ReferenceAgent(compact_when="after_locate")
    assert step_kind(eager.act(after_a_long_suite(eager)).text) == "locate"


def test_rubric_does_not_compact_when_nothing_is_stale():
    """A context large because of the task itself: compacting would remove nothing."""
    agent = ReferenceAgent(compact_when="rubric")
    moment = Moment.of_messages(after_the_suite(agent, LONG_ISSUE))
    assert moment.tokens > 12_000
    assert stale_tokens(moment, PhaseView.of(moment)) < RUBRIC_MIN_STALE_TOKENS
    observed = after_the_suite(agent, LONG_ISSUE)
    assert step_kind(agent.act(observed).text) == "locate"


def test_rubric_does_not_compact_again_a_few_turns_after_a_summary():
    agent = ReferenceAgent(compact_when="rubric")
    summary = write_summary(WorkingState(), "t", "run the test suite")
    obs = after_the_suite(agent, LONG_ISSUE, ("user", summary))
    assert step_kind(agent.act(obs).text) == "locate"


def test_summary_with_the_location_resumes_by_reading_it():
    summary = write_summary(WorkingState(failing=FAILING, suspects=[SUSPECT]), "t", "read")
    text = ReferenceAgent().act(observation(("user", summary))).text
    assert step_kind(text) == "read" and "sed -n '4,6p'" in command_of(text)


def test_summary_without_the_location_makes_it_search_again():
    summary = write_summary(WorkingState(failing=FAILING), "t", "fix calc/ops.py")
    assert "suspect" not in summary
    assert step_kind(ReferenceAgent().act(observation(("user", summary))).text) == "locate"


def test_summary_without_anything_known_starts_over():
    summary = "# Auto Context Summary\n## Known\nsomething\n## Workspace\nno changes\n## Next\nx"
    assert step_kind(ReferenceAgent().act(observation(("user", summary))).text) == "test"


def test_unhelpful_edit_is_reverted_and_ruled_out():
    read = "[exit code 0]\n     4\tdef add(a, b):\n     5\t    '''Add.'''\n     6\t    return a - b"
    summary = write_summary(WorkingState(failing=FAILING, suspects=[SUSPECT]), "t", "read")
    agent = ReferenceAgent()
    obs = observation(("user", summary))
    read_command = agent.act(obs).text
    obs += (("assistant", read_command), ("user", read))  # type: ignore[assignment]
    obs = tuple(m if isinstance(m, dict) else {"role": m[0], "content": m[1]} for m in obs)
    attempt = agent.act(obs).text
    edit = parse_edit(command_of(attempt))
    assert edit is not None and edit.new == "    return a + b"
    still_failing = "[exit code 1]\nFAILED tests/test_ops.py::test_add\n1 failed in 0.1s"
    obs += ({"role": "assistant", "content": attempt}, {"role": "user", "content": still_failing})
    state = replay(read_history(obs))
    assert state.tried == [edit.key] and state.pending == edit and state.fix is None
    following = command_of(agent.act(obs).text)
    assert following.split("\n")[1:3] == [SRC_LAYOUT, "git checkout -- calc/ops.py"]


def test_reproduction_from_an_issue_snippet():
    issue = (
        "### add is off\n\nMinimal reproduction:\n\n```python\nfrom calc.ops import add\n\n"
        "print(add(2, 3))  # expected: 5\n```\n\n**Expected:** I expected the values in the "
        "`# expected:` comments.\n"
    )
    reproduction = from_issue(issue)
    assert reproduction is not None and reproduction.expected_exception is None
    assert "check((add(2, 3)), (5), 'add(2, 3)')" in reproduction.check_source()
    raising = from_issue(
        issue.replace("the values in the `# expected:` comments", "`ValueError` to be raised")
    )
    assert raising is not None and raising.expected_exception == "ValueError"
    assert from_issue("no code here") is None


def test_compact_when_is_validated():
    with pytest.raises(ValueError, match="compact_when"):
        ReferenceAgent(compact_when="sometimes")  # type: ignore[arg-type]


# ---- whole episodes in the real env --------------------------------------------------------


def make_env(task_file: Path, **kwargs: object) -> gym.Env:
    return gym.make("AutoCompact-SWE-v0", task_source=str(task_file), split=None, **kwargs)


def test_solves_the_tiny_task(tiny_task_file):
    env = make_env(tiny_task_file)
    reward, info, trajectory = run_episode(
        env, ReferenceAgent(), options={"task_id": "tiny-calc-1"}
    )
    env.close()
    assert reward == 1.0 and info["exit_reason"] == "submitted"
    kinds = [step_kind(c.output) for c in trajectory.model_calls()[:-1]]
    assert kinds == ["test", "locate", "read", "try", "verify"]
    assert "+    return a + b" in trajectory.end.patch


def test_continues_from_its_own_summary_after_forced_compaction(tiny_task_file):
    env = make_env(tiny_task_file, forced_compaction_threshold=1400)
    reward, _, trajectory = run_episode(env, ReferenceAgent(), options={"task_id": "tiny-calc-1"})
    env.close()
    events = trajectory.compactions()
    assert events and all(e.trigger == "forced" and e.summarizer == "policy" for e in events)
    assert reward == 1.0
    # after each summary it picks up where it was: never back to running the suite
    assert "test" not in commands_after_compactions(trajectory)


def compacting_on_its_own(tiny_task_file, compact_when: str):
    """The tiny task with no forced compaction: every compaction is the agent's own."""
    env = make_env(tiny_task_file, forced_compaction_threshold=None)
    agent = ReferenceAgent(compact_when=compact_when)
    reward, _, trajectory = run_episode(env, agent, options={"task_id": "tiny-calc-1"})
    env.close()
    return reward, trajectory


def test_compacts_on_its_own_once_the_bug_is_located(tiny_task_file):
    reward, trajectory = compacting_on_its_own(tiny_task_file, "after_locate")
    events = trajectory.compactions()
    assert [(e.trigger, e.summarizer) for e in events] == [("proactive", "policy")]
    assert "suspect: calc/ops.py:6 in add [4-6]" in events[0].summary
    assert commands_after_compactions(trajectory) == ["read"]
    assert reward == 1.0


def test_rubric_compacts_a_small_context_at_a_phase_end(tiny_task_file):
    """A whole context under twice ``RUBRIC_MIN_STALE_TOKENS``: half of it stale is enough."""
    reward, trajectory = compacting_on_its_own(tiny_task_file, "rubric")
    events = trajectory.compactions()
    assert events and events[0].trigger == "proactive"
    assert max(c.context_tokens for c in trajectory.model_calls()) < 2 * RUBRIC_MIN_STALE_TOKENS
    assert commands_after_compactions(trajectory)[0] == "read"
    assert reward == 1.0


def _hidden_test_task(root: Path) -> Task:
    """The tiny task with its failing test hidden in ``test_patch`` (as in the hard split)."""
    repo = root / "tiny-hidden"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(
        "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    )
    tests = "from calc.ops import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
    (repo / "tests" / "test_ops.py").write_text(tests)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run([*GIT, *args], cwd=repo, check=True)
    hidden = "\n\ndef test_add():\n    from calc.ops import add\n    assert add(2, 3) == 5\n"
    (repo / "tests" / "test_ops.py").write_text(tests + hidden)
    test_patch = subprocess.run([*GIT, "diff"], cwd=repo, capture_output=True, text=True).stdout
    subprocess.run([*GIT, "checkout", "-q", "--", "."], cwd=repo, check=True)
    issue = (
        "### add gives the wrong answer\n\nTo reproduce:\n\n```python\nfrom calc.ops import add"
        "\n\nprint(add(2, 3))  # expected: 5\n```\n\n**Expected:** I expected the values in "
        "the `# expected:` comments.\n\n**Actual:** The script prints `-1` instead.\n"
    )
    return Task(
        instance_id="tiny-hidden",
        repo="local/calc",
        problem_statement=issue,
        patch="",
        test_patch=test_patch,
        FAIL_TO_PASS=["tests/test_ops.py::test_add"],
        PASS_TO_PASS=["tests/test_ops.py::test_mul"],
        snapshot_dir=repo,
        test_files=["tests/test_ops.py"],
        split="hard",
        ground_truth=GroundTruth(files=["calc/ops.py"], functions=["calc/ops.py:add"]),
    )


def test_reproduces_from_the_issue_when_no_test_fails(tmp_path):
    task_file = tmp_path / "hidden.jsonl"
    task_file.write_text(_hidden_test_task(tmp_path).model_dump_json() + "\n")
    env = make_env(task_file)
    reward, info, trajectory = run_episode(env, ReferenceAgent(), seed=0)
    env.close()
    kinds = [step_kind(c.output) for c in trajectory.model_calls()[:-1]]
    assert kinds == ["test", "reproduce", "locate", "read", "try", "verify"]
    assert "VERDICT: issue reproduced" in trajectory.tool_results()[1].output
    assert reward == 1.0 and info["exit_reason"] == "submitted"


def test_is_deterministic(tiny_task_file):
    env = make_env(tiny_task_file)
    first = run_episode(env, ReferenceAgent(), options={"task_id": "tiny-calc-1"})[2]
    second = run_episode(env, ReferenceAgent(), options={"task_id": "tiny-calc-1"})[2]
    env.close()
    assert [c.output for c in first.model_calls()] == [c.output for c in second.model_calls()]
    assert isinstance(TerminalParser().parse(first.model_calls()[-1].output), Submit)


def test_defaults_and_continuation_lines_share_their_statement_score():
    lines = {
        1: "def f(items, digits=1):",
        2: "    d = {'last': len(items) - 2,",
        3: "         'n': len(items) + 1}",
        4: "    return d * 2",
    }
    ranked = function_edits("m.py", lines, {2: 0.9, 4: 0.2})
    edits = [edit for _, edit in ranked]
    assert {score for score, edit in ranked if edit.line in (1, 3)} == {0.9}
    assert "m.py:1 `1` -> `0`" in [e.key for e in edits[:4]]  # a wrong default
    order = [e.line for e in edits]
    assert max(order.index(2), order.index(3)) < order.index(4)  # line 3 continues line 2


DELETIONS = {"dropped_branch", "removed_call"}


@pytest.mark.slow
def test_solves_builtin_easy_tasks_whose_bug_a_template_can_undo():
    from ac_env.tasks import load_tasks
    from ac_env.tasks.synthetic.suite import plan_suite

    without_copy = {plan.instance_id for plan in plan_suite() if not plan.bug_copy}
    tasks = [
        t
        for t in load_tasks("builtin", "easy", subset="eval")
        if t.ground_truth
        and not DELETIONS & set(t.ground_truth.operators)
        and t.instance_id in without_copy  # no deprecated copy shows the fix
    ][:3]
    env = gym.make(
        "AutoCompact-SWE-v0",
        split="easy",
        task_ids=[t.instance_id for t in tasks],
        forced_compaction_threshold=4000,
    )
    agent = ReferenceAgent()
    for task in tasks:
        reward, info, trajectory = run_episode(env, agent, options={"task_id": task.instance_id})
        assert reward == 1.0, (task.instance_id, info["exit_reason"])
        assert "test" not in commands_after_compactions(trajectory)
    env.close()
