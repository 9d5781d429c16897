"""GRPO learner steps on a fixed batch, in as many processes as ``accelerate launch`` starts.

``python tests/grpo_data_parallel.py learner OUT`` (under ``accelerate launch``) takes the
optimizer steps of ``batch()``: each process trains on every N-th group of a step, like
``GRPOTrainer``; each writes its final weights and the step figures to ``OUT.rank<r>.pt``.
``python tests/grpo_data_parallel.py cli ARGS...`` runs ``ac-train ARGS`` with rewards that
alternate 1, 0 in each process (a random tiny model never solves a task; each group of two then
carries a gradient). ``refusals TASK_FILE OUT`` writes to ``OUT.rank<r>`` the errors of a
trainer with 3 tasks a step and of the asynchronous trainer, one a line.
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
from accelerate import Accelerator

from ac_env.trajectory import Trajectory
from ac_train.cli import main
from ac_train.grpo.async_trainer import AsyncGRPOTrainer
from ac_train.grpo.config import GRPOConfig
from ac_train.grpo.loss import PolicySequence
from ac_train.grpo.trainer import GRPOTrainer, learner_step
from ac_train.models.checkpoints import tiny_model_and_tokenizer

Groups = list[list[PolicySequence]]

CONFIG = GRPOConfig(output_dir="unused", micro_batch_size=2, max_grad_norm=None)
LEARNING_RATE = 0.5


def batch() -> list[Groups]:
    """Two steps of four groups. Step 0: the groups of process 0 of 2 (0 and 2) hold more and
    longer sequences than those of process 1, so a per-process token mean would weigh them
    wrongly, and take three micro-batches to process 1's one. Step 1: groups 1 and 3 are
    uninformative (no sequences), so process 1 of 2 has nothing to train. Behaviour
    log-probs are the initial model's plus noise: ratios away from 1, some clipped."""
    model, _ = tiny_model_and_tokenizer()
    rng = random.Random(0)

    def sequence(length: int) -> PolicySequence:
        ids = [rng.randrange(4096) for _ in range(length)]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0]
        table = torch.log_softmax(logits, dim=-1)
        trained = [t > 1 and rng.random() < 0.6 for t in range(length)]
        behaviour = [
            float(table[t - 1, ids[t]]) + rng.uniform(-0.4, 0.4) if trained[t] else 0.0
            for t in range(length)
        ]
        return PolicySequence(
            ids, trained, behaviour, rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2)
        )

    large = [[sequence(rng.randrange(20, 40)) for _ in range(3)] for _ in range(2)]
    small = [[sequence(rng.randrange(6, 10))] for _ in range(2)]
    step0 = [large[0], small[0], large[1], small[1]]
    step1 = [[sequence(15), sequence(25)], [], [sequence(12)], []]
    return [step0, step1]


def share(groups: Groups, rank: int, processes: int) -> list[PolicySequence]:
    """The sequences of every ``processes``-th group from ``rank``: ``GRPOTrainer.step``'s split."""
    return [sequence for group in groups[rank::processes] for sequence in group]


def train(
    accelerator: Accelerator | None,
) -> tuple[dict[str, torch.Tensor], list[dict[str, float | None]]]:
    """The steps of ``batch()`` by SGD (an update proportional to the gradient, so a wrongly
    scaled gradient shows; Adam's first step would hide it) on the tiny model. No
    ``accelerator``: one process, the whole batch, the plain path."""
    model, _ = tiny_model_and_tokenizer()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    rank, processes = 0, 1
    learner = model
    if accelerator is not None:
        learner, optimizer = accelerator.prepare(model, optimizer)
        rank, processes = accelerator.process_index, accelerator.num_processes
    figures = []
    for groups in batch():
        started = time.perf_counter()
        stats, grad_norm = learner_step(
            learner,
            optimizer,
            share(groups, rank, processes),
            CONFIG,
            0,
            accelerator,
            behaviour="sampler",  # the noisy recorded log-probs: ratios away from 1, clipped
        )
        seconds = time.perf_counter() - started
        figures.append({**asdict(stats), "grad_norm": grad_norm, "seconds": seconds})
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, figures


def run_learner(out: str) -> None:
    accelerator = Accelerator()
    state, figures = train(accelerator)
    torch.save({"state": state, "figures": figures}, f"{out}.rank{accelerator.process_index}.pt")


def run_refusals(task_file: str, out: str) -> None:
    model, tokenizer = tiny_model_and_tokenizer()
    env = {"task_source": task_file, "split": None}
    errors = []
    for trainer, tasks in ((GRPOTrainer, 3), (AsyncGRPOTrainer, 2)):
        config = GRPOConfig(output_dir=out, env=env, tasks_per_step=tasks, progress=False)
        try:
            trainer(config, model=model, tokenizer=tokenizer)
        except ValueError as error:
            errors.append(str(error))
    rank = Accelerator().process_index
    Path(f"{out}.rank{rank}").write_text("".join(f"{error}\n" for error in errors))


def run_cli(args: list[str]) -> int:
    rewards = itertools.cycle([1.0, 0.0])
    Trajectory.reward = property(lambda trajectory: next(rewards))
    return main(args)


if __name__ == "__main__":
    torch.set_num_threads(1)
    command, *rest = sys.argv[1:]
    if command == "learner":
        run_learner(rest[0])
    elif command == "refusals":
        run_refusals(*rest)
    else:
        sys.exit(run_cli(rest))
