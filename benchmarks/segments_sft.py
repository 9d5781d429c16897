"""Segmenter and SFT throughput, with SmolLM2's tokenizer and model.

Prints:
- segmenter tokens/s on a long scripted episode (16K forced-compaction threshold), for a
  text-only trajectory (every prompt and output rendered by the chat template) and for one
  with recorded ids (what a TransformersPolicy or vLLM run stores);
- padding waste of batches with and without length grouping (HF's LengthGroupedSampler, the
  one SFTTrainer uses) on 2,000 segment lengths drawn uniformly from 1K-16K tokens (segments
  cut at the 16K forced-compaction threshold);
- SFT tokens/s and peak memory on SmolLM2 for a few steps (run_sft, real training).

    .venv/bin/python benchmarks/segments_sft.py [--sft-steps 2] [--threads 2]
        [--activation-checkpointing]   (one SFT setting per run: peak RSS is per process)
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from torch.utils.data import RandomSampler
from transformers import AutoTokenizer
from transformers.trainer_pt_utils import LengthGroupedSampler

import ac_env  # noqa: F401  (registers the env id)
from ac_env import PolicyOutput
from ac_env.agents.rollout import rollout
from ac_env.compaction.texts import COMPACTION_REQUEST
from ac_env.tasks.model import Task
from ac_env.trajectory import Trajectory
from ac_train.models.checkpoints import ensure_smollm2_checkpoint
from ac_train.segments import ChatRenderer, segment_trajectory
from ac_train.sft import SFTRunConfig, run_sft

SUMMARY = (
    "# Auto Context Summary\n## Known\nadd() subtracts in calc/ops.py\n"
    "## Workspace\nno changes yet\n## Next\nfix add"
)
BUGGY = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


class LongEpisode:
    """Alternates a long command output and a short one; answers forced requests with a
    summary. With ``renderer``, it reports token ids like a local model policy would."""

    def __init__(self, renderer: ChatRenderer | None, lines: int) -> None:
        self.renderer = renderer
        self.lines = lines
        self.turn = 0

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        if observation[-1]["content"] == COMPACTION_REQUEST:
            text = SUMMARY
        else:
            self.turn += 1
            command = f"seq 1 {self.lines}" if self.turn % 2 else "ls calc"
            text = f"THOUGHT: step {self.turn}\n```bash\n{command}\n```"
        if self.renderer is None:
            return PolicyOutput(text=text)
        output_ids = [*self.renderer.encode(text), self.renderer.tokenizer.eos_token_id]
        return PolicyOutput(
            text=text,
            prompt_token_ids=self.renderer.prompt_ids(observation),
            output_token_ids=output_ids,
            output_logprobs=[-0.5] * len(output_ids),
        )


def make_task(root: Path) -> Path:
    repo = root / "calc"
    repo.mkdir(parents=True)
    (repo / "calc.py").write_text(BUGGY)
    (repo / "test_calc.py").write_text(TESTS)
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run([*git, *args], cwd=repo, check=True)
    task = Task(
        instance_id="bench-calc",
        repo="local/calc",
        problem_statement="add(2, 3) returns -1.",
        patch="",
        FAIL_TO_PASS=["test_calc.py::test_add"],
        PASS_TO_PASS=[],
        snapshot_dir=repo,
        test_files=["test_calc.py"],
    )
    path = root / "tasks.jsonl"
    path.write_text(json.dumps(task.model_dump(mode="json")) + "\n")
    return path


def episode(
    task_file: Path, renderer: ChatRenderer | None, steps: int, threshold: int, lines: int
) -> Trajectory:
    env = gym.make(
        "AutoCompact-SWE-v0",
        task_source=str(task_file),
        split=None,
        max_steps=steps,
        forced_compaction_threshold=threshold,
    )
    trajectory = rollout(env, LongEpisode(renderer, lines))
    env.close()
    return trajectory


def time_segmenter(trajectory: Trajectory, tokenizer: Any, label: str, repeats: int = 3) -> None:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        segments = segment_trajectory(trajectory, tokenizer)
        best = min(best, time.perf_counter() - started)
    tokens = sum(len(s.input_ids) for s in segments)
    calls = len(trajectory.model_calls())
    print(
        f"segmenter, {label}: {calls} calls -> {len(segments)} segments, {tokens} tokens in "
        f"{best:.3f} s = {tokens / best:,.0f} segment tokens/s ({best / calls * 1e3:.1f} ms/call)"
    )


def padding_waste(order: list[int], lengths: list[int], micro_batch: int) -> float:
    real = padded = 0
    for start in range(0, len(order), micro_batch):
        batch = [lengths[i] for i in order[start : start + micro_batch]]
        real += sum(batch)
        padded += max(batch) * len(batch)
    return 1 - real / padded


def report_padding(lengths: list[int], label: str, batch: int, micro_batch: int) -> None:
    generator = torch.Generator().manual_seed(0)
    grouped = list(LengthGroupedSampler(batch, lengths=lengths, generator=generator))
    shuffled = list(RandomSampler(range(len(lengths)), generator=generator))
    print(
        f"padding waste, {label} ({len(lengths)} segments, batch {batch}, micro-batch "
        f"{micro_batch}): random {padding_waste(shuffled, lengths, micro_batch):.1%}, "
        f"length-grouped {padding_waste(grouped, lengths, micro_batch):.1%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="turns of the long episode")
    parser.add_argument("--sft-steps", type=int, default=2)
    parser.add_argument("--sft-segments", type=int, default=4, help="segments per SFT step")
    parser.add_argument("--activation-checkpointing", action="store_true")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    tokenizer = AutoTokenizer.from_pretrained(ensure_smollm2_checkpoint())
    renderer = ChatRenderer(tokenizer)
    with tempfile.TemporaryDirectory() as tmp:
        task_file = make_task(Path(tmp))
        text_only = episode(task_file, None, args.steps, threshold=16_384, lines=700)
        recorded = episode(task_file, renderer, args.steps, threshold=16_384, lines=700)
        time_segmenter(text_only, tokenizer, "text only (rendered)")
        time_segmenter(recorded, tokenizer, "recorded ids")

        rng = random.Random(0)
        synthetic = [rng.randint(1_000, 16_384) for _ in range(2_000)]
        for micro_batch in (2, 4, 8):
            report_padding(synthetic, "uniform 1K-16K", 8, micro_batch)

        # SFT: segments of about 1K tokens (a low threshold), one per forward pass
        short = episode(task_file, None, 4 * args.sft_segments, threshold=900, lines=40)
        train = segment_trajectory(short, tokenizer)[: args.sft_segments]
        config = SFTRunConfig(
            model="smollm2",
            output_dir=Path(tmp) / "sft",
            learning_rate=1e-5,
            batch_size=len(train),
            micro_batch_size=1,
            max_steps=args.sft_steps,
            activation_checkpointing=args.activation_checkpointing,
            save_steps=10**6,
            progress=False,
        )
        metrics = run_sft(config, train)
        lengths = sorted(len(s.input_ids) for s in train)
        print(
            f"SFT SmolLM2 ({args.threads} threads, activation checkpointing "
            f"{'on' if args.activation_checkpointing else 'off'}, segments of {lengths} "
            f"tokens): {metrics.steps} steps, {metrics.tokens} tokens in "
            f"{metrics.runtime_s:.1f} s = {metrics.tokens_per_s:.0f} tokens/s; peak memory "
            f"{metrics.peak_memory_bytes / 2**30:.2f} GiB (process max RSS)"
        )


if __name__ == "__main__":
    main()
