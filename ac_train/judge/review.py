"""The Judge: reviews each proposed step before it executes, and may replace it.

A judge sees what exists at that moment (``JudgeView``: the observation the policy answered,
the trajectory so far, the workspace's real ``git diff``, the task as the agent sees it) and
the policy's ``candidate``, and returns a ``Verdict``: accept, or a correction of one of three
types with the output to execute instead:

- ``trigger``: compact now (the phase is solved but the policy keeps searching), or do not
  compact yet (evidence is still needed);
- ``working_state``: the summary misses or misstates the state; here is the corrected one;
- ``continuation``: right after a compaction the policy redoes recorded work or ignores the
  planned step; here is the planned action.

``apply_verdict`` turns a verdict into the ``PolicyOutput`` the env executes: a correction is
recorded as ``produced_by="judge"`` with the rejected candidate and the correction type, so the
data holds what really happened after the correction. Both judges follow one rubric
(``correction_rubric``): ``OracleJudge`` (``ac_train.judge.oracle``) implements it from what the
execution history shows, ``LLMJudge`` (``ac_train.judge.llm``) asks a model to apply it.

The task in a ``JudgeView`` is a ``PublicTask``: it has no field for the gold patch, the test
patch, the graded tests (``FAIL_TO_PASS``/``PASS_TO_PASS``, their order, the restored test
files) or the ground truth, so no judge can read them by accident. Only a judge that says it
reads ground truth (``reads_ground_truth``: ``OracleJudge(ground_truth=True)``, the
privileged judge) is given a ``PrivilegedJudgeView``, which adds the whole ``Task`` as
``gold``; ``judge_view`` picks the view a judge gets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

from ac_env.actions import ActionParser, ParseResult, make_parser
from ac_env.policy import PolicyOutput
from ac_env.tasks import Task
from ac_env.tasks.model import Split
from ac_env.trajectory import Trajectory

CorrectionType = Literal["trigger", "working_state", "continuation"]
CORRECTION_TYPES: tuple[CorrectionType, ...] = ("trigger", "working_state", "continuation")


class Verdict(BaseModel):
    """``accept``, or ``correct`` with the correction's type and the output to execute."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["accept", "correct"]
    correction: CorrectionType | None = None
    replacement: str | None = None
    reason: str = ""

    @model_validator(mode="after")
    def _complete(self) -> Verdict:
        if self.decision == "correct" and (self.correction is None or not self.replacement):
            raise ValueError("a correction needs 'correction' (its type) and 'replacement'")
        if self.decision == "accept" and (self.correction or self.replacement):
            raise ValueError("an accept carries no 'correction' or 'replacement'")
        return self


ACCEPT = Verdict(decision="accept")


class PublicTask(BaseModel):
    """A task as the agent sees it: what the issue says, where, and how tests are run. No gold
    field exists here (patch, test patch, graded tests, ground truth): a judge holding one
    cannot read them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_id: str
    repo: str
    problem_statement: str
    hints_text: str = ""
    split: Split = "easy"
    base_commit: str = ""
    version: str = ""
    created_at: str = ""
    test_command: str = ""

    @classmethod
    def of(cls, task: Task) -> PublicTask:
        return cls(**{name: getattr(task, name) for name in cls.model_fields})


@dataclass(frozen=True)
class JudgeView:
    """What a judge may look at when a step is proposed: nothing from the future, and of the
    task only what the agent was given (``PublicTask``)."""

    observation: Sequence[Mapping[str, str]]
    task: PublicTask
    trajectory: Trajectory
    diff: str
    step: int
    parser: ActionParser

    def parse(self, output: PolicyOutput) -> ParseResult:
        return self.parser.parse(output.text)

    @classmethod
    def of(cls, env: Any, observation: Sequence[Mapping[str, str]]) -> JudgeView:
        """The view of ``env`` (any wrapper of ``AutoCompactSWEEnv``) before its next step."""
        base = env.unwrapped
        trajectory: Trajectory = base.trajectory
        return cls(
            observation=observation,
            task=PublicTask.of(base.task),
            trajectory=trajectory,
            diff=base.sandbox.diff(),
            step=len(trajectory.model_calls()),
            parser=make_parser(base.config.action_parser),
        )


@dataclass(frozen=True)
class PrivilegedJudgeView(JudgeView):
    """A ``JudgeView`` with the whole task (``gold``: gold patch, graded tests, ground truth),
    for the privileged ground-truth judge only."""

    gold: Task

    @classmethod
    def of(cls, env: Any, observation: Sequence[Mapping[str, str]]) -> PrivilegedJudgeView:
        view = JudgeView.of(env, observation)
        return cls(**vars(view), gold=env.unwrapped.task)


class Judge(Protocol):
    reads_ground_truth: bool
    """True only for a privileged judge: it is given a ``PrivilegedJudgeView``."""

    def review(self, view: JudgeView, candidate: PolicyOutput) -> Verdict: ...


def judge_view(judge: Judge, env: Any, observation: Sequence[Mapping[str, str]]) -> JudgeView:
    """The view ``judge`` is given of ``env``: privileged only when it reads ground truth."""
    view_type = PrivilegedJudgeView if judge.reads_ground_truth else JudgeView
    return view_type.of(env, observation)


def apply_verdict(candidate: PolicyOutput, verdict: Verdict) -> PolicyOutput:
    """The output the env executes. A correction keeps the candidate's prompt ids (the prompt
    is the same) but none of its output ids or log-probs (they belong to the rejected text)."""
    if verdict.decision == "accept":
        return candidate
    assert verdict.replacement is not None
    return PolicyOutput(
        text=verdict.replacement,
        prompt_token_ids=candidate.prompt_token_ids,
        policy_version=candidate.policy_version,
        produced_by="judge",
        rejected_output=candidate.text,
        correction=verdict.correction,
    )


# ---- the rubric every judge follows -----------------------------------------------------------


def correction_rubric(
    solved_patience: int = 1,
    min_history_chars: int = 4_000,
    recompact_gap: int = 2,
    continuation_window: int = 3,
) -> str:
    """The correction rubric, in words, with the oracle judge's settings: what
    ``OracleJudge`` implements and what ``LLMJudge`` is asked to apply."""
    return f"""Correct the proposed step only for one of these three mistakes; otherwise accept it.

The bug counts as located only when the history shows where it is: a failing test (or a \
failing reproduction) was run, its traceback, a fault ranking of the failing runs or its failing \
statement points to a function, and that function's code has been read. Reading a file with no \
failing run behind it locates nothing.

1. trigger. Compact now: the bug was located since the last compaction more than \
{solved_patience} step(s) ago, nothing is edited yet, the history holds at least \
{min_history_chars} characters, and the agent proposes another search or read; the replacement \
is the working-state summary. Not yet: the agent compacts before the bug is located and before \
any edit, or within {recompact_gap} steps of its last compaction; the replacement is the next \
investigative command.
2. working_state. The proposed summary (or the answer to a request for one) misses the located \
function or file or a changed file; claims an edit or a test result that the real `git diff` or \
the last test run contradicts; asserts anything the history does not show (a cause no failing \
run points to, a file ruled out that was never read, a change called verified with no passing \
test run after it); drops the task; or has no concrete next step. The replacement is the \
corrected summary, asserting only what the history shows.
3. continuation. Within {continuation_window} steps after a compaction whose summary plans a \
command, the agent re-reads a file the summary records, repeats a search from before the \
compaction, or, as its first step, ignores the plan (a first step that is no action ignores it \
too); the replacement is the planned command."""
