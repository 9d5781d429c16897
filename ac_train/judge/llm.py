"""The LLM judge: a model applies the correction rubric to each proposed step.

The request (``render_review_request``) holds what the oracle judge decides from: the rubric
(``ac_train.judge.correction_rubric``, with the oracle's settings), the task, the agent's recent
history (oldest turns cut to fit), the workspace's real ``git diff``, the last real test tally,
whether the step answers a request for a summary, and the proposed step. The answer is one JSON
verdict (``parse_verdict``).

Any ``Policy`` can be the backend (an HF model, ``ac_env.agents.http.OpenAIChatPolicy``);
``ServedVerdicts`` is the OpenAI-compatible client asking the server to constrain its answer
to the verdict's JSON schema (``response_format``: vLLM, SGLang, OpenAI, llama.cpp's servers),
so that a small model still answers in the format. A verdict is used only when it is
well-formed and its replacement is an action of the kind its correction type calls for (a
summary for ``working_state`` and for any answer to a summary request, a command for
``continuation``, either for ``trigger``); anything else counts as accept and is counted in
``LLMJudge.rejected`` by why.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ac_env.actions import Bash, Compact, Submit
from ac_env.agents.errors import ModelServerError, PolicyError
from ac_env.agents.http import OpenAIChatPolicy
from ac_env.analysis.audit import RunTally
from ac_env.compaction.texts import COMPACTION_REQUEST
from ac_env.policy import Policy, PolicyOutput
from ac_env.pytest_log import last_test_run
from ac_train.judge.review import ACCEPT, CORRECTION_TYPES, JudgeView, Verdict, correction_rubric

logger = logging.getLogger(__name__)

INTRODUCTION = """You review one proposed step of a coding agent that fixes a bug and may \
compact its own context: replace its history by a working-state summary that starts with \
'# Auto Context Summary' and has the sections Task, Known, Workspace, Tests and Next.

The request gives the task, the agent's recent history, the workspace's real `git diff` and the \
tally of the last real test run: check every workspace and test claim of a proposed summary \
against them, and every other claim against the history, not against the agent's words."""

ANSWER_FORMAT = """Answer with one JSON object and nothing else, with all four fields:
{"decision": "accept", "correction": "none", "replacement": "", "reason": "<one sentence>"}
or
{"decision": "correct", "correction": "trigger" | "working_state" | "continuation", \
"replacement": "<the full output the agent should give instead: a summary, or one ```bash \
block>", "reason": "<one sentence>"}"""

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["accept", "correct"]},
        "correction": {"type": "string", "enum": [*CORRECTION_TYPES, "none"]},
        "replacement": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["decision", "correction", "replacement", "reason"],
    "additionalProperties": False,
}
"""The verdict's JSON schema, as a server's constrained decoding takes it: one flat object with
every field required (what OpenAI's strict mode accepts); an accept carries ``"none"`` and an
empty replacement, which ``parse_verdict`` drops."""

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def judge_system_prompt(rubric: str | None = None) -> str:
    return f"{INTRODUCTION}\n\n{rubric or correction_rubric()}\n\n{ANSWER_FORMAT}"


def render_review_request(
    view: JudgeView,
    candidate: PolicyOutput,
    max_chars: int = 12_000,
    max_diff_chars: int = 4_000,
    rubric: str | None = None,
) -> list[dict[str, str]]:
    """The judge's prompt: the rubric, then the task, the agent's recent history (oldest turns
    cut to fit ``max_chars``; the task always kept), the real ``git diff`` (its head, up to
    ``max_diff_chars``), the last real test tally, and the proposed step."""
    messages = list(view.observation)
    task = messages[1]["content"] if len(messages) > 1 else ""
    diff = view.diff if len(view.diff) <= max_diff_chars else view.diff[:max_diff_chars] + "\n[...]"
    earlier = [r for r in view.trajectory.tool_results() if r.step < view.step]
    last = last_test_run(earlier, completed=True)
    run = RunTally.of(last[0].output) if last else None  # as the oracle judge reads it
    tally = "no test run yet" if run is None else f"{run.failed} failed, {run.passed} passed"
    asked = bool(messages) and messages[-1]["content"] == COMPACTION_REQUEST
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
    proposed = "## Proposed step" + (
        " (the agent was asked for its working-state summary: the answer must be one)"
        if asked
        else ""
    )
    body = (
        f"## Task\n{task}\n\n## History"
        + (f" (the {dropped} oldest turns omitted)" if dropped else "")
        + "\n"
        + ("\n\n".join(history) or "(no turns yet)")
        + f"\n\n{state}\n\n{proposed}\n{candidate.text}"
    )
    return [
        {"role": "system", "content": judge_system_prompt(rubric)},
        {"role": "user", "content": body},
    ]


