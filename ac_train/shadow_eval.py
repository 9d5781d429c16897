"""What a shadow-judged collection says about a policy, with intervals over tasks.

A held-out evaluation is ``collect`` with ``judge_mode="shadow"``: the judge reviews every
proposed step and its verdict is recorded, never applied, so the episode is the policy's own.
From the collected episodes (``CollectedEpisode``: verdicts, summary audits, continuations,
reward) each figure is a ratio of counts pooled over episodes:

- ``valid_action``: reviewed outputs that are not format errors;
- ``proactive_per_episode``: compactions the policy chose (not asked for), per episode;
- ``right_time``: proactive compactions whose timing the judge accepted;
- ``missed_key_state`` / ``missed_next_step``: summaries the policy wrote that omit the key
  state (the root-cause file once read, every changed file) or a concrete next step
  (``ac_env.analysis.audit``, the same audit as ``ac-bench``'s report);
- ``rereads_per_compaction``: reads, in the 5 steps after a compaction that left a summary
  (the policy's, or the env's fallback one after an invalid answer to a forced request), of a
  file that was read before it and that the summary names (``ac_env.analysis.continuation``);
- ``success``: graded episodes whose patch passed.

Intervals are 95% bootstrap intervals from resampling tasks (each task's counts stay
together), and a difference between two policies resamples the same tasks for both (paired).
A figure with no denominator (no summary was written) is ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from pydantic import BaseModel

from ac_train.collect import CollectedEpisode, VerdictRecord

RESAMPLES = 2000
Counts = tuple[float, float]
"""(numerator, denominator) of one figure in one episode."""


def _valid_action(e: CollectedEpisode) -> Counts:
    return sum(v.candidate != "format_error" for v in e.verdicts), len(e.verdicts)


def _proactive(e: CollectedEpisode) -> list[VerdictRecord]:
    return [v for v in e.verdicts if v.candidate == "compact" and not v.forced]


def _proactive_per_episode(e: CollectedEpisode) -> Counts:
    return len(_proactive(e)), 1.0


def _right_time(e: CollectedEpisode) -> Counts:
    proactive = _proactive(e)
    return sum(v.correction != "trigger" for v in proactive), len(proactive)


def _missed_key_state(e: CollectedEpisode) -> Counts:
    return sum(a.missed_key_state for a in e.audits), len(e.audits)


def _missed_next_step(e: CollectedEpisode) -> Counts:
    return sum(a.missed_next_step for a in e.audits), len(e.audits)


def _rereads(e: CollectedEpisode) -> Counts:
    return sum(c.rereads for c in e.continuations), len(e.continuations)


def _success(e: CollectedEpisode) -> Counts:
    return (0.0, 0.0) if e.reward is None else (e.reward, 1.0)


FIGURES: dict[str, Callable[[CollectedEpisode], Counts]] = {
    "valid_action": _valid_action,
    "proactive_per_episode": _proactive_per_episode,
    "right_time": _right_time,
    "missed_key_state": _missed_key_state,
    "missed_next_step": _missed_next_step,
    "rereads_per_compaction": _rereads,
    "success": _success,
}


class Ratio(BaseModel):
    """A pooled ratio and its 95% task-bootstrap interval (``None`` when nothing was counted)."""

    value: float | None
    low: float | None
    high: float | None
    numerator: float
    denominator: float
    tasks: int = 0  # tasks with a non-zero denominator


class ShadowEvaluation(BaseModel):
    episodes: int
    tasks: int
    figures: dict[str, Ratio]

    def lines(self) -> list[str]:
        """One line per figure: value, interval, counts."""
        return [
            f"{name}: {describe(r)} ({r.numerator:g}/{r.denominator:g}, {r.tasks} tasks)"
            for name, r in self.figures.items()
        ]


def describe(ratio: Ratio, signed: bool = False) -> str:
    """``0.42 [0.30, 0.55]`` (``+`` signs for a difference); ``n/a`` when nothing was counted."""
    if ratio.value is None or ratio.low is None or ratio.high is None:
        return "n/a"
    sign = "+" if signed else ""
    return f"{ratio.value:{sign}.2f} [{ratio.low:{sign}.2f}, {ratio.high:{sign}.2f}]"


def per_task(episodes: Sequence[CollectedEpisode], figure: str) -> dict[str, Counts]:
    """Each task's counts of ``figure``, summed over its rollouts (infra errors left out)."""
    counts: dict[str, Counts] = {}
    for episode in episodes:
        if episode.status != "ok":
            continue
        num, den = FIGURES[figure](episode)
        old = counts.get(episode.instance_id, (0.0, 0.0))
        counts[episode.instance_id] = (old[0] + num, old[1] + den)
    return counts


