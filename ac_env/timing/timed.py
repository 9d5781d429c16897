"""Compaction timed from outside the worker: the summary a decision to compact steps, and a
worker whose compactions a timing rule decides.

``compaction_response`` is what ``TimingEnv``'s actions 1 and 2 step: the worker's own summary
(its answer to the env's ``COMPACTION_REQUEST``) when asked for and valid, else
``extractive_summary`` of the commands run and the workspace's real diff.

``TimedWorker`` runs a worker whose compactions a timing rule (``ac_env.compaction.when``)
decides: before each worker turn, when compaction is allowed (as ``TimingEnv.action_masks``
allows it: a worker turn since the start or the last compaction) and the rule holds at the
env's ``moment()``, the turn is ``compaction_response`` instead of the worker's action.
``PolicyTiming`` makes a trained timing-policy file such a rule; it is ``ac-bench``'s
``learned`` strategy for a model-free worker. The policy reads ``features(env)`` (its cost
features against the budget it was trained under, not the run's: ``ac-bench`` runs every
episode at its largest budget and applies the smaller ones afterwards).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ac_env.actions import Compact, make_parser
from ac_env.compaction import CommandRecord, extractive_summary, summary_problems
from ac_env.compaction.texts import COMPACTION_REQUEST
from ac_env.compaction.when import Moment, TimingRule
from ac_env.env import AutoCompactSWEEnv
from ac_env.policy import Policy, PolicyOutput
from ac_env.timing.features import features, steps_since_compaction
from ac_env.timing.policy_file import TimingPolicy

logger = logging.getLogger(__name__)


def compaction_response(
    env: AutoCompactSWEEnv,
    worker: Policy,
    observation: Sequence[Mapping[str, str]],
    *,
    ask_worker: bool = True,
) -> PolicyOutput:
    """The summary to step now: the worker's own when ``ask_worker`` and valid, else the
    extractive one (``produced_by="fallback"``)."""
    request = {"role": "user", "content": COMPACTION_REQUEST}
    messages = tuple(observation)
    if not messages or messages[-1] != request:  # the env may have asked already
        messages = (*messages, request)
    own = _worker_summary(env, worker, messages) if ask_worker else None
    if own is not None:
        return own
    assert env.trajectory is not None and env.sandbox is not None
    commands = [
        CommandRecord(r.command, r.output, r.exit_code) for r in env.trajectory.tool_results()
    ]
    summary = extractive_summary(env.task.problem_statement, commands, env.sandbox.diff())
    return PolicyOutput(text=summary, produced_by="fallback")


def _worker_summary(
    env: AutoCompactSWEEnv, worker: Policy, observation: Sequence[Mapping[str, str]]
) -> PolicyOutput | None:
    try:
        response = worker.act(observation)
    except Exception as error:  # a failed summary falls back to the extractive one
        logger.warning("worker error writing a summary: %s", error)
        return None
    parsed = make_parser(env.config.action_parser).parse(response.text)
    if isinstance(parsed, Compact) and not summary_problems(parsed.summary):
        return response
    return None


def compaction_allowed(env: AutoCompactSWEEnv) -> bool:
    """A worker turn since the start or the last compaction."""
    return env.trajectory is not None and steps_since_compaction(env) > 0


@dataclass(frozen=True)
class PolicyTiming:
    """A timing-policy file as a ``TimingRule`` for the episode in ``env``: it compacts when
    the policy wants to at ``features(env)``, against the budget it was trained under."""

    policy: TimingPolicy
    env: AutoCompactSWEEnv

    @property
    def name(self) -> str:
        return self.policy.name

    @property
    def description(self) -> str:
        return f"the timing policy {self.policy.name} decides"

    def __call__(self, moment: Moment) -> bool:
        budget = self.policy.source.budget_usd
        return self.policy.wants_compaction(features(self.env, budget_usd=budget))


class TimedWorker:
    """Implements ``Policy``: ``worker`` acts, except on the turns where ``rule`` compacts
    (see the module docstring). ``env`` is the unwrapped env the episode runs in."""

    def __init__(self, worker: Policy, rule: TimingRule, env: AutoCompactSWEEnv) -> None:
        self.worker = worker
        self.rule = rule
        self.env = env

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        if compaction_allowed(self.env) and self.rule(self.env.moment()):
            return compaction_response(self.env, self.worker, observation)
        return self.worker.act(observation)
