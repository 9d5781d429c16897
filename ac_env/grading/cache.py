"""Grades replayed by (task, patch): the final grading of an episode is a pure function of the
task (its tests and base commit, fixed by its id) and the patch, so with a command cache
(``command_cache``) a patch graded once is not graded again. Infrastructure errors and runs
that timed out are never stored (they depend on the machine, not on the patch). A patch whose
tests pass only sometimes (randomness, the clock) keeps the outcome of its first grading: the
cache is for deterministic workers (the timing env's reference agent), not for a policy that
writes its own patches and could retry one until it passes once."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from ac_env.grading.grader import GradeResult, grade
from ac_env.sandbox.base import Sandbox
from ac_env.sandbox.command_cache import read_record, write_record
from ac_env.tasks.model import Task


def grade_cached(
    task: Task, patch: str, make_sandbox: Callable[[], Sandbox], timeout_s: float, directory: str
) -> GradeResult:
    """``grade(task, patch, make_sandbox(), timeout_s)``, replayed from ``directory/grades``."""
    key = json.dumps([task.instance_id, patch, timeout_s])
    path = Path(directory) / "grades" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
    record = read_record(path, key)
    if record is not None:
        try:
            return GradeResult.model_validate(record["grade"])
        except (ValueError, KeyError):
            pass
    result = grade(task, patch, make_sandbox(), timeout_s)
    if result.infra_error is None and not result.timed_out:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_record(path, {"key": key, "grade": result.model_dump(mode="json")})
    return result
