"""The Task record: SWE-bench's field names plus AutoCompact's ground truth.

A task is data only. Where its repository lives (a snapshot directory for built-in and mined
tasks, a Docker image for SWE-bench tasks) is part of the record; materializing it is the
sandbox's job, grading it is ``ac_env.grading``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ac_env.paths import check_name

Split = Literal[
    "easy", "medium", "hard", "context-stress", "real", "long", "swe-bench", "impossible"
]


class GroundTruth(BaseModel):
    """What the bug touches. Judges and audits read it; policies never see it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    files: list[str] = Field(description="repo-relative paths the gold patch changes")
    functions: list[str] = Field(description="qualified names (module:func) the gold patch changes")
    operators: list[str] = Field(default_factory=list, description="mutation operators applied")


class Task(BaseModel):
    """One bug-fix task. Field names follow SWE-bench so task files interoperate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_id: str = Field(
        description="a safe name (``ac_env.paths.SAFE_NAME``): files are named by it"
    )
    repo: str
    problem_statement: str
    patch: str = Field(description="gold patch (unified diff) that fixes the bug")
    test_patch: str = Field(default="", description="diff applied to the tests at grading")
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str]
    test_order: list[str] = Field(
        default_factory=list,
        description="the graded tests in the suite's own order, which grading runs them in "
        "(for suites whose tests depend on order); empty: FAIL_TO_PASS, then PASS_TO_PASS",
    )
    base_commit: str = ""
    version: str = ""
    created_at: str = ""
    hints_text: str = ""
    environment_setup_commit: str = ""
    image_name: str | None = Field(default=None, description="Docker image holding the repo")

    split: Split = "easy"
    snapshot_dir: Path | None = Field(
        default=None, description="directory holding the buggy repo as a one-commit git repo"
    )
    workdir: str = Field(default="/testbed", description="repo path inside a container sandbox")
    test_files: list[str] = Field(
        default_factory=list, description="repo-relative test files restored before grading"
    )
    test_command: str = Field(
        default="python3 -m pytest -rA -p no:cacheprovider",
        description="command prefix that runs test ids; test ids are appended",
    )
    ground_truth: GroundTruth | None = None
    wrong_patches_rejected: int | None = Field(
        default=None,
        description="how many generated wrong patches (ac_env.tasks.wrong_patches: near "
        "misses at the bug site, the gold patch less one hunk) the task's tests reject; None: "
        "not measured",
    )
    wrong_patches_accepted: int | None = Field(
        default=None,
        description="how many of them the tests accept that are not provably equivalent to "
        "the gold patch (0 for every shipped task); None: not measured",
    )

    @field_validator("instance_id")
    @classmethod
    def _safe_instance_id(cls, value: str) -> str:
        return check_name(value)
