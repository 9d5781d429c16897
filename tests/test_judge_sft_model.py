"""The real model learns from judge corrections: SFT on corrected segments of one task lowers
SmolLM2's loss on the corrected segments of a *different* task (held out)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from sandbox_task import diff_after, git

from ac_env.compaction.texts import COMPACTION_REQUEST
from ac_env.policy import PolicyOutput
from ac_env.tasks.model import GroundTruth, Task
from ac_train.collect import CollectConfig, collect
from ac_train.segments import TokenKind, read_segments

SHORT_PROMPT = (
    "Fix the bug. Each turn, reply with exactly one ```bash block, or with a working-state "
    "summary that starts with '# Auto Context Summary' (sections Known, Workspace, Next)."
)
EARLY_SUMMARY = "# Auto Context Summary\n## Known\nnothing\n## Workspace\nnone\n## Next\nlook\n"


def make_repo_task(root: Path, instance_id: str, module: str, source: str, fixed: str) -> Task:
    """A one-function package with a bug, its failing test and a passing one."""
    repo = root / instance_id
    (repo / module).mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / module / "__init__.py").write_text("")
    (repo / module / "core.py").write_text(source)
    tests = (
        f"from {module}.core import main, other\n\n\ndef test_main():\n"
        "    assert main(2) == 4\n\n\ndef test_other():\n    assert other() == 1\n"
    )
    (repo / "tests" / "test_core.py").write_text(tests)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return Task(
        instance_id=instance_id,
        repo=f"local/{module}",
        problem_statement=f"main(2) in {module} does not return 4",
        patch=diff_after(repo, {f"{module}/core.py": fixed}),
        test_patch="",
        FAIL_TO_PASS=["tests/test_core.py::test_main"],
        PASS_TO_PASS=["tests/test_core.py::test_other"],
        snapshot_dir=repo,
        test_files=["tests/test_core.py"],
        ground_truth=GroundTruth(files=[f"{module}/core.py"], functions=[f"{module}.core:main"]),
    )


class Sloppy:
    """Compacts before looking, answers a compaction request with a command, else reads."""

    def __init__(self, module: str) -> None:
        self.reads = [f"cat {module}/core.py", "ls tests", "cat tests/test_core.py", "ls"]

    def act(self, observation):
        if len(observation) == 2:
            return PolicyOutput(text=EARLY_SUMMARY)
        if observation[-1]["content"] == COMPACTION_REQUEST:
            return PolicyOutput(text="```bash\nls\n```")
        turn = (len(observation) - 3) // 2
        return PolicyOutput(text=f"```bash\n{self.reads[turn % len(self.reads)]}\n```")


def corrected_segments(task: Task, root: Path):
    path = root / f"{task.instance_id}.jsonl"
    path.write_text(json.dumps(task.model_dump(mode="json")) + "\n")
    config = CollectConfig(
        task_source=str(path),
        split=None,
        worker="reference",
        rollouts_per_task=1,
        max_steps=6,
        fallback_threshold=500,
        env_options={"system_prompt": SHORT_PROMPT},
        tokenizer="smollm2",
    )
    out = root / "runs" / task.instance_id
    summary = collect(config, out, policy=Sloppy(task.repo.split("/")[1]))
    assert summary.corrections["trigger"] >= 1 and summary.corrections["working_state"] >= 1
    segments = read_segments(out / "dataset" / "segments.jsonl")
    assert any(TokenKind.JUDGE_OUTPUT in s.token_kinds for s in segments)
    return segments


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(900)  # two collections, two SFT steps and three loads: 200-330 s on 2 cores
def test_sft_on_corrections_lowers_the_loss_on_a_held_out_task(tmp_path):
    from ac_train.models.checkpoints import load_model
    from ac_train.sft import SFTRunConfig, run_sft, trained_token_loss

    torch.set_num_threads(1)
    train = make_repo_task(
        tmp_path,
        "square-1",
        "square",
        "def main(x):\n    return x + x + 1\n\n\ndef other():\n    return 1\n",
        "def main(x):\n    return x + x\n\n\ndef other():\n    return 1\n",
    )
    held_out = make_repo_task(
        tmp_path,
        "power-1",
        "power",
        "def main(x):\n    return x ** 3\n\n\ndef other():\n    return 1\n",
        "def main(x):\n    return x ** 2\n\n\ndef other():\n    return 1\n",
    )
    train_segments = corrected_segments(train, tmp_path)
    held_out_segments = corrected_segments(held_out, tmp_path)
    assert max(len(s.input_ids) for s in train_segments + held_out_segments) < 1500

    model, _ = load_model("smollm2")
    before = trained_token_loss(model, held_out_segments, train_format_errors=False)
    metrics = run_sft(
        SFTRunConfig(
            model="smollm2",
            output_dir=tmp_path / "sft",
            learning_rate=1e-4,
            max_steps=2,
            batch_size=len(train_segments),
            micro_batch_size=1,
            train_format_errors=False,
            progress=False,
        ),
        train_segments,
    )
    trained, _ = load_model(str(metrics.final_model_dir))
    after = trained_token_loss(trained, held_out_segments, train_format_errors=False)
    assert after < before * 0.9, (before, after)
