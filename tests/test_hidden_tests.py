"""``hide_fail_to_pass_tests``: the FAIL_TO_PASS tests' source is out of the workspace (an agent
cannot ``cat`` or ``grep`` it) and back at grading, where the gold patch still gets 1."""

from __future__ import annotations

import textwrap

import gymnasium as gym
import pytest

import ac_env  # noqa: F401
from ac_env.config import EnvConfig
from ac_env.grading import grade
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks import load_tasks
from ac_env.tasks.hidden_tests import remove_functions

TASK = "synthetic__stencil-easy-train-0"
REAL_TASK = "inflection-0.5.1__6135c611b9"


def test_functions_and_methods_are_removed_and_an_emptied_class_keeps_a_pass():
    source = textwrap.dedent(
        """\
        import pytest

        @pytest.mark.parametrize("x", [1])
        def test_gone(x):
            assert x

        def test_kept():
            assert True

        class TestCase:
            def test_method(self):
                assert 1
        """
    )
    hidden = remove_functions(source, ["t.py::test_gone[1]", "t.py::TestCase::test_method"])
    assert "test_gone" not in hidden and "parametrize" not in hidden
    assert "def test_kept" in hidden and "class TestCase:\n    pass\n" in hidden
    compile(hidden, "t.py", "exec")


def _names(task_id: str, source: str) -> list[str]:
    task = load_tasks(source, task_ids=[task_id])[0]
    return [test.split("::")[-1].split("[")[0] for test in task.FAIL_TO_PASS]


@pytest.mark.parametrize(("source", "task_id"), [("builtin", TASK), ("real", REAL_TASK)])
def test_the_agent_cannot_cat_or_grep_the_fail_to_pass_tests(source: str, task_id: str):
    names = _names(task_id, source)
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=source,
        split=None,
        task_ids=[task_id],
        hide_fail_to_pass_tests=True,
    )
    try:
        env.reset()
        task = env.unwrapped.task  # type: ignore[attr-defined]
        sandbox = env.unwrapped.sandbox  # type: ignore[attr-defined]
        path = task.FAIL_TO_PASS[0].split("::")[0]
        shown = sandbox.exec(f"cat {path}", 30, 1 << 20).output
        for name in names:
            assert f"def {name}(" not in shown
            found = sandbox.exec(f"grep -rn 'def {name}(' . || true", 30, 1 << 20).output
            assert f"def {name}(" not in found, found
        assert all(f"def {name}(" in task.test_patch for name in names)
    finally:
        env.close()


def test_the_hidden_tests_come_back_at_grading():
    task = load_tasks(task_ids=[TASK], hide_fail_to_pass_tests=True)[0]
    assert grade(task, task.patch, LocalSandbox()).reward == 1.0
    assert grade(task, "", LocalSandbox()).reward == 0.0


def test_the_setting_is_off_by_default():
    assert EnvConfig().hide_fail_to_pass_tests is False
