"""The reference agent's wider search: a bug among several (a partial fix kept, then the rest
searched; a wrong one dropped), and a deleted statement brought back from another copy of the
function that the repository keeps."""

from __future__ import annotations

import subprocess
from pathlib import Path

from sandbox_task import diff_after, git
from test_reference_agent import (
    command_of,
    commands_after_compactions,
    make_env,
    observation,
    run_episode,
    step_kind,
)

from ac_env.agents.edit_script import edit_command, parse_edit, undo_command
from ac_env.agents.localize import Suspect
from ac_env.agents.reference import SRC_LAYOUT, ReferenceAgent, read_history, replay
from ac_env.agents.repairs import Edit, function_edits
from ac_env.agents.twins import parse_twins, twins_command
from ac_env.agents.working_state import KeptFix, WorkingState, read_summary, write_summary
from ac_env.compaction import summary_problems
from ac_env.tasks.model import Task

OPS = "calc/ops.py"
TWO_BUGS = '''"""Arithmetic helpers."""


def add(a, b):
    """Return a + b."""
    return a - b


def mul(a, b):
    """Return a * b."""
    return a / b


def neg(a):
    """Return -a."""
    return -a
'''
TWO_BUG_TESTS = """from calc.ops import add, mul, neg


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_neg():
    assert neg(2) == -2
"""
FOUR_BUGS = '''"""Arithmetic helpers."""


def add(a, b):
    return a - b


def mul(a, b):
    return a / b


def sub(a, b):
    return a + b


def div(a, b):
    return a * b


def neg(a):
    return -a
'''
FOUR_FIXED = '''"""Arithmetic helpers."""


def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def sub(a, b):
    return a - b


def div(a, b):
    return a / b


def neg(a):
    return -a
'''
FOUR_BUG_TESTS = """from calc.ops import add, div, mul, neg, sub


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_sub():
    assert sub(5, 3) == 2


def test_div():
    assert div(6, 3) == 2


def test_neg():
    assert neg(2) == -2
"""
SAFE_DIV = '''"""Arithmetic helpers."""


def mul(a, b):
    """Return a * b."""
    return a * b


def safe_div(a, b):
    """``a / b``, or 0 when ``b`` is 0."""
    if b == 0:
        return 0
    return a / b
'''
# The deprecated copy predates the deleted guard, and has a slip of its own (in ``mul``).
LEGACY = '"""Deprecated: the 0.x implementation of ``calc.ops``."""\n' + SAFE_DIV.split(
    '"""Arithmetic helpers."""', 1
)[1].replace("return a * b", "return a + b")
SAFE_DIV_TESTS = """from calc.ops import mul, safe_div


def test_mul():
    assert mul(2, 3) == 6


def test_safe_div():
    assert safe_div(6, 3) == 2


def test_safe_div_by_zero():
    assert safe_div(1, 0) == 0
"""


def make_repo_task(
    root: Path,
    instance_id: str,
    fixed: dict[str, str],
    bugs: dict[str, str],
    fail_to_pass: list[str],
    pass_to_pass: list[str],
) -> Task:
    """A one-commit repo holding ``fixed`` files with ``bugs`` written over them."""
    repo = root / instance_id
    for name, text in {"calc/__init__.py": "", **fixed, **bugs}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return Task(
        instance_id=instance_id,
        repo="local/calc",
        problem_statement="calc gives wrong answers",
        patch=diff_after(repo, {name: fixed[name] for name in bugs}),
        FAIL_TO_PASS=fail_to_pass,
        PASS_TO_PASS=pass_to_pass,
        snapshot_dir=repo,
        test_files=["tests/test_ops.py"],
    )


def task_file(tmp_path: Path, task: Task) -> Path:
    path = tmp_path / f"{task.instance_id}.jsonl"
    path.write_text(task.model_dump_json() + "\n")
    return path


def kinds_of(trajectory) -> list[str]:
    return [step_kind(call.output) for call in trajectory.model_calls()[:-1]]


# ---- whole episodes ----------------------------------------------------------------------------


def test_two_bugs_keeps_the_partial_fix_then_fixes_the_rest(tmp_path):
    env = make_env(task_file(tmp_path, _two_bug_task(tmp_path)))
    reward, info, trajectory = run_episode(env, ReferenceAgent(), seed=0)
    env.close()
    assert reward == 1.0 and info["exit_reason"] == "submitted"
    # both functions are equally suspect at first; add's fix is kept, then mul is located alone
    first = ["locate", "read", "read", "try", "verify"]
    assert kinds_of(trajectory) == ["test", *first, "locate", "read", "try", "verify"]
    assert "1 of 2 failing tests pass" in trajectory.model_calls()[5].output
    assert "+    return a + b" in trajectory.end.patch
    assert "+    return a * b" in trajectory.end.patch


