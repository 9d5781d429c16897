"""The Judge: reviews each proposed step before it executes, and may replace it.

A judge sees what exists at that moment (``JudgeView``: the observation the policy answered,
the trajectory so far, the workspace's real ``git diff``, the task) and the policy's
``candidate``, and returns a ``Verdict``: accept, or a correction of one of three types with
the output to execute instead:

- ``trigger``: compact now (the phase is solved but the policy keeps searching), or do not
  compact yet (evidence is still needed);
- ``working_state``: the summary misses or misstates the state; here is the corrected one;
- ``continuation``: right after a compaction the policy redoes recorded work or ignores the
  planned step; here is the planned action.

``apply_verdict`` turns a verdict into the ``PolicyOutput`` the env executes: a correction is
recorded as ``produced_by="judge"`` with the rejected candidate and the correction type, so the
data holds what really happened after the correction. Two judges: ``OracleJudge``
(``ac_train.oracle_judge``, from task ground truth) and ``LLMJudge`` (below, any policy backend).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ac_env.actions import ActionParser, ParseResult, make_parser
from ac_env.bench.audit import RunTally
from ac_env.policy import Policy, PolicyOutput
from ac_env.tasks import Task
from ac_env.test_log import last_test_run
from ac_env.trajectory import Trajectory

logger = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class JudgeView:
    """What a judge may look at when a step is proposed: nothing from the future."""

    observation: Sequence[Mapping[str, str]]
    task: Task
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
            task=base.task,
            trajectory=trajectory,
            diff=base.sandbox.diff(),
            step=len(trajectory.model_calls()),
            parser=make_parser(base.config.action_parser),
        )


class Judge(Protocol):
    def review(self, view: JudgeView, candidate: PolicyOutput) -> Verdict: ...


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


# ---- LLM judge -------------------------------------------------------------------------------

JUDGE_RUBRIC = """You review one proposed step of a coding agent that fixes a bug and may compact \
its own context (replace its history by a working-state summary starting with \
'# Auto Context Summary', with sections Known, Workspace, Next).

The request also gives the workspace's real `git diff` and the tally of the last real test run: \
check every workspace and test claim of a proposed summary against them, not against the \
agent's words.

Correct the step only for one of these three mistakes:
1. trigger: the bug is already located but the agent keeps searching (it should compact now: \
replacement = the summary), or the agent compacts while evidence is still needed, or right \
after a compaction (replacement = the next investigative command).
2. working_state: the proposed summary misses the file/function the bug is in, claims an edit \
or a test result that the real diff or test run contradicts or the history does not show, \
drops a constraint of the task, or has no concrete next step (replacement = the corrected summary).
3. continuation: just after a compaction, the agent searches again for what the summary \
records, or ignores the summary's planned next step (replacement = the planned action as a \
```bash block).
Otherwise accept.

Answer with one JSON object and nothing else:
{"decision": "accept"}
or
{"decision": "correct", "correction": "trigger" | "working_state" | "continuation", \
"replacement": "<the full output the agent should give instead>", "reason": "<one sentence>"}"""

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def render_review_request(
    view: JudgeView, candidate: PolicyOutput, max_chars: int = 12_000, max_diff_chars: int = 4_000
) -> list[dict[str, str]]:
    """The LLM judge's prompt: the rubric, the agent's recent history (oldest turns cut to fit
    ``max_chars``; the task always kept), the workspace's real ``git diff`` (its head, up to
    ``max_diff_chars``) and the last real test tally, so the judge can check a summary's
    workspace and test claims as the rubric asks, and the candidate."""
    messages = list(view.observation)
    task = messages[1]["content"] if len(messages) > 1 else ""
    diff = view.diff if len(view.diff) <= max_diff_chars else view.diff[:max_diff_chars] + "\n[...]"
    earlier = [r for r in view.trajectory.tool_results() if r.step < view.step]
    last = last_test_run(earlier, completed=True)
    run = RunTally.of(last[0].output) if last else None  # as the oracle judge reads it
    tally = "no test run yet" if run is None else f"{run.failed} failed, {run.passed} passed"
    state = (
        f"## Workspace now (real `git diff`)\n```diff\n{diff.strip() or '(no changes)'}\n```\n\n"
        f"## Last test run (real)\n{tally}"
    )
    turns = [f"[{m['role']}]\n{m['content']}" for m in messages[2:]]
    history: list[str] = []
    room = max_chars - len(task)
    for turn in reversed(turns):
        if len(turn) > room:
            break
        history.insert(0, turn)
        room -= len(turn)
    dropped = len(turns) - len(history)
    body = (
        f"## Task\n{task}\n\n## History"
        + (f" (the {dropped} oldest turns omitted)" if dropped else "")
        + "\n"
        + ("\n\n".join(history) or "(no turns yet)")
        + f"\n\n{state}\n\n## Proposed step\n{candidate.text}"
    )
    return [{"role": "system", "content": JUDGE_RUBRIC}, {"role": "user", "content": body}]


def parse_verdict(text: str) -> Verdict | None:
    """The first JSON object in ``text`` as a ``Verdict``; None when there is none or it is
    not a valid verdict."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        return None
    try:
        return Verdict.model_validate(json.loads(match.group(0)))
    except (json.JSONDecodeError, ValidationError):
        return None


class LLMJudge:
    """A judge backed by any ``Policy`` (an HF model, an OpenAI-compatible server). An answer
    that is not a valid verdict, or a replacement that is not a valid action, counts as
    accept and is logged (``unparsable`` counts them)."""

    def __init__(self, backend: Policy) -> None:
        self.backend = backend
        self.unparsable = 0

    def review(self, view: JudgeView, candidate: PolicyOutput) -> Verdict:
        answer = self.backend.act(render_review_request(view, candidate)).text
        verdict = parse_verdict(answer)
        replacement = verdict.replacement if verdict else None
        if replacement is not None and view.parser.parse(replacement).kind == "format_error":
            verdict = None
        if verdict is None:
            self.unparsable += 1
            logger.warning("step %d: unparsable judge verdict, accepted: %.200r", view.step, answer)
            return ACCEPT
        return verdict
