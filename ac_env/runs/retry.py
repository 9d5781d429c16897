"""The one infrastructure-retry policy: how every run of episodes (``ac-bench``, its fork,
``ac-train collect``, a trainer adapter) treats an episode the infrastructure failed.

``run_episode_with_retries(episode, make_policy=..., infra_error=..., crashed=..., label=...)``
makes a fresh policy (``make_policy()``) and runs ``episode(policy, attempt)``, ``ATTEMPTS``
times at most, while the attempt fails for infrastructure reasons:

- its result reports an infrastructure error (``infra_error(result)`` is not None: a model
  server that did not answer, grading that could not run, a sandbox that failed), or
- it raises (the env, the sandbox or grading crashed), when the caller gives ``crashed``.

The first attempt without one stands; else the last attempt that returned a result; else
(every attempt raised) ``crashed(error)``, the caller's record of an episode that never ran to
its end. A policy's own failure is no infrastructure error: ``rollout`` already ended such an
episode like any other exit, and it is not retried. Neither is a policy that cannot be made:
``make_policy`` runs outside the retry, and what it raises is the run's configuration and
propagates. Without ``crashed`` an exception from an attempt propagates too: the choice of a
caller whose attempts share state a crash may leave broken (``ac-train collect`` runs every
episode in one env).

An infrastructure failure is then left out of every success rate, never counted as a failure
(``ac_env.runs.failures`` ends a run whose cells all failed with exit code 3).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

logger = logging.getLogger(__name__)

ATTEMPTS = 2
"""The first try and one retry after an infrastructure failure."""

P = TypeVar("P")
R = TypeVar("R")


class EpisodeOutcome(Protocol):
    """What the runs' episode records share (``ac_env.bench.runner.EpisodeRecord``, the fork's
    ``ForkEpisode``, ``ac_train.collect.CollectedEpisode``)."""

    @property
    def status(self) -> str: ...  # "ok" | "infra_error"

    @property
    def error(self) -> str | None: ...


def recorded_infra_error(outcome: EpisodeOutcome) -> str | None:
    """The ``infra_error`` of a record with a ``status``: its error when it is an
    infrastructure failure, else None."""
    if outcome.status != "infra_error":
        return None
    return outcome.error or "unknown infrastructure error"


@dataclass(frozen=True)
class Retried(Generic[R]):
    """The record that stands and how many attempts ran (1 when the first one stood)."""

    result: R
    attempts: int


def run_episode_with_retries(
    episode: Callable[[P, int], R],
    *,
    make_policy: Callable[[], P],
    infra_error: Callable[[R], str | None],
    crashed: Callable[[str], R] | None,
    label: str,
    attempts: int = ATTEMPTS,
) -> Retried[R]:
    """Run ``episode(make_policy(), attempt)`` (attempt 1, 2, ...) under the policy of the
    module docstring; ``label`` names the episode in the warnings logged for each failed
    attempt."""
    if attempts < 1:
        raise ValueError(f"attempts: must be at least 1, got {attempts}")
    last: R | None = None
    error = "no attempt ran"
    for attempt in range(1, attempts + 1):
        policy = make_policy()
        try:
            result = episode(policy, attempt)
        except Exception as err:  # env, sandbox or grading: infrastructure, not the policy
            if crashed is None:
                raise
            error = f"{type(err).__name__}: {err}"
            logger.warning("%s: attempt %d of %d failed: %s", label, attempt, attempts, error)
            continue
        failure = infra_error(result)
        if failure is None:
            return Retried(result, attempt)
        logger.warning("%s: attempt %d of %d: %s", label, attempt, attempts, failure)
        last = result
    if last is not None:
        return Retried(last, attempts)
    assert crashed is not None  # every attempt raised, which only a caller with crashed sees
    return Retried(crashed(error), attempts)
