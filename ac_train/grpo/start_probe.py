"""Which start states teach: a probe of the starting policy's pass rate on each.

GRPO learns only from a group whose rewards differ. A policy that passes a start state with
probability ``p`` gives a group of ``G`` differing rewards with probability
``1 - p**G - (1 - p)**G``: near 0 for the starts it always or never solves, which on a
curriculum of demonstration start states are most of them (from the SmolLM2 warm start, 2
groups in 16 were mixed). The probe runs a few rollouts of the starting policy from every start
state (``DemonstrationStarts.probe_samples``) and gives each start a posterior of its pass rate:

* the prior is fitted to the whole pool's probe (empirical Bayes: the beta-binomial maximum
  likelihood), so a pool where most starts are settled one way or the other makes "0 of 2"
  mean "probably never" rather than the uniform prior's "could be anything";
* each start's posterior is that prior updated with its own passes and failures.

The draw (``ac_train.grpo.task_draw``, ``GRPOConfig.favour_mixed``) then takes the eligible starts
whose posterior chance of a mixed group is highest, the posterior updated with every group's
rewards as training goes (the probe is only its first evidence; without one, the first draws
are uniform and each start's own groups are its evidence); its ``skip_uniform_for`` rotates a
favourite out when its group comes out uniform, so the next-likeliest starts get their turn. A
probe of one sample cannot tell a settled start from an unsure one (the prior's spread is not
identified), so the probe takes at least 2.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

PROBE_FILE = "start_probe.jsonl"


class ProbeResult(BaseModel):
    """One start state's probe, a line of ``OUTPUT_DIR/start_probe.jsonl``."""

    model_config = ConfigDict(extra="forbid")

    start_id: str = Field(description="the start state (``<task>@-<steps left>``)")
    rewards: list[float] = Field(description="the probe rollouts' rewards (infra errors left out)")
    wall_s: float = Field(ge=0, description="the wall time of this start's rollouts")


@dataclass(frozen=True)
class PassRate:
    """A Beta(``a``, ``b``) posterior of a start state's pass rate."""

    a: float
    b: float

    def informative_chance(self, group_size: int) -> float:
        """The posterior mean of the chance that a group of ``group_size`` is mixed."""
        return (
            1 - _beta_moment(self.a, self.b, group_size) - _beta_moment(self.b, self.a, group_size)
        )


def _beta_moment(a: float, b: float, k: int) -> float:
    """E[p**k] for p ~ Beta(a, b)."""
    return math.prod((a + i) / (a + b + i) for i in range(k))


def fit_prior(reward_lists: Iterable[Sequence[float]]) -> PassRate:
    """The Beta prior under which the pool's outcomes (one reward list a start state) are
    likeliest (beta-binomial maximum likelihood over a log-spaced grid of both parameters,
    0.02 to 50)."""
    counts = [(_passes(rewards), len(rewards)) for rewards in reward_lists if rewards]
    if not counts:
        raise ValueError("fit_prior: no start state has a reward")
    grid = [0.02 * 2500 ** (i / 59) for i in range(60)]
    best, best_likelihood = PassRate(1.0, 1.0), -math.inf
    for a in grid:
        for b in grid:
            likelihood = sum(_log_beta(a + k, b + n - k) - _log_beta(a, b) for k, n in counts)
            if likelihood > best_likelihood:
                best, best_likelihood = PassRate(a, b), likelihood
    return best


def _passes(rewards: Sequence[float]) -> int:
    return sum(reward == 1 for reward in rewards)


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def pass_rates(seen: Mapping[str, Sequence[float]], task_ids: Iterable[str]) -> dict[str, PassRate]:
    """Each of ``task_ids``' posterior given the rewards ``seen`` of it (none: the prior), under
    the prior fitted to everything seen (Beta(1, 1) while nothing is)."""
    observed = [rewards for rewards in seen.values() if rewards]
    prior = fit_prior(observed) if observed else PassRate(1.0, 1.0)
    posteriors = {}
    for task_id in task_ids:
        rewards = seen.get(task_id, [])
        passes = _passes(rewards)
        posteriors[task_id] = PassRate(prior.a + passes, prior.b + len(rewards) - passes)
    return posteriors


def read_probe(path: Path) -> list[ProbeResult]:
    """The probe results written so far (none if the file is absent); a malformed line is
    an error naming the file and the line."""
    if not path.exists():
        return []
    results = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            results.append(ProbeResult.model_validate_json(line))
        except ValidationError as error:
            raise ValueError(f"{path}:{number}: not a probe result: {error}") from error
    return results


def write_probe(path: Path, results: Sequence[ProbeResult]) -> None:
    """All of ``results``, replacing the file at once (an interruption leaves the old one)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text("".join(r.model_dump_json() + "\n" for r in results), encoding="utf-8")
    partial.replace(path)


__all__ = [
    "PROBE_FILE",
    "PassRate",
    "ProbeResult",
    "fit_prior",
    "pass_rates",
    "read_probe",
    "write_probe",
]
