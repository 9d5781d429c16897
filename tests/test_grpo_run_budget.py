"""examples/grpo_real_run.py's ``grpo`` stops at ``--steps`` informative steps, ``--max-steps``
in all, or before a step that would not fit in the time the run has left, whichever comes
first, counting the steps from the metrics a trainer wrote (so a resumed run counts its earlier
ones)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel

from ac_train.grpo.metrics import METRICS_FILE, StepMetrics

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "grpo_real_run.py"


def example_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grpo_real_run", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Config(BaseModel):
    output_dir: Path
    steps: int


class Trainer:
    """Writes one metrics line a step, as ``GRPOTrainer.train`` does, from where it stopped,
    and advances ``clock``: each step's rollouts take ``rollout_s``; step ``i`` is informative
    when ``i`` is in ``informative``, and then its learner pass takes ``learn_s`` more."""

    def __init__(
        self, out: Path, informative: set[int], rollout_s: float = 60.0, learn_s: float = 90.0
    ) -> None:
        self.config = Config(output_dir=out, steps=1)
        self.informative, self.rollout_s, self.learn_s = informative, rollout_s, learn_s
        self.calls: list[int] = []
        self.clock = 0.0

    def train(self) -> None:
        path = self.config.output_dir / METRICS_FILE
        done = len(path.read_text().splitlines()) if path.exists() else 0
        self.calls.append(self.config.steps)
        with path.open("a") as out:
            for step in range(done, self.config.steps):
                learn_s = self.learn_s if step in self.informative else 0.0
                self.clock += self.rollout_s + learn_s
                out.write(metrics(step, self.rollout_s, learn_s) + "\n")


def metrics(step: int, rollout_s: float, learn_s: float) -> str:
    informative = learn_s > 0
    return StepMetrics(
        step=step,
        policy_version=step,
        rollouts=6,
        infra_errors=0,
        reward_mean=0.5 if informative else 1.0,
        solved_groups=1,
        informative_groups=int(informative),
        compactions_per_trajectory=0.0,
        segments_per_trajectory=1.0,
        trained_sequences=6 if informative else 0,
        trained_tokens=0,
        tokens=0,
        loss=0.0,
        clip_fraction=0.0,
        grad_norm=None,
        rollout_s=rollout_s,
        learn_s=learn_s,
    ).model_dump_json()


def run(trainer: Trainer, steps: int, max_steps: int, budget_s: float) -> Trainer:
    args = argparse.Namespace(steps=steps, max_steps=max_steps)
    trainer.calls = []  # this run's
    curve = example_module().grpo(trainer, args, lambda: budget_s - trainer.clock)
    assert [m.step for m in curve] == list(range(len(curve)))
    assert trainer.clock <= budget_s or trainer.calls == [1]  # the first step always runs
    return trainer


def test_runs_until_enough_steps_were_informative(tmp_path: Path) -> None:
    trainer = run(Trainer(tmp_path, informative={1, 4, 6}), 3, 20, budget_s=1e6)
    assert trainer.calls == [1, 4, 6, 7]  # each call asks for the informative steps missing


def test_stops_at_max_steps(tmp_path: Path) -> None:
    trainer = run(Trainer(tmp_path, informative=set()), 3, 5, budget_s=1e6)
    assert trainer.calls == [1, 4, 5]


def test_trains_only_the_steps_that_fit_each_timed_as_an_informative_one(tmp_path: Path) -> None:
    # steps take 60 s of rollouts, 150 s in all when informative: after step 0 (150 s), the
    # 850 s left afford 5 steps of 150 s; they take 300 s, and so on, each call fewer, until
    # the 130 s left would fit an uninformative step but not an informative one
    trainer = run(Trainer(tmp_path, informative={0}), 12, 45, budget_s=1000.0)
    assert trainer.calls == [1, 6, 9, 11, 12, 13]
    assert trainer.clock == 150 + 12 * 60


def test_before_an_informative_step_a_step_is_timed_as_twice_its_rollouts(tmp_path: Path) -> None:
    trainer = run(Trainer(tmp_path, informative=set()), 12, 45, budget_s=300.0)
    assert trainer.calls == [1, 3, 4]  # 240 s left afford 2 steps of 120 s, 120 s one more
    assert trainer.clock == 240


def test_a_resumed_run_counts_its_earlier_steps(tmp_path: Path) -> None:
    first = run(Trainer(tmp_path, informative={0, 1}), 12, 45, budget_s=400.0)
    assert first.calls == [1, 2]  # 300 s spent; 100 s left do not afford a step of 150 s
    again = Trainer(tmp_path, informative={0, 1})
    again.clock = first.clock  # the elapsed time the run recorded
    assert run(again, 12, 45, budget_s=400.0).calls == []
    assert run(again, 12, 45, budget_s=1000.0).calls[0] == 2 + 4  # 700 s left: 4 more
    assert run(again, 2, 45, budget_s=1e6).calls == []  # it had 2 informative steps
