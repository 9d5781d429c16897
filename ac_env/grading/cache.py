"""Grades replayed by (task, patch): the final grading of an episode is a pure function of the
grader, the task (its tests and base commit) and the patch, so with a command cache
(``command_cache``) a patch graded once is not graded again. The key holds a fingerprint of
the grader's own source (a record from another grader version is never replayed) and of the
whole task record; records are signed (``ac_env.sandbox.signed_records``), so a grade planted
in the cache directory, by an agent or by anyone else, is ignored. Infrastructure errors and
runs that timed out are never stored (they depend on the machine, not on the patch). A patch
whose tests pass only sometimes (randomness, the clock) keeps the outcome of its first grading:
the cache is for deterministic workers (the timing env's reference agent), not for a policy
that writes its own patches and could retry one until it passes once."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ac_env import pytest_log
from ac_env.grading.capability_gate import GateMode
from ac_env.grading.grader import FlaggedReward, GradeResult, grade
from ac_env.sandbox.base import Sandbox
from ac_env.sandbox.signed_records import read_record, record_path, write_record
from ac_env.tasks.model import Task

FORMAT = 3


class GradeSettings(NamedTuple):
    """``grade``'s settings that change a grade: part of the key, so a grade under one is
    never replayed under another."""

    capability_gate: GateMode = "relative"
    flagged_reward: FlaggedReward = "keep"


DEFAULT_SETTINGS = GradeSettings()


@functools.cache
def grader_fingerprint() -> str:
    """The SHA-256 of the grading package's source files and the pytest-log parser."""
    package = Path(__file__).parent
    sources = [*sorted(package.glob("*.py")), Path(pytest_log.__file__)]
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()


def grade_cached(
    task: Task,
    patch: str,
    make_sandbox: Callable[[], Sandbox],
    timeout_s: float,
    directory: str,
    settings: GradeSettings = DEFAULT_SETTINGS,
) -> GradeResult:
    """``grade(task, patch, make_sandbox(), timeout_s, **settings)``, replayed from
    ``directory/grades``."""
    task_digest = hashlib.sha256(task.model_dump_json().encode()).hexdigest()
    key = json.dumps([FORMAT, grader_fingerprint(), task_digest, patch, timeout_s, *settings])
    path = record_path(Path(directory) / "grades", key)
    record = read_record(path, key)
    if record is not None:
        try:
            return GradeResult.model_validate(record["grade"])
        except (ValueError, KeyError):
            pass
    result = grade(task, patch, make_sandbox(), timeout_s, **settings._asdict())
    if result.infra_error is None and not result.timed_out:
        write_record(path, {"key": key, "grade": result.model_dump(mode="json")})
    return result
