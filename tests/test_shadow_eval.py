"""Held-out figures of a shadow-judged collection: pooled ratios with task-bootstrap intervals,
paired differences, and the summary audits and re-reads that collection records."""

from __future__ import annotations

import math

from ac_env.policy import PolicyOutput
from ac_train.collect import CollectConfig, collect, read_episodes
from ac_train.shadow_eval import ShadowEvaluation, evaluate, paired_difference, per_task, ratio

RUN = "```bash\npython3 -m pytest -q\n```"
READ = "```bash\ncat calc/ops.py\n```"
SUMMARY = """# Auto Context Summary
## Task
fix add in calc/ops.py
## Known
add subtracts: `a - b` in calc/ops.py
## Workspace
no changes yet
## Next
edit calc/ops.py: replace `a - b` with `a + b`
"""
VAGUE = """# Auto Context Summary
## Task
make the failing test pass
## Known
a bug somewhere
## Workspace
no changes yet
## Next
hmm
"""


class Scripted:
    """A policy that answers with ``outputs`` in order (then submits)."""

    def __init__(self, *outputs: str) -> None:
        self.outputs = list(outputs)

    def act(self, observation):
        return PolicyOutput(text=self.outputs.pop(0) if self.outputs else "```bash\nsubmit\n```")


def test_ratio_pools_counts_over_tasks_and_brackets_its_value():
    estimate = ratio({"a": (1, 2), "b": (3, 4), "c": (0, 0), "d": (0, 4)})
    assert estimate.value == 0.4 and (estimate.numerator, estimate.denominator) == (4, 10)
    assert estimate.tasks == 3  # "c" counted nothing
    assert 0.0 <= estimate.low < estimate.value < estimate.high <= 0.75
    nothing = ratio({"a": (0, 0)})
    assert nothing.value is None and nothing.low is None


def test_paired_difference_resamples_the_same_tasks_for_both():
    tasks = [f"t{i}" for i in range(10)]
    reference = {t: (float(i % 2), 1.0) for i, t in enumerate(tasks)}  # half solved
    better = {t: (1.0, 1.0) for t in tasks}
    difference = paired_difference(better, reference)
    assert difference.value == 0.5 and difference.tasks == 10
    assert 0.1 < difference.low <= 0.5 <= difference.high <= 0.9
    same = paired_difference(reference, reference)
    assert same.value == same.low == same.high == 0.0  # paired: no spread at all
    unpaired = ratio(reference)
    assert unpaired.high - unpaired.low > 0.3
    assert paired_difference(better, {"t0": (0.0, 0.0)}).value is None


def test_a_shadow_collection_audits_summaries_and_counts_rereads(tiny_task_file, tmp_path):
    def run(name, *outputs):
        config = CollectConfig(
            task_source=str(tiny_task_file),
            split=None,
            task_ids=["tiny-calc-1"],
            worker="reference",
            judge_mode="shadow",
            rollouts_per_task=1,
            max_steps=8,
        )
        collect(config, tmp_path / name, policy=Scripted(*outputs), progress=False)
        return read_episodes(tmp_path / name)

    # reads the bug, writes a summary that keeps it, then reads the same file again
    good = run("good", RUN, READ, SUMMARY, READ, "oops", "no action")
    (episode,) = good
    assert [a.missed_key_state for a in episode.audits] == [False]
    assert [a.missed_next_step for a in episode.audits] == [False]
    assert [c.rereads for c in episode.continuations] == [1]
    figures = evaluate(good).figures
    assert figures["rereads_per_compaction"].value == 1.0
    assert figures["valid_action"].numerator == 5 and figures["valid_action"].denominator == 7
    assert figures["success"].value == 0.0  # submitted without a fix
    assert figures["proactive_per_episode"].value == 1.0

    # the same start, but a summary that drops the bug's file and has no next step
    vague = run("vague", RUN, READ, VAGUE, RUN)
    assert [(a.missed_key_state, a.missed_next_step) for a in vague[0].audits] == [(True, True)]
    assert evaluate(vague).figures["rereads_per_compaction"].value == 0.0
    difference = paired_difference(
        per_task(vague, "missed_key_state"), per_task(good, "missed_key_state")
    )
    assert difference.value == 1.0
    assert not math.isnan(difference.low)


def test_the_cli_writes_the_figures_of_a_shadow_collection(tiny_task_file, tmp_path, capsys):
    from ac_train.cli import main

    out = tmp_path / "eval"
    argv = ["collect", "--out", str(out), "--source", str(tiny_task_file), "--split", "all"]
    argv += ["--worker", "reference", "--rollouts-per-task", "1", "--shadow"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "held-out figures, 95% intervals over 2 tasks:" in printed
    evaluation = ShadowEvaluation.model_validate_json((out / "evaluation.json").read_text())
    assert evaluation.figures["success"].value == 1.0  # the reference agent fixes both
    assert "  success: 1.00 [1.00, 1.00] (2/2, 2 tasks)" in printed