def parse_verdict(text: str) -> Verdict | None:
    """The first JSON object in ``text`` as a ``Verdict`` (an accept's other fields dropped);
    None when there is none or it is not a valid verdict (a correction needs its type and a
    replacement)."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        return None
    try:
        fields = json.loads(match.group(0))
        if isinstance(fields, dict) and fields.get("decision") == "accept":
            fields = {"decision": "accept", "reason": fields.get("reason", "")}
        return Verdict.model_validate(fields)
    except (json.JSONDecodeError, ValidationError):
        return None


class ServedVerdicts(OpenAIChatPolicy):
    """``OpenAIChatPolicy`` whose requests ask the server for JSON matching
    ``VERDICT_SCHEMA`` (llama.cpp's servers: ``{"type": "json_object", "schema": ...}``;
    the others: OpenAI's ``{"type": "json_schema", ...}``)."""

    def _request_body(self, observation: Sequence[Mapping[str, str]]) -> bytes:
        payload = json.loads(super()._request_body(observation))
        if self.dialect == "llamacpp":
            payload["response_format"] = {"type": "json_object", "schema": VERDICT_SCHEMA}
        else:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "schema": VERDICT_SCHEMA},
            }
        return json.dumps(payload).encode("utf-8")


class LLMJudge:
    """A judge backed by any ``Policy``. ``rejected`` counts the reviews taken as accept, by
    why: ``request_refused`` (the server blamed the request, e.g. a prompt over its context:
    ``PolicyError``), ``no_verdict`` (no valid verdict JSON), ``not_an_action`` (the
    replacement is no valid action), ``wrong_kind`` (an action of the wrong kind for its
    correction type). A server failure (``ModelServerError``) propagates: the episode is an
    infrastructure error, as when the policy's server fails."""

    reads_ground_truth = False

    def __init__(self, backend: Policy, rubric: str | None = None, max_chars: int = 12_000):
        self.backend = backend
        self.rubric = rubric
        self.max_chars = max_chars
        self.rejected: Counter[str] = Counter()

    def review(self, view: JudgeView, candidate: PolicyOutput) -> Verdict:
        request = render_review_request(view, candidate, self.max_chars, rubric=self.rubric)
        try:
            answer = self.backend.act(request).text
        except ModelServerError:  # infrastructure: the episode is recorded as such
            raise
        except PolicyError as error:  # the request's fault (too long): no verdict, no crash
            self.rejected["request_refused"] += 1
            logger.warning(
                "step %d: the judge's request was refused, accepted: %s", view.step, error
            )
            return ACCEPT
        verdict = parse_verdict(answer)
        problem = "no_verdict" if verdict is None else _replacement_problem(view, verdict)
        if problem:
            self.rejected[problem] += 1
            logger.warning(
                "step %d: judge answer taken as accept (%s): %.200r", view.step, problem, answer
            )
            return ACCEPT
        assert verdict is not None
        return verdict


def _replacement_problem(view: JudgeView, verdict: Verdict) -> str | None:
    if verdict.replacement is None:
        return None
    action = view.parser.parse(verdict.replacement)
    if action.kind == "format_error":
        return "not_an_action"
    asked = bool(view.observation) and view.observation[-1]["content"] == COMPACTION_REQUEST
    fits = {
        "trigger": (Compact, Bash),
        "working_state": (Compact,),
        "continuation": (Bash, Submit),
    }[verdict.correction or "trigger"]
    if not isinstance(action, fits) or (asked and not isinstance(action, Compact)):
        return "wrong_kind"
    return None