def _two_bug_task(tmp_path: Path) -> Task:
    fixed = TWO_BUGS.replace("a - b", "a + b").replace("a / b", "a * b")
    return make_repo_task(
        tmp_path,
        "two-bugs",
        {OPS: fixed, "tests/test_ops.py": TWO_BUG_TESTS},
        {OPS: TWO_BUGS},
        ["tests/test_ops.py::test_add", "tests/test_ops.py::test_mul"],
        ["tests/test_ops.py::test_neg"],
    )


def test_four_bugs_are_fixed_one_after_another(tmp_path):
    task = make_repo_task(
        tmp_path,
        "four-bugs",
        {OPS: FOUR_FIXED, "tests/test_ops.py": FOUR_BUG_TESTS},
        {OPS: FOUR_BUGS},
        [f"tests/test_ops.py::test_{name}" for name in ("add", "mul", "sub", "div")],
        ["tests/test_ops.py::test_neg"],
    )
    env = make_env(task_file(tmp_path, task), forced_compaction_threshold=None, max_steps=100)
    reward, info, trajectory = run_episode(env, ReferenceAgent(), seed=0)
    env.close()
    assert reward == 1.0 and info["exit_reason"] == "submitted"
    # three partial fixes kept on top of each other, then the fourth verified
    assert kinds_of(trajectory).count("verify") == 4
    assert kinds_of(trajectory).count("locate") == 4


def test_compacts_after_each_kept_fix_and_carries_it_forward(tmp_path):
    env = make_env(task_file(tmp_path, _two_bug_task(tmp_path)), forced_compaction_threshold=None)
    agent = ReferenceAgent(compact_when="after_fix")
    reward, info, trajectory = run_episode(env, agent, seed=0)
    env.close()
    assert reward == 1.0 and info["exit_reason"] == "submitted"
    (event,) = trajectory.compactions()
    assert (event.trigger, event.summarizer) == ("proactive", "policy")
    carried = read_summary(event.summary)
    assert [k.still_failing for k in carried.kept] == [["tests/test_ops.py::test_mul"]]
    assert commands_after_compactions(trajectory) == ["locate"]  # the next bug, afresh


def test_after_fix_with_the_length_fallback_resumes_a_search_cut_by_forced_summaries(tmp_path):
    # the long split's fix32fb setting in miniature: a search longer than the fallback's
    # threshold is summarized mid-way, and the search goes on from the summary (with the code
    # it read, which a threshold below 2000 tokens leaves no room for)
    env = make_env(task_file(tmp_path, _two_bug_task(tmp_path)), forced_compaction_threshold=2500)
    agent = ReferenceAgent(compact_when="after_fix")
    reward, info, trajectory = run_episode(env, agent, seed=0)
    env.close()
    assert reward == 1.0 and info["exit_reason"] == "submitted"
    triggers = [event.trigger for event in trajectory.compactions()]
    assert triggers.index("forced") < triggers.index("proactive")  # cut before the first fix
    assert {event.summarizer for event in trajectory.compactions()} == {"policy"}


def test_deleted_guard_comes_back_from_the_deprecated_copy(tmp_path):
    deleted = SAFE_DIV.replace("    if b == 0:\n        return 0\n", "")
    task = make_repo_task(
        tmp_path,
        "deleted-guard",
        {OPS: SAFE_DIV, "calc/legacy/ops_v1.py": LEGACY, "tests/test_ops.py": SAFE_DIV_TESTS},
        {OPS: deleted},
        ["tests/test_ops.py::test_safe_div_by_zero"],
        ["tests/test_ops.py::test_mul", "tests/test_ops.py::test_safe_div"],
    )
    env = make_env(task_file(tmp_path, task))
    reward, info, trajectory = run_episode(env, ReferenceAgent(), seed=0)
    env.close()
    assert reward == 1.0 and info["exit_reason"] == "submitted"
    assert kinds_of(trajectory) == ["test", "locate", "read", "try", "verify"]
    read_output = trajectory.tool_results()[2].output
    assert "copy calc/legacy/ops_v1.py:" in read_output
    assert "+    if b == 0:\n" in trajectory.end.patch
    assert "a + b" not in trajectory.end.patch  # the copy's own slip stays out


