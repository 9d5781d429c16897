"""The continuation rung: starts right after a compaction, before the fixing edit, whose working
state names the next action exactly (the method's third ability: continue from the summary).

A depth-3 start (``ac_train.grpo.start_states``) asks a small model to write the fix itself from
a summary whose ``## Next`` says, in prose, "read the suspect and try the next candidate edit":
SmolLM2-135M followed none of 32 such plans. The method's continuation corrections target a
simpler shape: the summary plans a command, and the step after the compaction runs it. This
module builds that shape from the reference agent's demonstrations, with two controls from the
same starts (``PlanKind``):

- ``exact``: ``## Next`` names one command, a one-line ``sed`` edit of the fixing line and the
  failing test (``PlannedEdit.command``); following it earns the reward;
- ``prose``: the demonstrator's own ``## Next``, in prose (today's depth-3 plan);
- ``wrong_line``: the same command naming the line below (or above) the fixing one: following
  it earns nothing, so success there means the policy wrote the edit without the plan, and a
  policy that follows it has learned to follow plans, not an edit style.

Each start is the demonstrator's snapshot before its first model call after the compaction that
precedes its fixing edit (the context holds the summary and nothing after it). A task gives a
start only when its fixing edit changes one line, the exact plan run from the start passes, the
wrong-line plan does not, and the workspace as it stands does not (``continuation_starts``
checks all three). ``plan_metrics`` scores a rollout from such a start: success, whether its
first action runs the planned edit, valid actions and format errors.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

import gymnasium as gym
from tqdm import tqdm

from ac_env.actions import TerminalParser
from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import rollout
from ac_env.policy import PolicyOutput
from ac_env.snapshot import EpisodeSnapshot, copy_trajectory
from ac_env.trajectory import CompactionEvent, Trajectory
from ac_train.grpo.start_states import StartState, _snapshot_into, policy_events

PlanKind = Literal["exact", "prose", "wrong_line"]
PLAN_KINDS: tuple[PlanKind, ...] = get_args(PlanKind)

_EDIT = re.compile(
    r"^PATH = (?P<path>.+)\nLINE = (?P<line>\d+)\nOLD = (?P<old>.+)\nNEW = (?P<new>.+)$",
    re.MULTILINE,
)
_NEXT = re.compile(r"(^## Next[^\n]*\n)(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
_SED_SPECIAL = re.compile(r"([\\/.*\[\]^$&])")


@dataclass(frozen=True)
class PlannedEdit:
    """A one-line edit: line ``line`` of ``path`` has ``old`` replaced by ``new`` (the parts
    of the line that differ), then ``test`` runs."""

    path: str
    line: int
    old: str
    new: str
    test: str

    def sed(self, line: int | None = None) -> str:
        """The ``sed -i`` command of the edit, at ``line`` (default: its own)."""
        pattern = _SED_SPECIAL.sub(r"\\\1", self.old)
        replacement = re.sub(r"([\\/&])", r"\\\1", self.new)
        return f"sed -i '{line or self.line}s/{pattern}/{replacement}/' {self.path}"

    def command(self, line: int | None = None) -> str:
        return f"{self.sed(line)} && {self.test}"


def planned_edit(edit_command: str) -> PlannedEdit | None:
    """The reference agent's edit script (``PATH``/``LINE``/``OLD``/``NEW`` lines, then a test
    run) as a one-line edit followed by ``python3 -m pytest -q`` on the same test ids; None
    when it is not one (a multi-line change, no test ids)."""
    match = _EDIT.search(edit_command)
    runs = [line for line in edit_command.splitlines() if "pytest" in line]
    test_ids = [word for word in runs[-1].split() if "::" in word] if runs else []
    if match is None or not test_ids:
        return None
    try:
        path, old, new = (ast.literal_eval(match.group(g)) for g in ("path", "old", "new"))
    except (ValueError, SyntaxError):
        return None
    if "\n" in old or "\n" in new or old == new or "'" in old + new:
        return None
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    # widen the changed part to whole words on both sides, so the pattern is not a lone symbol
    while start > 0 and old[start - 1] not in " ([{,":
        start -= 1
    while end > 0 and old[len(old) - end] not in " )]},:":
        end -= 1
    changed_old = old[start : len(old) - end]
    if not changed_old.strip():
        return None
    return PlannedEdit(
        path=path,
        line=int(match.group("line")),
        old=changed_old,
        new=new[start : len(new) - end],
        test="python3 -m pytest -q " + " ".join(test_ids),
    )


def plan_text(kind: PlanKind, edit: PlannedEdit, wrong_line: int) -> str | None:
    """The ``## Next`` body of ``kind`` (None for ``prose``: the demonstrator's own)."""
    if kind == "prose":
        return None
    line = edit.line if kind == "exact" else wrong_line
    return (
        f"- run exactly this command: it edits {edit.path} line {line} and runs the failing "
        f"test\n`{edit.command(line)}`\n"
    )


