"""The learner side of segment-aware GRPO: group advantages and the token-mean clipped loss.

A trajectory's advantage is shared by every trained token of every one of its segments. The loss
of one optimizer step is

    L = -(1 / N) * sum over trained tokens t of min(rho_t * A, clip(rho_t, 1 - low, 1 + high) * A)

with ``rho_t = exp(log pi(t) - log mu(t))`` against the behaviour log-prob ``mu`` and ``A`` the
token's trajectory advantage. ``mu`` is the sampler's recorded log-prob (``behaviour="sampler"``)
or the learner's own, recomputed in the same forward pass and detached (``"learner"``): on an
on-policy step (one optimizer step on samples of the current weights) the two agree up to the
sampler's numerics, ``rho`` is 1 and the gradient is the policy gradient, and the sampler need
not record log-probs at all. ``importance_cap`` adds the off-policy correction of TRL, verl and
SkyRL for samplers whose numbers differ from the learner's (a quantised or served engine, stale
weights): each token's loss is weighted by ``min(pi(t) / mu_sampler(t), cap)`` (truncated
importance sampling, detached), against the learner's ``mu``; when sampler and learner agree
the weight is 1 and the loss is the default's. No KL term, no entropy bonus (the method:
"no KL penalty or entropy bonus, the loss is averaged over tokens").

What ``N`` counts (``TokenMean``):

- ``"step"`` (the default): every trained token of the optimizer step, of every group,
  informative or not. A group whose rewards are all equal has advantage 0 and adds no gradient,
  but its tokens still count, so the step size does not jump with how many groups happen to be
  informative. Rollouts with no outcome (an infra error, or one masked by overlong masking) are
  left out of ``N`` as of the loss; the trainer counts them in its metrics.
- ``"informative"``: only the trained tokens of trajectories with a nonzero advantage (the
  tokens that carry a gradient). A step with one informative group in eight then takes a step
  about 8x larger per token than one where all eight are.

Because ``N`` counts tokens, not sequences, cutting a trajectory into more segments does not
change its weight, and splitting the step into micro-batches does not change the gradient.
Tokens with advantage 0 need no forward pass: only the informative sequences are run, and the
others enter through ``N`` alone.

Data-parallel (several processes under ``accelerate launch``, each with its share of the step's
sequences and a DDP-wrapped model), ``N`` is still the whole step's, summed over the processes,
so splitting the step across processes does not change the gradient either.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from ac_train.segments import Segment

if TYPE_CHECKING:
    from accelerate import Accelerator


@dataclass(frozen=True)
class PolicySequence:
    """One segment as the learner sees it: ``trained[t]`` says token ``t`` is an on-policy
    output (``Segment.grpo_mask``) with behaviour log-prob ``behaviour_logprobs[t]``."""

    input_ids: list[int]
    trained: list[bool]
    behaviour_logprobs: list[float]  # nan where the sampler recorded none (behaviour "learner")
    advantage: float

    @property
    def trained_tokens(self) -> int:
        return sum(self.trained)


def policy_sequences(
    segments: Sequence[Segment],
    advantages: Mapping[str, float | None],
    *,
    require_behaviour: bool = True,
) -> list[PolicySequence]:
    """The segments that carry a gradient: those of trajectories with a nonzero advantage
    (``advantages`` is keyed by ``trajectory_id``) and at least one trained token. Without
    ``require_behaviour`` a trained token may lack the sampler's log-prob (``nan``), for a
    loss against the learner's own (``behaviour="learner"``)."""
    sequences = []
    for segment in segments:
        advantage = advantages.get(segment.trajectory_id)
        if not advantage:
            continue
        trained = segment.grpo_mask()
        if trained and trained[0]:
            raise ValueError(f"segment {segment.id}: its first token cannot be trained")
        behaviour = []
        for position, (is_trained, logprob) in enumerate(
            zip(trained, segment.behaviour_logprobs, strict=True)
        ):
            if is_trained and logprob is None and require_behaviour:
                raise ValueError(
                    f"segment {segment.id}: policy token {position} has no behaviour log-prob; "
                    "GRPO needs a policy that records output_logprobs"
                )
            missing = math.nan if is_trained else 0.0
            behaviour.append(logprob if is_trained and logprob is not None else missing)
        if any(trained):
            sequences.append(PolicySequence(segment.input_ids, trained, behaviour, advantage))
    return sequences


TokenMean = Literal["step", "informative"]
Behaviour = Literal["sampler", "learner"]


