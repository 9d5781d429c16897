"""SFT on segments of real env trajectories: the loss on trained tokens goes down, checkpoints
resume at the right step, the dataset export and the ``ac-train`` CLI work."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
import torch
from datasets import load_from_disk

import ac_env  # noqa: F401  (registers the env id)
from ac_env.agents.rollout import rollout
from ac_env.compaction.texts import COMPACTION_REQUEST
from ac_env.policy import PolicyOutput
from ac_env.trajectory import Trajectory
from ac_train.cli import build_parser, main, sft_config
from ac_train.judge.review import Verdict, apply_verdict
from ac_train.models.checkpoints import load_model, tiny_model_and_tokenizer
from ac_train.segments import IGNORE_INDEX, Segment, read_segments, segment_trajectory
from ac_train.sft import (
    SFTRunConfig,
    export_dataset,
    run_sft,
    sft_dataset,
    trained_token_loss,
)

SYSTEM = "Fix the bug. Reply with one ```bash block, or a summary when asked."
SUMMARY = "# Auto Context Summary\n## Known\nadd() subtracts\n## Workspace\nclean\n## Next\nfix add"


class Scripted:
    def __init__(self, turns: list[str]) -> None:
        self.turns = iter(turns)

    def act(self, observation):
        if observation[-1]["content"] == COMPACTION_REQUEST:
            return SUMMARY
        return next(self.turns)


def bash(command: str) -> str:
    return f"```bash\n{command}\n```"


@pytest.fixture(scope="module")
def trajectory(tiny_task_file) -> Trajectory:
    """Short prompts (own system prompt) so that training steps are fast: a proactive summary,
    a forced one, a format error."""
    turns = [bash("grep -n 'def add' -A2 calc/ops.py"), "hmm", SUMMARY, bash("seq 1 60")]
    turns += [bash("sed -i 's/a - b/a + b/' calc/ops.py"), bash("submit")]
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        system_prompt=SYSTEM,
        forced_compaction_threshold=250,
    )
    trajectory = rollout(env, Scripted(turns), options={"task_id": "tiny-calc-1"})
    env.close()
    return trajectory


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    torch.set_num_threads(1)
    model, tokenizer = tiny_model_and_tokenizer()
    directory = tmp_path_factory.mktemp("tiny-model")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def segments(trajectory, tiny_dir) -> list[Segment]:
    _, tokenizer = load_model(str(tiny_dir))
    return segment_trajectory(trajectory, tokenizer)


def config(output_dir, model, **overrides) -> SFTRunConfig:
    settings = {
        "model": str(model),
        "output_dir": output_dir,
        "learning_rate": 3e-3,
        "batch_size": 2,
        "micro_batch_size": 1,
        "max_steps": 4,
        "save_steps": 2,
        "activation_checkpointing": False,
        "progress": False,
    }
    return SFTRunConfig(**(settings | overrides))


def test_trajectory_has_the_cases_under_test(trajectory, segments):
    kinds = [(e.trigger, e.summarizer) for e in trajectory.compactions()]
    assert kinds == [("proactive", "policy"), ("forced", "policy")]
    assert len(segments) == 3


def test_defaults_are_the_methods():
    defaults = SFTRunConfig(output_dir="x")
    assert (defaults.epochs, defaults.learning_rate, defaults.batch_size) == (2, 5e-7, 8)
    with pytest.raises(ValueError, match="multiple of micro_batch_size"):
        SFTRunConfig(output_dir="x", batch_size=8, micro_batch_size=3)


def test_dataset_labels_are_the_sft_mask_and_nothing_is_truncated(segments):
    dataset, too_long, untrained = sft_dataset(segments, max_length=10**6)
    assert (too_long, untrained) == (0, 0)
    assert dataset["labels"] == [s.sft_labels(train_format_errors=False) for s in segments]
    assert dataset["segment_id"] == [s.id for s in segments]
    longest = max(len(s.input_ids) for s in segments)
    dataset, too_long, _ = sft_dataset(segments, max_length=longest - 1)
    assert too_long == sum(len(s.input_ids) == longest for s in segments)
    assert all(len(ids) < longest for ids in dataset["input_ids"])
    no_outputs = segments[0].model_copy(update={"token_kinds": [0] * len(segments[0].input_ids)})
    _, _, untrained = sft_dataset([no_outputs], max_length=10**6)
    assert untrained == 1


def test_export_writes_segments_and_a_hf_dataset(segments, tmp_path):
    export_dataset(segments, tmp_path, train_format_errors=False)
    assert read_segments(tmp_path / "segments.jsonl") == segments
    exported = load_from_disk(str(tmp_path / "hf"))
    assert exported["labels"] == [s.sft_labels(train_format_errors=False) for s in segments]


def trained_positions(dataset) -> set[tuple[str, int]]:
    """(segment id, position) of every labelled token of an SFT dataset."""
    rows = zip(dataset["segment_id"], dataset["labels"], strict=True)
    return {(row, t) for row, labels in rows for t, x in enumerate(labels) if x != IGNORE_INDEX}


def span_positions(segments, keep) -> set[tuple[str, int]]:
    return {
        (seg.id, t)
        for seg in segments
        for span in seg.outputs
        if keep(span)
        for t in range(span.start, span.end)
    }


def test_format_errors_are_not_trained_through_any_path_unless_asked(segments, tmp_path):
    errors = span_positions(segments, lambda span: span.format_error)
    assert errors  # the trajectory's "hmm" turn
    dataset, _, _ = sft_dataset(segments, max_length=10**6)  # the Python API
    assert not trained_positions(dataset) & errors
    assert SFTRunConfig(output_dir="x").train_format_errors is False  # run_sft's default
    export_dataset(segments, tmp_path / "export")  # the HF export (ac-train segments, collect)
    exported = load_from_disk(str(tmp_path / "export" / "hf"))
    assert not trained_positions(exported) & errors
    line = ["sft", "--data", "x.jsonl", "--output-dir", str(tmp_path)]
    assert sft_config(build_parser("sft").parse_args(line)).train_format_errors is False
    # the option to include them
    included = sft_config(build_parser("sft").parse_args([*line, "--train-format-errors"]))
    assert included.train_format_errors is True
    dataset, _, _ = sft_dataset(segments, max_length=10**6, train_format_errors=True)
    assert errors <= trained_positions(dataset)


class CorrectsStep:
    """A judge's hook that replaces the candidate of one step (a continuation correction)."""

    def __init__(self, step: int, replacement: str) -> None:
        self.step, self.replacement = step, replacement
        self.seen = 0

    def __call__(self, env, observation, candidate):
        self.seen += 1
        if self.seen - 1 != self.step:
            return candidate
        text = candidate.text if isinstance(candidate, PolicyOutput) else candidate
        verdict = Verdict(
            decision="correct", correction="continuation", replacement=self.replacement
        )
        return apply_verdict(PolicyOutput(text=text), verdict)


