"""Supervised fine-tuning on segments through TRL's ``SFTTrainer``.

Each segment is one pre-tokenized example: ``input_ids`` and ``labels`` (the token where SFT
trains, ``-100`` elsewhere: ``Segment.sft_labels``), so no chat template or ``{% generation %}``
markers are involved. Format errors (outputs that were no valid action for their turn) are
never trained unless asked (``train_format_errors``), through every path: ``run_sft``,
``sft_dataset``, ``export_dataset`` (the HF export of ``ac-train segments`` and of collection)
and ``ac-train sft``; the method's SFT data excludes "requests with format errors".
Segments longer than ``max_length`` are dropped and counted, never truncated (truncation
would cut the summary that ends a segment). Batches are grouped by length to cut padding;
the padding actually fed to the model is measured and reported.
Checkpoints are written every ``save_steps`` and ``resume_from_checkpoint`` continues one.

Defaults follow the method's SFT stage: 2 epochs, learning rate 5e-7, batch 8. Presets
(``SFT_PRESETS``, ``SFTRunConfig.from_preset``) name the SFT rows of the method's main table,
two SFT-only learners of proactive compaction that differ exactly by the Judge's correction:

- ``autocompact_sft`` (``trained_outputs="all"``) trains every executed policy and judge output
  of judge-corrected trajectories (AutoCompact-SFT: "imitate the executed, corrected
  trajectories", the continuation after each correction included);
- ``swe_compressor`` (``trained_outputs="uncorrected"``) trains uncorrected demonstrations:
  every executed output of a trajectory no judge corrected (when it compacts, what its summaries
  say and how it goes on, as the demonstrator did them), and of a corrected trajectory only the
  outputs before its first correction (what follows was shaped by the correction). Its data is
  a collection with ``--judge none`` (or ``--shadow``) of the same worker on the same tasks and
  seeds as AutoCompact-SFT's; on such data the two presets train the same tokens.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from datasets import Dataset
from pydantic import BaseModel, ConfigDict, Field, model_validator
from transformers import PreTrainedModel
from trl import SFTConfig, SFTTrainer
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from ac_train.models.checkpoints import load_model
from ac_train.segments import IGNORE_INDEX, Segment, read_segments, write_segments

TrainedOutputs = Literal["all", "uncorrected"]


class SFTRunConfig(BaseModel):
    """One SFT run. ``batch_size`` segments per optimizer step, fed ``micro_batch_size`` at a
    time (gradient accumulation makes up the rest)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default="smollm2", description="'smollm2', an HF name or a checkpoint dir")
    output_dir: Path = Field(description="checkpoints, and the final model under final/")
    epochs: float = Field(default=2.0, gt=0)
    learning_rate: float = Field(default=5e-7, gt=0)
    batch_size: int = Field(default=8, ge=1, description="segments per optimizer step")
    micro_batch_size: int = Field(default=8, ge=1, description="segments per forward pass")
    max_length: int = Field(default=16_384, ge=1, description="longer segments are dropped")
    max_steps: int | None = Field(default=None, ge=1, description="overrides epochs when set")
    group_by_length: bool = Field(default=True, description="batch segments of similar length")
    train_format_errors: bool = Field(
        default=False, description="also train format-error outputs (masked by default)"
    )
    trained_outputs: TrainedOutputs = Field(
        default="all",
        description="'all' executed policy and judge outputs, or 'uncorrected': the policy's "
        "outputs before its trajectory's first judge correction (all of them when none)",
    )
    lr_scheduler_type: str = "linear"
    warmup_steps: int = Field(default=0, ge=0)
    weight_decay: float = Field(default=0.0, ge=0)
    activation_checkpointing: bool = Field(default=True, description="less memory, slower")
    bf16: bool = False
    seed: int = 0
    save_steps: int = Field(default=100, ge=1)
    save_total_limit: int | None = Field(default=None, ge=1)
    logging_steps: int = Field(default=1, ge=1)
    resume_from_checkpoint: str | bool | None = Field(
        default=None, description="a checkpoint dir, or True for the latest in output_dir"
    )
    progress: bool = True

    @model_validator(mode="after")
    def _whole_micro_batches(self) -> SFTRunConfig:
        if self.batch_size % self.micro_batch_size:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be a multiple of micro_batch_size "
                f"({self.micro_batch_size})"
            )
        return self

    @classmethod
    def from_preset(cls, preset: str, **settings: Any) -> SFTRunConfig:
        """The settings of ``SFT_PRESETS[preset]``, overridden by ``settings``."""
        if preset not in SFT_PRESETS:
            raise ValueError(f"unknown SFT preset {preset!r}; valid: {', '.join(SFT_PRESETS)}")
        return cls(**{**SFT_PRESETS[preset], **settings})