@dataclass(frozen=True)
class StepBatch:
    """What one optimizer step trains: the sequences that carry a gradient, and ``mean_over``,
    the trained tokens ``N`` the token-mean divides by (this process's share)."""

    sequences: list[PolicySequence]
    mean_over: int


def step_batch(
    segments: Sequence[Segment],
    advantages: Mapping[str, float | None],
    token_mean: TokenMean = "step",
    *,
    require_behaviour: bool = True,
) -> StepBatch:
    """The step's ``policy_sequences`` and its ``N`` under ``token_mean`` (module docstring):
    ``"step"`` counts the trained tokens of every segment whose trajectory has an advantage
    (``None``: no outcome, left out), ``"informative"`` those of the sequences alone."""
    sequences = policy_sequences(segments, advantages, require_behaviour=require_behaviour)
    if token_mean == "informative":
        return StepBatch(sequences, sum(s.trained_tokens for s in sequences))
    counted = sum(
        sum(segment.grpo_mask())
        for segment in segments
        if advantages.get(segment.trajectory_id) is not None
    )
    return StepBatch(sequences, counted)


@dataclass(frozen=True)
class MicroBatch:
    """Right-padded tensors of a few sequences, shape ``(B, T)`` (``advantages``: ``(B,)``)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    trained: torch.Tensor
    behaviour_logprobs: torch.Tensor
    advantages: torch.Tensor

    def to(self, device: torch.device) -> MicroBatch:
        return MicroBatch(*(getattr(self, f.name).to(device) for f in fields(self)))


def collate(sequences: Sequence[PolicySequence], pad_token_id: int) -> MicroBatch:
    length = max(len(s.input_ids) for s in sequences)

    def padded(rows: list[list[Any]], value: Any) -> list[list[Any]]:
        return [row + [value] * (length - len(row)) for row in rows]

    return MicroBatch(
        input_ids=torch.tensor(padded([s.input_ids for s in sequences], pad_token_id)),
        attention_mask=torch.tensor(padded([[1] * len(s.input_ids) for s in sequences], 0)),
        trained=torch.tensor(padded([s.trained for s in sequences], False), dtype=torch.bool),
        behaviour_logprobs=torch.tensor(
            padded([s.behaviour_logprobs for s in sequences], 0.0), dtype=torch.float32
        ),
        advantages=torch.tensor([s.advantage for s in sequences], dtype=torch.float32),
    )


def shared_prefix(sequences: Sequence[PolicySequence]) -> int:
    """How many leading tokens every one of ``sequences`` has in common and none of them
    trains: the context the sequences of a GRPO group share when they continue one state
    (a start state, or their task's prompt). 0 for fewer than two sequences."""
    if len(sequences) < 2:
        return 0
    first = sequences[0].input_ids
    length = len(first)
    for s in sequences:
        first_trained = s.trained.index(True) if True in s.trained else len(s.trained)
        # the logit predicting the first trained token is computed after the prefix
        length = min(length, first_trained - 1)
        length = next((i for i in range(length) if s.input_ids[i] != first[i]), length)
    return max(length, 0)


def micro_batches(
    sequences: Sequence[PolicySequence],
    size: int,
    tokens: int | None = None,
    share_prefix: bool = True,
) -> list[list[PolicySequence]]:
    """``sequences`` in order, cut into micro-batches of at most ``size``; with ``tokens``, a
    micro-batch also ends before a sequence that would take its padded tokens after the shared
    context (rows times the longest row's tokens past ``shared_prefix``; all of each row
    without ``share_prefix``) past ``tokens``, since the learner's memory grows with them (a
    sequence alone over the budget is a micro-batch of its own; verl's dynamic batch size)."""

    def padded(chunk: list[PolicySequence]) -> int:
        prefix = shared_prefix(chunk) if share_prefix else 0
        return len(chunk) * (max(len(s.input_ids) for s in chunk) - prefix)

    chunks: list[list[PolicySequence]] = []
    for sequence in sequences:
        last = chunks[-1] if chunks else None
        if (
            last is not None
            and len(last) < size
            and (tokens is None or padded([*last, sequence]) <= tokens)
        ):
            last.append(sequence)
        else:
            chunks.append([sequence])
    return chunks


def token_logprobs(
    model: PreTrainedModel | torch.nn.Module,
    batch: MicroBatch,
    temperature: float = 1.0,
    prefix: int = 0,
) -> torch.Tensor:
    """Log-probs of the trained tokens of ``batch``, flat in row-major order (the order of
    ``batch.trained``), under ``log_softmax(logits / temperature)``: the sampler's distribution.
    Logits are computed only where a trained token is predicted (``logits_to_keep`` as a mask),
    which spares the vocabulary projection and softmax of every context token.

    ``prefix`` (``shared_prefix`` of the rows): the rows' first ``prefix`` tokens are one
    context, run once for all of them; its key/value cache, repeated per row, is what the rest
    of each row attends to. Same log-probs and gradients, up to float rounding, for the cost of
    one context instead of one per row."""
    trained = batch.trained[:, 1:]
    predicting = torch.zeros_like(batch.trained)
    predicting[:, :-1] = trained
    if predicting[:, :prefix].any():
        raise ValueError(f"prefix: a trained token is predicted inside the first {prefix} tokens")
    if prefix < 1:
        logits = model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            logits_to_keep=predicting,
        ).logits
    else:
        context = batch.input_ids[:1, :prefix]
        cache = model(input_ids=context, use_cache=True, logits_to_keep=1).cache
        cache.batch_repeat_interleave(batch.input_ids.shape[0])
        logits = model(
            input_ids=batch.input_ids[:, prefix:],
            attention_mask=batch.attention_mask,
            cache=cache,
            use_cache=True,
            logits_to_keep=predicting[:, prefix:],
        ).logits
    targets = batch.input_ids[:, 1:][trained]
    return -F.cross_entropy(logits.float() / temperature, targets, reduction="none")


