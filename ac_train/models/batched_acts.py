"""One in-process model shared by rollout threads, whose calls that arrive together are decoded
as one batch.

A GRPO group's rollouts continue one start state: after their first call they diverge, but
their prompts still share the task and the start state's history, and each thread spends most
of its time waiting for the model. ``BatchedActs`` collects the calls of up to ``rows``
threads (waiting at most ``gather_s`` after the first for the others, which are running their
commands) and runs them as one ``TransformersPolicy.generate_batch``: the shared prefix once,
the weights read once a token for all rows (``benchmarks/group_sampling.py``).

Each row's token ids and log-probs are the ones it sampled. Which rows meet in a batch
depends on thread timing, so sampling is not replayable from the seed; a batch that fails
(one row's prompt too long) is decoded again one row at a time, so each call gets its own
output or its own error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ac_env.policy import PolicyOutput
from ac_train.models.policy import TransformersPolicy


@dataclass
class _Call:
    observation: Sequence[Mapping[str, str]]
    output: PolicyOutput | None = None
    error: BaseException | None = None

    @property
    def answered(self) -> bool:
        return self.output is not None or self.error is not None


class BatchedActs:
    """A ``Policy`` for several rollout threads at once (``GRPOConfig.batch_groups``)."""

    def __init__(self, policy: TransformersPolicy, rows: int, gather_s: float = 1.0):
        if rows < 1:
            raise ValueError(f"rows must be >= 1, got {rows}")
        if gather_s < 0:
            raise ValueError(f"gather_s must be >= 0, got {gather_s}")
        self.policy = policy
        self.rows = rows
        self.gather_s = gather_s
        self.batch_sizes: list[int] = []  # every decode's rows, for a benchmark or a log
        self._waiting: list[_Call] = []
        self._leader = False
        self._changed = threading.Condition()

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        call = _Call(observation)
        with self._changed:
            self._waiting.append(call)
            self._changed.notify_all()
            while not call.answered:
                if self._leader:
                    self._changed.wait()
                    continue
                self._leader = True  # this thread gathers and decodes the next batch
                batch = self._gather()
                self._changed.release()
                try:
                    self._decode(batch)
                finally:
                    self._changed.acquire()
                    self._leader = False
                    self._changed.notify_all()
        if call.error is not None:
            raise call.error
        assert call.output is not None
        return call.output

    def _gather(self) -> list[_Call]:
        """Up to ``rows`` waiting calls, oldest first, once ``rows`` wait or ``gather_s`` has
        passed (the caller holds the condition)."""
        deadline = time.monotonic() + self.gather_s
        while len(self._waiting) < self.rows and (left := deadline - time.monotonic()) > 0:
            self._changed.wait(left)
        batch, self._waiting = self._waiting[: self.rows], self._waiting[self.rows :]
        self.batch_sizes.append(len(batch))
        return batch

    def _decode(self, batch: list[_Call]) -> None:
        """An output or an error for every call of ``batch``; never raises."""
        observations = [call.observation for call in batch]
        try:
            outputs = self.policy.generate_batch(observations, self.policy.sampling)
        except Exception as error:
            if len(batch) == 1:
                batch[0].error = error
                return
            for call in batch:  # alone, so that one row's error is not the others'
                self._decode([call])
            return
        for call, output in zip(batch, outputs, strict=True):
            call.output = output


__all__ = ["BatchedActs"]
