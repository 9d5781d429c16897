"""examples/grpo_real_run.py's ``grpo`` stops at ``--steps`` informative steps, ``--max-steps``
in all or ``--grpo-minutes`` of step time, whichever comes first, counting from the metrics a
trainer wrote (so a resumed run counts its earlier steps)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel

from ac_train.grpo_metrics import METRICS_FILE, StepMetrics

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
    """Writes one metrics line a step, as ``GRPOTrainer.train`` does, from where it stopped:
    step ``i`` takes ``step_s[i]`` seconds and is informative when ``i`` is in ``informative``."""

    def __init__(self, out: Path, step_s: list[float], informative: set[int]) -> None:
        self.config = Config(output_dir=out, steps=1)
        self.step_s, self.informative = step_s, informative
        self.calls: list[int] = []

    def train(self) -> None:
        path = self.config.output_dir / METRICS_FILE
        done = len(path.read_text().splitlines()) if path.exists() else 0
        self.calls.append(self.config.steps)
        with path.open("a") as out:
            for step in range(done, self.config.steps):
                out.write(metrics(step, self.step_s[step], step in self.informative) + "\n")


def metrics(step: int, seconds: float, informative: bool) -> str:
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
        rollout_s=seconds * 0.75,
        learn_s=seconds * 0.25,
    ).model_dump_json()


def run(tmp_path: Path, steps: int, max_steps: int, minutes: float, **kw: object) -> Trainer:
    trainer = Trainer(tmp_path, **kw)  # type: ignore[arg-type]
    args = argparse.Namespace(steps=steps, max_steps=max_steps, grpo_minutes=minutes)
    curve = example_module().grpo(trainer, args)
    assert [m.step for m in curve] == list(range(len(curve)))
    return trainer


def test_runs_until_enough_steps_were_informative(tmp_path: Path) -> None:
    trainer = run(tmp_path, 3, 20, 60.0, step_s=[60.0] * 20, informative={1, 4, 6})
    assert trainer.calls == [3, 5, 6, 7]  # each call asks for the informative steps missing


def test_stops_at_max_steps(tmp_path: Path) -> None:
    trainer = run(tmp_path, 3, 5, 60.0, step_s=[60.0] * 20, informative=set())
    assert trainer.calls == [3, 5]


def test_the_time_budget_bounds_each_call_past_the_first(tmp_path: Path) -> None:
    # 60 s a step, a 10-minute budget: the first call's 6 steps leave 240 s, which afford 4 of
    # the 5 informative steps still missing; then the budget is spent
    trainer = run(tmp_path, 6, 45, 10.0, step_s=[60.0] * 45, informative={0})
    assert trainer.calls == [6, 10]


def test_a_resumed_run_counts_its_earlier_steps_time(tmp_path: Path) -> None:
    step_s = [100.0] * 45
    first = run(tmp_path, 4, 45, 10.0, step_s=step_s, informative=set())
    # 4 steps, 400 s: the 200 s left afford 2 more, and 600 s is the budget
    assert first.calls == [4, 6]
    again = run(tmp_path, 4, 45, 10.0, step_s=step_s, informative=set())
    assert again.calls == []  # the budget was spent before the restart
