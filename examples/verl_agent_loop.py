"""AutoCompact episodes through verl's agent loop (``ac_train.integrations.verl_agent_loop``),
on a CPU: the loop built from verl's registry as verl's AgentLoopWorker builds it, its rollout
server answered by the model-free reference agent (which compacts once the bug is located), one
verl output per segment, and verl's multi-output GRPO giving every segment its episode's
advantage. A second episode of the same task, by a policy that summarizes and submits without
fixing, makes the group's rewards differ.

    bash scripts/extra_env.sh verl
    .venv-verl/bin/python examples/verl_agent_loop.py [--seed 0]

Training itself (verl's FSDP or Megatron actor, a vLLM or SGLang rollout server) needs GPUs:
docs/verl.md gives the configuration.
"""

from __future__ import annotations

import argparse
import asyncio

from ac_env.agents import ReferenceAgent
from ac_env.policy import PolicyOutput

GIVE_UP = [
    "THOUGHT: look around\n```bash\nls\n```",
    "# Auto Context Summary\n## Known\nnothing yet\n## Workspace\nclean\n## Next\nsubmit",
    "THOUGHT: done\n```bash\nsubmit\n```",
]


class GivesUp:
    """Looks, summarizes, submits without a fix: the group's unsolved rollout."""

    def __init__(self) -> None:
        self.actions = list(GIVE_UP)

    def act(self, observation: object) -> PolicyOutput:
        return PolicyOutput(text=self.actions.pop(0) if self.actions else GIVE_UP[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="seeds the task draw")
    args = parser.parse_args()
    # verl is imported once the arguments are parsed (it lives in .venv-verl)
    import numpy as np
    import torch
    from verl.protocol import DataProto
    from verl.trainer.ppo.core_algos import AdvantageEstimator
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    from ac_train.integrations.verl_agent_loop import EpisodeChoice, local_agent_loop
    from ac_train.models.checkpoints import load_tokenizer

    tokenizer = load_tokenizer()
    env = {"task_source": "builtin", "split": "easy"}
    choice = EpisodeChoice(seed=args.seed)

    keys, rows = [], []
    for session, policy in enumerate([ReferenceAgent(compact_when="after_locate"), GivesUp()]):
        loop = local_agent_loop(policy, tokenizer, env)  # type: ignore[arg-type]
        trajectory = asyncio.run(loop.play(choice, {"temperature": 1.0}))
        outputs = loop.outputs(trajectory)
        print(
            f"session {session} ({type(policy).__name__}): {trajectory.header.instance_id}, "
            f"{len(trajectory.model_calls())} turns, reward {trajectory.reward}"
        )
        for event in trajectory.compactions():
            print(
                f"  compaction at step {event.step} ({event.trigger}, summary by "
                f"{event.summarizer}): context {event.tokens_before} -> {event.tokens_after} "
                "tokens; the summary:"
            )
            for line in event.summary.splitlines()[:6]:
                print(f"  | {line[:100]}")
        for index, output in enumerate(outputs):
            print(
                f"  output {index}: {len(output.prompt_ids)} prompt + "
                f"{len(output.response_ids)} response tokens, {sum(output.response_mask)} "
                f"trained, reward_score {output.reward_score}"
            )
            rows.append(output.as_dict())
            keys.append(f"task_{session}_{index}")

    width = max(len(row["responses"]) for row in rows)

    def padded(name: str) -> torch.Tensor:
        return torch.stack(
            [torch.nn.functional.pad(row[name], (0, width - len(row[name]))) for row in rows]
        )

    data = DataProto.from_dict(
        tensors={
            "token_level_rewards": padded("rm_scores"),
            "response_mask": padded("response_mask"),
        },
        non_tensors={"uid": np.array(["task"] * len(rows), dtype=object)},
    )
    data = compute_advantage_for_multi_trajectories(data, keys, AdvantageEstimator.GRPO)
    print("verl's multi-output GRPO (one advantage per session, on every one of its outputs):")
    for key, advantages, mask in zip(
        keys, data.batch["advantages"], data.batch["response_mask"].bool(), strict=True
    ):
        print(f"  {key}: advantage {advantages[mask].unique().tolist()}")


if __name__ == "__main__":
    main()
