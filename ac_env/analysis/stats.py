"""Means over tasks with 95% bootstrap intervals, and paired differences between two
strategies (or two settings) on the same tasks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel


class Estimate(BaseModel):
    """A mean over tasks (each task first averaged over its seeds) and a 95% bootstrap
    interval from resampling tasks."""

    mean: float
    low: float
    high: float
    n: int


def bootstrap_mean(
    per_task: Sequence[Sequence[float]], resamples: int = 2000, seed: int = 0
) -> Estimate:
    """``per_task``: the values of each task's seeds. Tasks with no value are left out."""
    means = np.array([float(np.mean(v)) for v in per_task if len(v)])
    if means.size == 0:
        return Estimate(mean=float("nan"), low=float("nan"), high=float("nan"), n=0)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, means.size, size=(resamples, means.size))
    boot = means[draws].mean(axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return Estimate(mean=float(means.mean()), low=float(low), high=float(high), n=int(means.size))


def paired_difference(
    per_task: Mapping[str, Sequence[float]],
    reference: Mapping[str, Sequence[float]],
    resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """The mean over tasks of (a task's mean over seeds) minus (the reference's, on the same
    task), with a 95% paired bootstrap interval: tasks are resampled, the same resample for
    both sides, which is resampling the per-task differences. Only tasks with values on both
    sides count (``n``); they are taken in id order, so the interval is deterministic."""
    paired = sorted(t for t in per_task.keys() & reference.keys() if per_task[t] and reference[t])
    differences = [[float(np.mean(per_task[t]) - np.mean(reference[t]))] for t in paired]
    return bootstrap_mean(differences, resamples, seed)
