"""The start-state probe: pass-rate posteriors fitted to a pool, and draws that favour the
start states likeliest to give a mixed group."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from pydantic import ValidationError

from ac_env.trajectory import Trajectory
from ac_train.grpo.config import DemonstrationStarts, GRPOConfig
from ac_train.grpo.start_probe import (
    PROBE_FILE,
    PassRate,
    ProbeResult,
    fit_prior,
    pass_rates,
    read_probe,
    write_probe,
)
from ac_train.grpo.task_draw import GroupOutcome, TaskDraw
from ac_train.grpo.trainer import GRPOTrainer
from ac_train.models.checkpoints import tiny_model_and_tokenizer


def probed(start_id: str, passes: int, samples: int = 2) -> ProbeResult:
    rewards = [1.0] * passes + [0.0] * (samples - passes)
    return ProbeResult(start_id=start_id, rewards=rewards, wall_s=1.0)


def seen(pool: list[ProbeResult]) -> dict[str, list[float]]:
    return {result.start_id: result.rewards for result in pool}


def polarized_pool() -> list[ProbeResult]:
    """Most starts settled (always or never solved), two mixed: a warm start's curriculum."""
    settled = [probed(f"never-{i}", 0) for i in range(10)] + [
        probed(f"always-{i}", 2) for i in range(6)
    ]
    return [*settled, probed("mixed-0", 1), probed("mixed-1", 1)]


def test_the_informative_chance_is_the_exact_posterior_mean():
    # under Beta(1, 1), E[p**G] = 1 / (G + 1), so a group of G is mixed with chance 1 - 2/(G+1)
    assert PassRate(1, 1).informative_chance(6) == pytest.approx(1 - 2 / 7)
    rng = random.Random(0)
    rate = PassRate(0.7, 2.3)
    mixed = 0
    for _ in range(40_000):  # groups of 4 from pass rates drawn from the posterior
        p = rng.betavariate(rate.a, rate.b)
        mixed += len({rng.random() < p for _ in range(4)}) == 2
    assert mixed / 40_000 == pytest.approx(rate.informative_chance(4), abs=0.01)


def test_a_polarized_pool_fits_a_u_shaped_prior_and_a_binomial_one_a_peaked_prior():
    polar = fit_prior(seen(polarized_pool()).values())
    assert polar.a + polar.b < 1  # mass near 0 and 1: "0 of 2" means "probably never"
    # every start passing half the time: 0, 1, 2 passes of 2 in binomial proportions 1:2:1
    even = [probed(f"s{i}", passes) for i, passes in enumerate([0, 1, 1, 2] * 10)]
    peaked = fit_prior(seen(even).values())
    assert peaked.a + peaked.b > 10
    assert peaked.a / (peaked.a + peaked.b) == pytest.approx(0.5, abs=0.05)
    with pytest.raises(ValueError, match="no start state has a reward"):
        fit_prior([[]])


def test_a_mixed_probe_ranks_far_above_a_settled_one_in_a_polarized_pool():
    pool = polarized_pool()
    rates = pass_rates(seen(pool), seen(pool))
    mixed = rates["mixed-0"].informative_chance(6)
    assert mixed > 0.6
    assert rates["never-0"].informative_chance(6) < mixed / 3
    assert rates["always-0"].informative_chance(6) < mixed / 3


def test_probe_draws_take_the_mixed_starts_and_skipping_rotates_in_the_next_likeliest():
    pool = polarized_pool()
    ids = [result.start_id for result in pool]
    rates = pass_rates(seen(pool), ids)
    draw = TaskDraw(ids, seed=0, favour_mixed=True, group_size=6, seen=seen(pool))
    drawn = Counter(task for step in range(200) for task in draw.draw(step, 1))
    assert set(drawn) == {"mixed-0", "mixed-1"}  # uniform draws: 2 of 18
    assert min(drawn.values()) > 60  # ties go either way
    skipping = TaskDraw(
        ids, seed=0, skip_uniform_for=5, favour_mixed=True, group_size=6, seen=seen(pool)
    )
    skipping.record(0, [GroupOutcome(task_id=t, rewards=[1.0] * 6) for t in ("mixed-0", "mixed-1")])
    # the "always" starts are likelier to turn mixed than the "never" ones (6 of 16 passed)
    assert rates["always-0"].informative_chance(6) > rates["never-0"].informative_chance(6)
    rotated = Counter(task for step in range(1, 6) for task in skipping.draw(step, 2))
    assert {task.split("-")[0] for task in rotated} == {"always"}
    assert len(rotated) > 2  # ties among them in random order
    assert set(skipping.draw(6, 2)) == {"mixed-0", "mixed-1"}  # back after 5 steps