SFT_PRESETS: dict[str, dict[str, Any]] = {
    "autocompact_sft": {"trained_outputs": "all", "train_format_errors": False},
    "swe_compressor": {"trained_outputs": "uncorrected", "train_format_errors": False},
}
"""The SFT rows of the method's main table as ``SFTRunConfig`` settings (module docstring)."""


class SFTMetrics(BaseModel):
    """What a run did. Token counts are over every example fed (all epochs)."""

    steps: int
    epochs: float
    train_loss: float = Field(description="the trainer's mean loss over the steps this call ran")
    last_loss: float | None = Field(description="loss of the last logged step")
    segments: int = Field(description="segments trained on")
    dropped_too_long: int
    dropped_untrained: int = Field(description="segments with no trained token")
    tokens: int = Field(description="real (non-padding) tokens fed")
    trained_tokens: int = Field(description="tokens with a label")
    padding_waste: float = Field(description="padding / all positions fed")
    tokens_per_s: float
    runtime_s: float
    peak_memory_bytes: int = Field(description="CUDA peak allocation, else process max RSS")
    final_model_dir: Path


class PaddingMeter:
    """Wraps a collator and counts the real and padded positions of every batch it builds."""

    def __init__(self, collator: Any) -> None:
        self.collator = collator
        self.real = 0
        self.positions = 0
        self.labelled = 0

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        batch = self.collator(examples)
        self.real += sum(len(example["input_ids"]) for example in examples)
        self.positions += int(batch["input_ids"].numel())
        self.labelled += int((batch["labels"] != IGNORE_INDEX).sum())
        return batch

    @property
    def waste(self) -> float:
        return 1 - self.real / self.positions if self.positions else 0.0


def sft_labels(
    segment: Segment,
    train_format_errors: bool = False,
    trained_outputs: TrainedOutputs = "all",
    first_correction: int | None = None,
) -> list[int]:
    """``segment.sft_labels``; with ``"uncorrected"``, only the outputs of steps before
    ``first_correction`` (the step of its trajectory's first judge output; None: no judge
    output, so every output)."""
    labels = segment.sft_labels(train_format_errors)
    if trained_outputs == "all" or first_correction is None:
        return labels
    for span in segment.outputs:
        if span.step >= first_correction:
            labels[span.start : span.end] = [IGNORE_INDEX] * (span.end - span.start)
    return labels


def first_corrections(segments: Sequence[Segment]) -> dict[str, int]:
    """Trajectory id -> the step of its first judge output, for trajectories that have one."""
    first: dict[str, int] = {}
    for segment in segments:
        for span in segment.outputs:
            if span.produced_by == "judge":
                known = first.get(segment.trajectory_id, span.step)
                first[segment.trajectory_id] = min(known, span.step)
    return first


def sft_dataset(
    segments: Sequence[Segment],
    max_length: int,
    train_format_errors: bool = False,
    trained_outputs: TrainedOutputs = "all",
) -> tuple[Dataset, int, int]:
    """The trainer's dataset (``input_ids``, ``labels``, ``length``, ``segment_id``), and how
    many segments were dropped for being longer than ``max_length`` / having no trained token.
    ``"uncorrected"`` reads each trajectory's first correction from all of ``segments``."""
    first = first_corrections(segments) if trained_outputs == "uncorrected" else {}
    rows: dict[str, list[Any]] = {"input_ids": [], "labels": [], "length": [], "segment_id": []}
    too_long = untrained = 0
    for segment in segments:
        if len(segment.input_ids) > max_length:
            too_long += 1
            continue
        labels = sft_labels(
            segment, train_format_errors, trained_outputs, first.get(segment.trajectory_id)
        )
        if all(label == IGNORE_INDEX for label in labels):
            untrained += 1
            continue
        rows["input_ids"].append(segment.input_ids)
        rows["labels"].append(labels)
        rows["length"].append(len(segment.input_ids))
        rows["segment_id"].append(segment.id)
    return Dataset.from_dict(rows), too_long, untrained


