"""Tasks whose FAIL_TO_PASS tests are out of the workspace until grading (SWE-bench style).

``hide_fail_to_pass_tests(task)`` takes the function of each FAIL_TO_PASS test (decorators
included; a test method a class inherits from a base class of the same module is the base
class's method) out of its test file in a derived repository, and puts it back through the
task's ``test_patch``, which only grading applies (the grader also drops any change the agent
makes to a graded test file). The agent can still run the remaining tests and read every
other file; a test body defined in another module (a mixin imported from a package's
``__init__``) cannot be located by its id and stays visible. Same instance id, same gold
patch, same graded tests: only what the workspace shows changes.

This is the env's ``hide_fail_to_pass_tests=True`` (ImpossibleBench's "no test access"
condition); the built-in ``hard`` split is built this way already.
"""

from __future__ import annotations

import ast

from ac_env.tasks.derived import derived_repo, find_test_function, graded_source, patch_sections
from ac_env.tasks.model import Task
from ac_env.tasks.synthetic.project import unified_diff

KIND = "hidden-tests"
VERSION = "1"


def remove_functions(source: str, test_ids: list[str]) -> str:
    """``source`` without the functions the ``test_ids`` name (a class left empty keeps a
    ``pass``)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()
    for test_id in test_ids:
        function = find_test_function(tree, test_id)
        if function is None:
            continue
        start = min([d.lineno for d in function.decorator_list] + [function.lineno]) - 1
        drop.update(range(start, function.end_lineno or function.lineno))
    emptied: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            kept = [s for s in node.body if s.lineno - 1 not in drop]
            if not kept and node.body:
                first = lines[node.body[0].lineno - 1]
                emptied[node.body[0].lineno - 1] = first[: len(first) - len(first.lstrip())]
    out = []
    for index, line in enumerate(lines):
        if index in emptied:
            out.append(f"{emptied[index]}pass\n")
        if index not in drop:
            out.append(line)
    return "".join(out)


def hide_fail_to_pass_tests(task: Task) -> Task:
    """``task`` with its FAIL_TO_PASS tests' functions out of the workspace (back at
    grading, through ``test_patch``); the task itself when none is in a committed file."""
    if task.snapshot_dir is None:
        raise ValueError(f"{task.instance_id}: no snapshot_dir to hide tests from")
    by_file: dict[str, list[str]] = {}
    for test_id in task.FAIL_TO_PASS:
        by_file.setdefault(test_id.split("::", 1)[0], []).append(test_id)
    files: dict[str, str] = {}
    sections = patch_sections(task.test_patch)
    for path, test_ids in sorted(by_file.items()):
        if not (task.snapshot_dir / path).is_file():
            continue
        committed, graded = graded_source(task, path, task.snapshot_dir)
        try:
            hidden = remove_functions(committed, test_ids)
        except SyntaxError:
            continue
        if hidden != committed:
            files[path] = hidden
            sections[path] = unified_diff(path, hidden, graded)
    if not files:
        return task
    snapshot, commit = derived_repo(task, KIND, VERSION, files)
    return task.model_copy(
        update={
            "snapshot_dir": snapshot,
            "base_commit": commit,
            "test_patch": "".join(sections[name] for name in sorted(sections)),
            "test_files": sorted({*task.test_files, *files}),
        }
    )