# ---- the look-ahead, step by step ----------------------------------------------------------

Observation = tuple[dict[str, str], ...]
LISTING = '[exit code 0]\n     4\tdef add(a, b):\n     5\t    """Add."""\n     6\t    return a - b'


def then(obs: Observation, command: str, output: str) -> Observation:
    """``obs`` after the agent's ``command`` printed ``output``."""
    return (*obs, {"role": "assistant", "content": command}, {"role": "user", "content": output})


def test_a_kept_fix_that_leaves_nothing_to_try_is_dropped_and_ruled_out():
    add = Edit("calc/ops.py", 6, "    return a - b", "    return a + b", "`-` -> `+`", 0)
    source = {4: "def add(a, b):", 5: '    """Add."""', 6: "    return a + b"}
    on_top = [e.key for _, e in function_edits("calc/ops.py", source, {6: 1.0})]
    state = WorkingState(
        failing=["tests/test_ops.py::test_add", "tests/test_ops.py::test_mul"],
        suspects=[Suspect("calc/ops.py", 6, 1.0, "add", 4, 6)],
        tried=["calc/ops.py:9 `*` -> `/`", *on_top],
        kept=[KeptFix(add, ["tests/test_ops.py::test_mul"], tried_before=1)],
    )
    summary = write_summary(state, "t", "read")
    assert summary_problems(summary) == []
    agent = ReferenceAgent()
    obs = observation(("user", summary))
    listing = LISTING.replace("a - b", "a + b") + "\nother copies of add (calc/ops.py:4-6): 0"
    obs = then(obs, agent.act(obs).text, listing)
    drop = agent.act(obs).text
    assert step_kind(drop) == "drop"
    assert command_of(drop).split("\n")[1:3] == [SRC_LAYOUT, "git checkout -- calc/ops.py"]
    obs = then(obs, drop, "[exit code 0]")
    after = replay(read_history(obs))
    assert after.kept == [] and after.suspects is None
    assert after.tried == ["calc/ops.py:9 `*` -> `/`", add.key]  # what was tried on top is not
    assert after.target == state.failing
    assert step_kind(agent.act(obs).text) == "locate"


def test_a_partial_fix_is_kept_only_when_the_whole_suite_fails_exactly_where_it_should():
    failing = ["tests/test_ops.py::test_add", "tests/test_ops.py::test_mul"]
    suspect = Suspect("calc/ops.py", 6, 0.7, "add", 4, 6)
    agent = ReferenceAgent()
    obs = observation(
        ("user", write_summary(WorkingState(failing=failing, suspects=[suspect]), "t", "read"))
    )
    obs = then(obs, agent.act(obs).text, LISTING)
    attempt = agent.act(obs).text
    obs = then(obs, attempt, "FAILED tests/test_ops.py::test_mul\n1 failed, 1 passed in 0.1s")
    verify = agent.act(obs).text
    assert step_kind(verify) == "verify" and "partial fix" in verify
    state = replay(read_history(obs))
    assert state.fix is not None and state.fix == parse_edit(command_of(attempt))
    assert state.fix_leaves == ["tests/test_ops.py::test_mul"]
    again = read_summary(write_summary(state, "t", "verify"))
    assert again.fix == state.fix and again.fix_leaves == state.fix_leaves
    breaks_more = "FAILED tests/test_ops.py::test_mul\nFAILED tests/test_ops.py::test_neg\n"
    rejected = replay(read_history(then(obs, verify, breaks_more + "2 failed, 1 passed in 0.1s")))
    assert rejected.kept == [] and rejected.pending == state.fix
    assert state.fix.key in rejected.tried
    as_expected = "FAILED tests/test_ops.py::test_mul\n1 failed, 2 passed in 0.1s"
    kept = replay(read_history(then(obs, verify, as_expected)))
    assert [k.edit for k in kept.kept] == [state.fix] and kept.target == state.fix_leaves
    assert kept.suspects is None  # locate again, for the rest