@pytest.fixture(scope="module")
def corrected_segments(tiny_task_file, tiny_dir) -> list[Segment]:
    """The fixture trajectory's policy, with the judge replacing its step-3 command (the one
    after its proactive summary) by the fix: policy outputs before and after the correction."""
    turns = [bash("grep -n 'def add' -A2 calc/ops.py"), "hmm", SUMMARY, bash("seq 1 60")]
    turns += [bash("ls"), bash("submit")]
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(tiny_task_file),
        split=None,
        system_prompt=SYSTEM,
        forced_compaction_threshold=250,
    )
    review = CorrectsStep(3, bash("sed -i 's/a - b/a + b/' calc/ops.py"))
    trajectory = rollout(env, Scripted(turns), options={"task_id": "tiny-calc-1"}, review=review)
    env.close()
    _, tokenizer = load_model(str(tiny_dir))
    return segment_trajectory(trajectory, tokenizer)


def preset_positions(preset: str, segments: list[Segment]) -> set[tuple[str, int]]:
    config = SFTRunConfig.from_preset(preset, output_dir="x")
    dataset, _, _ = sft_dataset(segments, 10**6, config.train_format_errors, config.trained_outputs)
    return trained_positions(dataset)


def test_the_two_sft_presets_differ_exactly_by_the_judges_correction(
    trajectory, segments, corrected_segments
):
    """On uncorrected demonstrations both presets train every executed output but the format
    error: when to compact (the proactive summary), what to write (both summaries) and how to
    go on (the commands after them). On a corrected trajectory AutoCompact-SFT trains the
    judge's output and everything after it; SWE-Compressor only what came before it."""
    everything = span_positions(segments, lambda span: not span.format_error)
    compressor = preset_positions("swe_compressor", segments)
    assert compressor == preset_positions("autocompact_sft", segments) == everything
    proactive, forced = (e.step for e in trajectory.compactions())
    for step in (proactive, forced):  # the decision to compact, and both summaries
        assert span_positions(segments, lambda span, step=step: span.step == step) <= compressor
    going_on = span_positions(segments, lambda span: span.step > forced)
    assert going_on and going_on <= compressor  # the commands after a summary

    spans = [(seg, span) for seg in corrected_segments for span in seg.outputs]
    (judged,) = [span.step for _, span in spans if span.produced_by == "judge"]
    assert any(span.produced_by == "policy" and span.step > judged for _, span in spans)
    autocompact = preset_positions("autocompact_sft", corrected_segments)
    compressor = preset_positions("swe_compressor", corrected_segments)
    assert autocompact == span_positions(corrected_segments, lambda span: not span.format_error)
    before = span_positions(
        corrected_segments, lambda span: span.step < judged and not span.format_error
    )
    assert compressor == before and compressor < autocompact
    summary = span_positions(corrected_segments, lambda span: span.step == proactive)
    assert summary and summary <= compressor  # its own compaction, before the correction
    line = ["sft", "--data", "x.jsonl", "--output-dir", "x", "--preset", "swe_compressor"]
    expected = SFTRunConfig.from_preset("swe_compressor", output_dir="x")
    assert sft_config(build_parser("sft").parse_args(line)) == expected