@dataclass(frozen=True)
class ContinuationStart:
    """A continuation start of one plan kind, with the edit the exact plan names and the line
    the wrong plan names."""

    start: StartState
    kind: PlanKind
    edit: PlannedEdit
    wrong_line: int

    @property
    def id(self) -> str:
        return self.start.id

    @property
    def planned_command(self) -> str:
        """The command the plan names (``prose``: the exact one, which its prose points to)."""
        return self.edit.command(self.wrong_line if self.kind == "wrong_line" else None)


def continuation_starts(
    make_env: Callable[[], gym.Env[Any, Any]],
    task_ids: Sequence[str],
    kinds: Sequence[PlanKind] = PLAN_KINDS,
    *,
    progress: bool = True,
) -> list[ContinuationStart]:
    """For each task whose demonstration gives a valid continuation start (module docstring),
    one start of each of ``kinds``, in task order."""
    found: list[ContinuationStart] = []
    env = make_env()
    try:
        for task_id in tqdm(
            task_ids, desc="continuation starts", unit="task", disable=not progress
        ):
            found += _task_starts(env, task_id, kinds)
    finally:
        env.close()
    return found


def _task_starts(
    env: gym.Env[Any, Any], task_id: str, kinds: Sequence[PlanKind]
) -> list[ContinuationStart]:
    before_call: list[EpisodeSnapshot] = []
    demo = rollout(
        env,
        ReferenceAgent("after_locate"),
        options={"task_id": task_id},
        review=_snapshot_into(before_call),
    )
    end = demo.end
    calls = demo.model_calls()
    if end is None or end.reward != 1 or len(calls) < 3:
        return []
    fixing = calls[-3]  # edit, verify, submit
    edit = planned_edit(fixing.output)
    if edit is None or fixing.segment == 0:
        return []
    first = next(i for i, call in enumerate(calls) if call.segment == fixing.segment)
    snapshot = before_call[first]
    summaries = [i for i, m in enumerate(snapshot.context.messages) if m.kind == "summary"]
    if not summaries or snapshot.compaction_pending is not None:
        return []
    wrong_line = _wrong_line(env, snapshot, edit)
    if wrong_line is None:
        return []
    starts = {
        kind: ContinuationStart(
            StartState(
                task_id,
                len(calls) - first,
                with_plan(snapshot, plan_text(kind, edit, wrong_line)),
                label=f"next-{kind}",
            ),
            kind,
            edit,
            wrong_line,
        )
        for kind in PLAN_KINDS
    }
    exact = starts["exact"].start.snapshot
    if not (
        _reward(env, exact, "true") == 0
        and _reward(env, exact, edit.command()) == 1
        and _reward(env, exact, edit.command(wrong_line)) == 0
    ):
        return []
    return [starts[kind] for kind in kinds]


def _wrong_line(env: gym.Env[Any, Any], snapshot: EpisodeSnapshot, edit: PlannedEdit) -> int | None:
    """A line next to the fixing one that does not hold the edit's pattern (so the wrong
    plan's ``sed`` changes nothing there)."""
    env.reset(options={"task_id": snapshot.task.instance_id})
    env.unwrapped.restore(snapshot)  # type: ignore[attr-defined]
    for line in (edit.line + 1, edit.line - 1):
        if line < 1:
            continue
        text = env.unwrapped.sandbox.exec(f"sed -n '{line}p' {edit.path}", 10, 4000).output  # type: ignore[attr-defined]
        if text.strip() and edit.old not in text:
            return line
    return None