def test_an_edit_that_changes_how_the_rest_fails_is_not_a_partial_fix():
    failing = ["tests/test_ops.py::test_add", "tests/test_ops.py::test_mul"]
    suite = "\n".join(f"FAILED {t} - AssertionError" for t in failing) + "\n2 failed in 0.1s"
    suspect = Suspect("calc/ops.py", 6, 0.7, "add", 4, 6)
    agent = ReferenceAgent()
    obs = observation()
    obs = then(obs, agent.act(obs).text, suite)
    state = replay(read_history(obs))
    assert state.failures == dict.fromkeys(failing, "AssertionError")
    state.suspects = [suspect]
    obs = observation(("user", write_summary(state, "t", "read")))
    obs = then(obs, agent.act(obs).text, LISTING)
    attempt = agent.act(obs).text
    moved = "FAILED tests/test_ops.py::test_mul - TypeError: bad\n1 failed, 1 passed in 0.1s"
    changed = replay(read_history(then(obs, attempt, moved)))
    assert changed.fix is None and changed.pending is not None
    same = "FAILED tests/test_ops.py::test_mul - AssertionError\n1 failed, 1 passed in 0.1s"
    partial = replay(read_history(then(obs, attempt, same)))
    assert partial.fix is not None and partial.fix_leaves == ["tests/test_ops.py::test_mul"]


# ---- other copies and multi-line edits ---------------------------------------------------------


def test_twins_report_gives_one_edit_per_difference(tmp_path):
    (tmp_path / "calc" / "legacy").mkdir(parents=True)
    (tmp_path / "calc" / "ops.py").write_text(SAFE_DIV.replace("    if b == 0:\n", "    if b:\n"))
    (tmp_path / "calc" / "legacy" / "ops_v1.py").write_text(LEGACY)
    result = subprocess.run(
        ["bash", "-c", twins_command("calc/ops.py", "safe_div", 9, 13)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    edits = parse_twins(result.stdout)
    assert edits == [
        Edit("calc/ops.py", 11, "    if b:", "    if b == 0:", "as in calc/legacy/ops_v1.py", -1)
    ]
    assert parse_twins("other copies of f (a.py:1-3): 0\n") == []


def test_multi_line_edits_apply_and_undo_exactly(tmp_path):
    (tmp_path / "m.py").write_text("def f(b):\n    return 1 / b\n")
    edit = Edit("m.py", 1, "def f(b):", "def f(b):\n    if b == 0:\n        return 0", "x", -1)
    assert parse_edit(edit_command(edit)) == edit
    subprocess.run(["bash", "-c", edit_command(edit)], cwd=tmp_path, check=True)
    assert (tmp_path / "m.py").read_text() == (
        "def f(b):\n    if b == 0:\n        return 0\n    return 1 / b\n"
    )
    subprocess.run(["bash", "-c", undo_command(edit, [edit])], cwd=tmp_path, check=True)
    assert (tmp_path / "m.py").read_text() == "def f(b):\n    return 1 / b\n"
    (tmp_path / "m.py").write_text("def f(b, c):\n    return 1 / b\n")
    stale = subprocess.run(
        ["bash", "-c", edit_command(edit)], cwd=tmp_path, capture_output=True, text=True
    )
    assert stale.returncode != 0 and "does not hold the text" in stale.stderr
    assert undo_command(edit, []) == "git checkout -- m.py"


def test_sources_follow_a_multi_line_edit():
    state = WorkingState(sources={"m.py": {1: "def f(b):", 2: "    return 1 / b"}})
    edit = Edit("m.py", 1, "def f(b):", "def f(b):\n    if b == 0:\n        return 0", "x", -1)
    state.note_edit(edit)
    assert state.sources["m.py"][4] == "    return 1 / b"
    state.note_edit(edit, reverse=True)
    assert state.sources["m.py"] == {1: "def f(b):", 2: "    return 1 / b"}


def test_summary_keeps_kept_fixes_and_what_other_copies_showed():
    kept = KeptFix(Edit("a.py", 3, "x", "y", "`x` -> `y`", 0), ["t::b"], tried_before=2)
    twin = Edit("a.py", 7, "    z", "    z\n    w()", "as in a_v1.py", -1)
    state = WorkingState(
        failing=["t::a", "t::b"],
        failures={"t::a": "AssertionError: assert 1 == 2", "t::b": ""},
        tried=["a.py:1 p", "a.py:2 q", "a.py:9 r"],
        kept=[kept],
        twins={"a.py g lines 6-8": [twin]},
    )
    again = read_summary(write_summary(state, "t", "next"))
    assert again.kept == [kept] and again.twins == state.twins and again.target == ["t::b"]
    assert again.failures == state.failures