@pytest.mark.slow
def test_sft_lowers_the_loss_on_trained_tokens(segments, tiny_dir, tmp_path):
    model, _ = load_model(str(tiny_dir))
    before = trained_token_loss(model, segments)
    metrics = run_sft(config(tmp_path, tiny_dir), segments)
    trained, _ = load_model(str(metrics.final_model_dir))
    after = trained_token_loss(trained, segments)
    assert after < before - 0.1
    assert metrics.steps == 4 and metrics.segments == len(segments)
    assert metrics.padding_waste == 0  # one segment per forward pass
    per_pass = sum(len(s.input_ids) for s in segments) / len(segments)
    assert metrics.tokens == pytest.approx(8 * per_pass, rel=0.5)
    assert 0 < metrics.trained_tokens < metrics.tokens


@pytest.mark.slow
def test_resume_continues_at_the_right_step(segments, tiny_dir, tmp_path):
    first = tmp_path / "first"
    full = run_sft(config(first, tiny_dir), segments)
    assert (first / "checkpoint-2").is_dir() and (first / "checkpoint-4").is_dir()
    losses = _step_losses(first / "checkpoint-4")
    resumed_dir = tmp_path / "resumed"
    resumed = run_sft(
        config(resumed_dir, tiny_dir, resume_from_checkpoint=str(first / "checkpoint-2")),
        segments,
    )
    assert resumed.steps == full.steps == 4
    resumed_losses = _step_losses(resumed_dir / "checkpoint-4")
    assert sorted(resumed_losses) == [1, 2, 3, 4]  # history restored, then steps 3 and 4 run
    assert resumed.tokens < full.tokens  # only two of the four steps were fed again
    for step in (3, 4):
        assert resumed_losses[step] == pytest.approx(losses[step], rel=1e-4)


def _step_losses(checkpoint) -> dict[int, float]:
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return {entry["step"]: entry["loss"] for entry in state["log_history"] if "loss" in entry}


@pytest.mark.slow
def test_cli_segments_then_sft(trajectory, tiny_dir, tmp_path, capsys):
    trajectory.write(tmp_path / "run.jsonl")
    out = tmp_path / "data"
    assert (
        main(
            [
                "segments",
                str(tmp_path / "run.jsonl"),
                "--out",
                str(out),
                "--tokenizer",
                str(tiny_dir),
            ]
        )
        == 0
    )
    assert len(read_segments(out / "segments.jsonl")) == 3
    capsys.readouterr()
    code = main(
        [
            "sft",
            "--data",
            str(out / "segments.jsonl"),
            "--output-dir",
            str(tmp_path / "run"),
            "--model",
            str(tiny_dir),
            "--max-steps",
            "1",
            "--batch-size",
            "2",
            "--micro-batch-size",
            "2",
            "--no-activation-checkpointing",
        ]
    )
    assert code == 0
    metrics = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert metrics == json.loads((tmp_path / "run" / "sft_metrics.json").read_text())
    assert metrics["steps"] == 1 and metrics["segments"] == 3
    assert (tmp_path / "run" / "final" / "config.json").is_file()


def test_cli_rejects_a_bad_config(tmp_path):
    with pytest.raises(ValueError, match="multiple of micro_batch_size"):
        main(
            [
                "sft",
                "--data",
                str(tmp_path / "x.jsonl"),
                "--output-dir",
                str(tmp_path),
                "--batch-size",
                "3",
                "--micro-batch-size",
                "2",
            ]
        )


@pytest.mark.slow
@pytest.mark.model
def test_smollm2_few_steps_lower_the_loss_on_trained_tokens(trajectory, tmp_path):
    """The real model: two SFT steps on three segments lower those segments' trained-token
    loss (measured before and after, on the saved model)."""
    torch.set_num_threads(1)
    model, tokenizer = load_model("smollm2")
    segments = segment_trajectory(trajectory, tokenizer)
    assert max(len(s.input_ids) for s in segments) < 600
    before = trained_token_loss(model, segments)
    metrics = run_sft(
        config(
            tmp_path,
            "smollm2",
            learning_rate=1e-4,
            max_steps=2,
            save_steps=100,
            batch_size=len(segments),
            micro_batch_size=1,  # no padding: about 40 s of CPU on one thread
        ),
        segments,
    )
    trained, _ = load_model(str(metrics.final_model_dir))
    after = trained_token_loss(trained, segments)
    assert after < before * 0.9, (before, after)
    labels = [label for s in segments for label in s.sft_labels(False) if label != IGNORE_INDEX]
    assert metrics.trained_tokens == 2 * len(labels)  # format errors not trained
    assert metrics.padding_waste == 0