def export_dataset(
    segments: Sequence[Segment], directory: str | Path, train_format_errors: bool = False
) -> Path:
    """Write ``segments.jsonl`` (every field, the source of truth) and ``hf/`` (the SFT
    columns as a Hugging Face dataset, ``datasets.load_from_disk``) under ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_segments(segments, directory / "segments.jsonl")
    dataset, _, _ = sft_dataset(segments, sys.maxsize, train_format_errors)
    dataset.save_to_disk(str(directory / "hf"))
    return directory


def run_sft(config: SFTRunConfig, data: Sequence[Segment] | str | Path) -> SFTMetrics:
    """Train ``config.model`` on ``data`` (segments, or a segments ``.jsonl`` file); the final
    model goes to ``output_dir/final`` and the metrics to ``output_dir/sft_metrics.json``."""
    segments = read_segments(data) if isinstance(data, str | Path) else data
    dataset, too_long, untrained = sft_dataset(
        segments, config.max_length, config.train_format_errors, config.trained_outputs
    )
    if len(dataset) == 0:
        raise ValueError(
            f"no segment to train on: {too_long} longer than max_length={config.max_length}, "
            f"{untrained} without a trained token"
        )
    if too_long:
        print(f"sft: dropped {too_long} segments longer than {config.max_length}", file=sys.stderr)
    model, tokenizer = load_model(config.model)
    meter = PaddingMeter(DataCollatorForLanguageModeling(pad_token_id=_pad_id(tokenizer)))
    trainer = SFTTrainer(
        model=model,
        args=_trainer_args(config),
        train_dataset=dataset,
        processing_class=tokenizer,
        data_collator=meter,
    )
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=config.resume_from_checkpoint)
    runtime = time.perf_counter() - started
    final_dir = config.output_dir / "final"
    trainer.save_model(str(final_dir))
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    metrics = SFTMetrics(
        steps=trainer.state.global_step,
        epochs=float(trainer.state.epoch or 0.0),
        train_loss=float(result.training_loss),
        last_loss=losses[-1] if losses else None,
        segments=len(dataset),
        dropped_too_long=too_long,
        dropped_untrained=untrained,
        tokens=meter.real,
        trained_tokens=meter.labelled,
        padding_waste=meter.waste,
        tokens_per_s=meter.real / runtime if runtime > 0 else 0.0,
        runtime_s=runtime,
        peak_memory_bytes=_peak_memory(),
        final_model_dir=final_dir,
    )
    (config.output_dir / "sft_metrics.json").write_text(metrics.model_dump_json(indent=2))
    return metrics


def _trainer_args(config: SFTRunConfig) -> SFTConfig:
    return SFTConfig(
        output_dir=str(config.output_dir),
        num_train_epochs=config.epochs,
        max_steps=config.max_steps or -1,
        per_device_train_batch_size=config.micro_batch_size,
        gradient_accumulation_steps=config.batch_size // config.micro_batch_size,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type,
        warmup_steps=config.warmup_steps,
        weight_decay=config.weight_decay,
        activation_checkpointing=config.activation_checkpointing,
        bf16=config.bf16,
        seed=config.seed,
        max_length=config.max_length,
        packing=False,
        train_sampling_strategy="group_by_length" if config.group_by_length else "random",
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        logging_steps=config.logging_steps,
        disable_tqdm=not config.progress,
        report_to="none",
        dataloader_pin_memory=torch.cuda.is_available(),
    )


def _pad_id(tokenizer: Any) -> int:
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ValueError("the tokenizer has neither a pad nor an EOS token to pad batches with")
    return int(pad)


def _peak_memory() -> int:
    if torch.cuda.is_available():
        return int(torch.cuda.max_memory_allocated())
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


@torch.no_grad()
def trained_token_loss(
    model: PreTrainedModel,
    segments: Sequence[Segment],
    train_format_errors: bool = False,
) -> float:
    """Mean negative log-likelihood of the SFT-trained tokens of ``segments`` (one forward
    pass per segment, no padding): the quantity SFT minimises."""
    was_training = model.training
    model.eval()
    total = 0.0
    count = 0
    device = model.device
    for segment in segments:
        labels = torch.tensor([segment.sft_labels(train_format_errors)], device=device)
        if not (labels != IGNORE_INDEX).any():
            continue
        input_ids = torch.tensor([segment.input_ids], device=device)
        logits = model(input_ids=input_ids).logits[0, :-1].float()
        targets = labels[0, 1:]
        nll = torch.nn.functional.cross_entropy(
            logits, targets, ignore_index=IGNORE_INDEX, reduction="sum"
        )
        total += float(nll)
        count += int((targets != IGNORE_INDEX).sum())
    model.train(was_training)
    if count == 0:
        raise ValueError("the segments have no trained token")
    return total / count