def evaluate(episodes: Sequence[CollectedEpisode], seed: int = 0) -> ShadowEvaluation:
    ok = [e for e in episodes if e.status == "ok"]
    return ShadowEvaluation(
        episodes=len(ok),
        tasks=len({e.instance_id for e in ok}),
        figures={name: ratio(per_task(ok, name), seed) for name in FIGURES},
    )


def ratio(counts: Mapping[str, Counts], seed: int = 0) -> Ratio:
    tasks = sorted(counts)
    num = np.array([counts[t][0] for t in tasks], dtype=float)
    den = np.array([counts[t][1] for t in tasks], dtype=float)
    base = {"numerator": float(num.sum()), "denominator": float(den.sum())}
    if den.sum() == 0:
        return Ratio(value=None, low=None, high=None, **base)
    draws = np.random.default_rng(seed).integers(0, len(tasks), size=(RESAMPLES, len(tasks)))
    boot = _ratios(num[draws].sum(axis=1), den[draws].sum(axis=1))
    low, high = np.percentile(boot, [2.5, 97.5]) if boot.size else (np.nan, np.nan)
    return Ratio(
        value=float(num.sum() / den.sum()),
        low=float(low),
        high=float(high),
        tasks=int((den > 0).sum()),
        **base,
    )


def paired_difference(
    policy: Mapping[str, Counts], reference: Mapping[str, Counts], seed: int = 0
) -> Ratio:
    """``policy``'s ratio minus ``reference``'s over the tasks both have (the same bootstrap
    resample of tasks for both); the counts are ``policy``'s. ``None`` when either side has
    nothing counted."""
    tasks = sorted(policy.keys() & reference.keys())
    a = np.array([policy[t] for t in tasks], dtype=float).reshape(-1, 2)
    b = np.array([reference[t] for t in tasks], dtype=float).reshape(-1, 2)
    base = {"numerator": float(a[:, 0].sum()), "denominator": float(a[:, 1].sum())}
    if a[:, 1].sum() == 0 or b[:, 1].sum() == 0:
        return Ratio(value=None, low=None, high=None, **base)
    draws = np.random.default_rng(seed).integers(0, len(tasks), size=(RESAMPLES, len(tasks)))
    ra = _ratios(a[draws, 0].sum(axis=1), a[draws, 1].sum(axis=1), keep_empty=True)
    rb = _ratios(b[draws, 0].sum(axis=1), b[draws, 1].sum(axis=1), keep_empty=True)
    both = ~(np.isnan(ra) | np.isnan(rb))
    low, high = np.percentile(ra[both] - rb[both], [2.5, 97.5]) if both.any() else (np.nan,) * 2
    value = a[:, 0].sum() / a[:, 1].sum() - b[:, 0].sum() / b[:, 1].sum()
    return Ratio(
        value=float(value),
        low=float(low),
        high=float(high),
        tasks=len(tasks),
        **base,
    )


def _ratios(num: np.ndarray, den: np.ndarray, keep_empty: bool = False) -> np.ndarray:
    """num / den per resample; a resample with nothing counted is dropped (or NaN)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    return values if keep_empty else values[~np.isnan(values)]