def with_plan(snapshot: EpisodeSnapshot, next_body: str | None) -> EpisodeSnapshot:
    """``snapshot`` with its last summary's ``## Next`` body replaced by ``next_body`` (None:
    unchanged), in the context and in the trajectory's compaction event alike."""
    if next_body is None:
        return snapshot
    context = snapshot.context.copy()
    index = max(i for i, m in enumerate(context.messages) if m.kind == "summary")
    old = context.messages[index].content
    new, count = _NEXT.subn(lambda m: m.group(1) + next_body, old, count=1)
    if count == 0:
        new = old.rstrip("\n") + "\n## Next\n" + next_body
    context.replace_content(index, new)
    trajectory = copy_trajectory(snapshot.trajectory)
    last = max(
        (i for i, e in enumerate(trajectory.events) if isinstance(e, CompactionEvent)),
        default=None,
    )
    if last is not None:
        event = trajectory.events[last]
        assert isinstance(event, CompactionEvent)
        trajectory.events[last] = event.model_copy(
            update={"summary": event.summary.replace(old, new)}
        )
    return replace(snapshot, context=context, trajectory=trajectory)


class _Runs:
    """A policy whose every output runs ``command``."""

    def __init__(self, command: str) -> None:
        self.text = f"THOUGHT: follow the plan.\n```bash\n{command}\n```"

    def act(self, observation: Any) -> PolicyOutput:
        return PolicyOutput(text=self.text)


def _reward(env: gym.Env[Any, Any], snapshot: EpisodeSnapshot, command: str) -> float | None:
    run = rollout(
        env,
        _Runs(command),
        options={"task_id": snapshot.task.instance_id},
        start=snapshot,
        max_steps=1,
    )
    return run.reward


# ---- what a rollout from a continuation start did ---------------------------------------------


@dataclass(frozen=True)
class PlanMetrics:
    """One rollout from a continuation start: ``success`` (the final tests pass),
    ``follows_plan`` (its first action runs the planned edit), ``valid_action_rate`` (its calls
    whose action is a command that exited 0, or a submit), ``format_error_rate`` (its calls
    that were no action)."""

    success: float
    follows_plan: float
    valid_action_rate: float
    format_error_rate: float

    def as_dict(self) -> dict[str, float]:
        return {
            "success": self.success,
            "follows_plan": self.follows_plan,
            "valid_action_rate": self.valid_action_rate,
            "format_error_rate": self.format_error_rate,
        }


METRICS: tuple[str, ...] = ("success", "follows_plan", "valid_action_rate", "format_error_rate")


def plan_metrics(trajectory: Trajectory, start: ContinuationStart) -> PlanMetrics | None:
    """The metrics of a rollout from ``start`` (None: an infrastructure error, no policy
    outcome)."""
    end = trajectory.end
    if end is None or end.infra_error is not None or end.reward is None:
        return None
    own = policy_events(trajectory, start.start.step)
    calls = own.model_calls()
    exits = {result.step: result.exit_code for result in own.tool_results()}
    kinds = [call.action.get("kind") for call in calls]
    valid = [
        kind == "submit" or (kind == "bash" and exits.get(call.step) == 0)
        for call, kind in zip(calls, kinds, strict=True)
    ]
    first = TerminalParser().parse(calls[0].output) if calls else None
    command = getattr(first, "command", "")
    return PlanMetrics(
        success=float(end.reward == 1),
        follows_plan=float(_squash(start.edit.sed(_planned_line(start))) in _squash(command)),
        valid_action_rate=sum(valid) / len(calls) if calls else 0.0,
        format_error_rate=kinds.count("format_error") / len(calls) if calls else 0.0,
    )


def _planned_line(start: ContinuationStart) -> int:
    return start.wrong_line if start.kind == "wrong_line" else start.edit.line


def _squash(text: str) -> str:
    return " ".join(text.split())


__all__ = [
    "METRICS",
    "PLAN_KINDS",
    "ContinuationStart",
    "PlanKind",
    "PlanMetrics",
    "PlannedEdit",
    "continuation_starts",
    "plan_metrics",
    "planned_edit",
    "with_plan",
]