@dataclass(frozen=True)
class ClipRange:
    """The ratio is clipped to ``[1 - low, 1 + high]`` (``high > low``: DAPO's clip-higher)."""

    low: float = 0.2
    high: float = 0.2


def clipped_loss_sum(
    logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip: ClipRange,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, int]:
    """Sum over tokens of ``-w * min(rho * A, clip(rho) * A)``, and how many tokens had their
    ratio outside the clip range. The tensors hold one entry per trained token; ``weights``
    (``w``, detached): truncated importance weights, None: 1."""
    ratio = torch.exp(logprobs - behaviour_logprobs)
    clipped = torch.clamp(ratio, 1 - clip.low, 1 + clip.high)
    per_token = -torch.minimum(ratio * advantages, clipped * advantages)
    if weights is not None:
        per_token = per_token * weights
    outside = (ratio < 1 - clip.low) | (ratio > 1 + clip.high)
    return per_token.sum(), int(outside.sum())


def behaviour_and_weights(
    logprobs: torch.Tensor,
    sampler_logprobs: torch.Tensor,
    behaviour: Behaviour,
    importance_cap: float | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The ``mu`` the ratio is taken against and the truncated importance weights (module
    docstring). ``logprobs``: the learner's, with their graph."""
    if importance_cap is not None and behaviour != "learner":
        raise ValueError("importance_cap: corrects a loss against the learner's log-probs")
    learner = logprobs.detach()
    mu = learner if behaviour == "learner" else sampler_logprobs
    if importance_cap is None:
        return mu, None
    if torch.isnan(sampler_logprobs).any():
        raise ValueError("importance_cap: needs the sampler's log-prob of every trained token")
    return mu, torch.clamp(torch.exp(learner - sampler_logprobs), max=importance_cap)


@dataclass(frozen=True)
class LearnerStats:
    """One optimizer step's figures, all processes together: ``loss`` is the token-mean loss
    (over ``mean_over`` tokens), ``clip_fraction`` over the tokens with a gradient
    (``trained_tokens``); the counts are sums."""

    loss: float
    trained_tokens: int
    tokens: int
    sequences: int
    clip_fraction: float
    mean_over: int = 0


def accumulate_gradients(
    model: PreTrainedModel | torch.nn.Module,
    sequences: Sequence[PolicySequence],
    *,
    micro_batch_size: int,
    micro_batch_tokens: int | None = None,
    clip: ClipRange,
    temperature: float = 1.0,
    pad_token_id: int = 0,
    accelerator: Accelerator | None = None,
    mean_over: int | None = None,
    share_prefix: bool = True,
    behaviour: Behaviour = "sampler",
    importance_cap: float | None = None,
) -> LearnerStats:
    """Backpropagate one optimizer step's token-mean loss into ``model``'s ``.grad``, a
    micro-batch at a time; the caller steps the optimizer. Nothing to train: no gradient.
    ``mean_over`` is this process's share of ``N`` (``step_batch``); ``None``: the trained
    tokens of ``sequences`` (the ``"informative"`` convention). With ``share_prefix`` the
    context a micro-batch's sequences share (``shared_prefix``) runs once for all of them;
    ``micro_batch_tokens`` bounds a micro-batch's padded tokens after that context
    (``micro_batches``).
    ``behaviour`` and ``importance_cap``: what the ratio is taken against (module docstring).

    With an ``accelerator`` (``model`` prepared by it), ``sequences`` are this process's share
    of the step: the token count ``N`` is summed over the processes first, and each process's
    loss is divided by ``N / processes``, so that DDP's average of the processes' gradients is
    the gradient of the whole step. Gradients are all-reduced once, in the last micro-batch's
    backward (the others run under ``no_sync``); a process with nothing to train while others
    have runs one zero-weight pass to take part in it. The returned figures are the step's."""
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size: must be at least 1, got {micro_batch_size}")
    processes = accelerator.num_processes if accelerator is not None else 1
    gradient_tokens = sum(s.trained_tokens for s in sequences)
    if mean_over is not None and mean_over < gradient_tokens:
        raise ValueError(
            f"mean_over ({mean_over}) is less than the sequences' trained tokens "
            f"({gradient_tokens})"
        )
    local = [
        gradient_tokens,
        sum(len(s.input_ids) for s in sequences),
        len(sequences),
        gradient_tokens if mean_over is None else mean_over,
    ]
    trained_tokens, tokens, count, counted = _sum_over_processes(local, accelerator)
    with_gradient, total = int(trained_tokens), int(counted)
    if not with_gradient:
        return LearnerStats(0.0, 0, int(tokens), int(count), 0.0, total)
    device = next(model.parameters()).device
    chunks = micro_batches(sequences, micro_batch_size, micro_batch_tokens, share_prefix) or [
        [_idle_sequence(pad_token_id)]
    ]
    loss, clipped = 0.0, 0
    for index, chunk in enumerate(chunks):
        last = index == len(chunks) - 1
        with (
            accelerator.no_sync(model)
            if accelerator is not None and not last
            else contextlib.nullcontext()
        ):
            batch = collate(chunk, pad_token_id).to(device)
            trained = batch.trained[:, 1:]
            prefix = shared_prefix(chunk) if share_prefix else 0
            logprobs = token_logprobs(model, batch, temperature, prefix)
            mu, weights = behaviour_and_weights(
                logprobs, batch.behaviour_logprobs[:, 1:][trained], behaviour, importance_cap
            )
            if torch.isnan(mu).any():
                raise ValueError(
                    "a trained token has no sampler log-prob: use behaviour 'learner' "
                    "(GRPOConfig.behaviour_logprobs)"
                )
            loss_sum, outside = clipped_loss_sum(
                logprobs,
                mu,
                batch.advantages[:, None].expand_as(trained)[trained],
                clip,
                weights,
            )
            scaled = loss_sum / (total / processes)
            if accelerator is not None:
                accelerator.backward(scaled)
            else:
                scaled.backward()
        if sequences:
            loss += float(loss_sum.detach()) / total
            clipped += outside
    step_loss, step_clipped = _sum_over_processes([loss, clipped], accelerator)
    return LearnerStats(
        loss=step_loss,
        trained_tokens=with_gradient,
        tokens=int(tokens),
        sequences=int(count),
        clip_fraction=step_clipped / with_gradient,
        mean_over=total,
    )


def _idle_sequence(pad_token_id: int) -> PolicySequence:
    """One trained token with advantage 0: a forward and backward through every weight that
    adds nothing to any gradient."""
    return PolicySequence([pad_token_id, pad_token_id], [False, True], [0.0, 0.0], 0.0)


def _sum_over_processes(values: Sequence[float], accelerator: Accelerator | None) -> list[float]:
    """``values`` summed element-wise over the processes of a multi-process launch (float64,
    exact for counts below 2**53); unchanged in one process."""
    if accelerator is None or accelerator.num_processes == 1:
        return [float(v) for v in values]
    local = torch.tensor(values, dtype=torch.float64, device=accelerator.device)
    summed: torch.Tensor = accelerator.reduce(local, reduction="sum")
    return [float(v) for v in summed.tolist()]


__all__ = [
    "Behaviour",
    "ClipRange",
    "LearnerStats",
    "MicroBatch",
    "PolicySequence",
    "StepBatch",
    "TokenMean",
    "accumulate_gradients",
    "behaviour_and_weights",
    "clipped_loss_sum",
    "collate",
    "policy_sequences",
    "shared_prefix",
    "step_batch",
    "token_logprobs",
]