def test_without_a_probe_the_groups_are_the_evidence_a_mixed_start_is_drawn_again():
    ids = [f"start-{i}" for i in range(12)]
    draw = TaskDraw(ids, seed=0, skip_uniform_for=4, favour_mixed=True, group_size=6)
    first = draw.draw(0, 1)  # nothing seen: every start has the prior, drawn in random order
    assert first == random.Random("0:0").sample(ids, len(ids))[:1]
    draw.record(0, [GroupOutcome(task_id=first[0], rewards=[1.0] * 6)])  # settled: skipped
    second = draw.draw(1, 1)
    assert second != first
    draw.record(1, [GroupOutcome(task_id=second[0], rewards=[1.0, 0.0, 1.0, 1.0, None, 0.0])])
    assert draw.seen[second[0]] == [1.0, 0.0, 1.0, 1.0, 0.0]  # an infra error is no outcome
    # the mixed start ranks above the untried ones, until a uniform group rotates it out
    assert [draw.draw(step, 1) for step in (2, 3, 4)] == [second] * 3
    draw.record(4, [GroupOutcome(task_id=second[0], rewards=[1.0] * 6)])
    assert draw.draw(5, 1) not in (first, second)
    uniform = TaskDraw(ids, seed=0)  # favour_mixed off: what was seen does not change a draw
    uniform.record(0, [GroupOutcome(task_id="start-3", rewards=[1.0, 0.0])])
    assert uniform.draw(1, 3) == random.Random("0:1").sample(ids, 3)


def test_probe_files_round_trip_and_a_corrupt_line_is_named(tmp_path):
    path = tmp_path / "start_probe.jsonl"
    assert read_probe(path) == []
    write_probe(path, polarized_pool())
    assert read_probe(path) == polarized_pool()
    path.write_text(path.read_text().replace('"rewards":[0.0,0.0]', '"rewards":"x"', 1))
    with pytest.raises(ValueError, match=r"start_probe\.jsonl:1: not a probe result"):
        read_probe(path)


def test_a_probe_of_one_sample_is_refused():
    with pytest.raises(ValidationError, match="1 sample cannot tell a settled start"):
        DemonstrationStarts(probe_samples=1)
    assert DemonstrationStarts(probe_samples=0).probe_samples == 0


@pytest.mark.slow
def test_the_trainer_probes_every_start_resumes_a_probe_and_draws_the_mixed_one(
    tmp_path, tiny_task_file, monkeypatch
):
    # the tiny model fixes nothing: set each rollout's reward as it comes back (the
    # demonstrator's runs keep theirs, 1): tiny-calc-2's pass every other time, the other never
    monkeypatch.setattr(Trajectory, "reward", property(lambda t: t.__dict__.get("test_reward", 1)))
    rolled: list[list[str]] = []
    original = GRPOTrainer.rollouts

    def recorded(self, task_ids, step, **kwargs):
        rolled.append(task_ids)
        runs = original(self, task_ids, step, **kwargs)
        for index, run in enumerate(runs):
            mixed = run.header.instance_id == "tiny-calc-2"
            run.__dict__["test_reward"] = float(mixed and index % 2 == 0)
        return runs

    monkeypatch.setattr(GRPOTrainer, "rollouts", recorded)
    model, tokenizer = tiny_model_and_tokenizer()
    config = GRPOConfig(
        output_dir=tmp_path / "run",
        env={"task_source": str(tiny_task_file), "split": None},
        forced_compaction_threshold=3000,
        steps=1,
        tasks_per_step=1,
        rollouts_per_task=2,
        rollout_max_tokens=4096,
        max_new_tokens=6,
        progress=False,
        demonstration=DemonstrationStarts(steps_left=[3], max_policy_steps=1, probe_samples=2),
    )
    (metrics,) = GRPOTrainer(config, model, tokenizer).train()
    path = config.output_dir / PROBE_FILE
    probe = {result.start_id: result for result in read_probe(path)}
    assert {k: sorted(r.rewards) for k, r in probe.items()} == {
        "tiny-calc-1@-3": [0.0, 0.0],
        "tiny-calc-2@-3": [0.0, 1.0],
    }
    assert all(result.wall_s > 0 for result in probe.values())
    assert [g.task_id for g in metrics.groups] == ["tiny-calc-2@-3"]  # the mixed one
    assert rolled[-1] == ["tiny-calc-2@-3"] * 2 and len(rolled) == 3
    # an interrupted probe: the rerun probes only the start missing from the file
    kept, _ = path.read_text().splitlines(keepends=True)
    path.write_text(kept)
    rolled.clear()
    assert GRPOTrainer(config, model, tokenizer).train() == []  # step 1 is done: no new step
    assert rolled == [["tiny-calc-2@-3"] * 2]
    again = {result.start_id: result for result in read_probe(path)}
    assert again["tiny-calc-1@-3"] == probe["tiny-calc-1@-3"] and set(again) == set(probe)
