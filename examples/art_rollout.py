"""AutoCompact episodes as ART trajectories (``ac_train.integrations.art_rollout``): each
episode one ``art.Trajectory``, its last segment the main history and the earlier ones in
``additional_histories``, then ART's own training tokenization of the group
(``tokenize_trajectory_groups``): one training sequence per segment, each with its episode's
advantage.

    bash scripts/extra_env.sh art
    .venv-art/bin/python examples/art_rollout.py [--seed 0]
    .venv-art/bin/python examples/art_rollout.py --base-url http://127.0.0.1:8080/v1 \
        --model smollm2 --max-tokens 96 --max-steps 6 --forced-compaction-threshold 1500

By default the model-free reference agent (which compacts once the bug is located) answers
through ``PolicyClient``, an OpenAI-compatible client that names its tokens as ART's vLLM
server does; a second episode, by a policy that summarizes and submits without fixing, makes
the group's rewards differ. ``--base-url``: the first episode asks that server instead, through
an ``art.Model``'s own client (ART's server, or any OpenAI-compatible one for a look at the
trajectory; ART trains only on a server that names its tokens, see docs/art.md).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

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


async def episodes(args: argparse.Namespace, tokenizer: object) -> list[Any]:
    import art

    from ac_train.integrations.art_rollout import AutoCompactScenario, PolicyClient, play, rollout

    env = {"task_source": "builtin", "split": "easy", "max_steps": args.max_steps}
    if args.forced_compaction_threshold is not None:
        env["forced_compaction_threshold"] = args.forced_compaction_threshold
    scenario = AutoCompactScenario(env=env, seed=args.seed, max_tokens=args.max_tokens)
    if args.base_url:
        model = art.Model(
            name=args.model,
            project="autocompact",
            inference_base_url=args.base_url,
            inference_api_key=args.api_key,
        )
        first = await rollout(model, scenario)
    else:
        reference = PolicyClient(ReferenceAgent(compact_when="after_locate"), tokenizer)
        first = (await play(reference, "reference", scenario)).art_trajectory()
    second = (await play(PolicyClient(GivesUp(), tokenizer), "gives-up", scenario)).art_trajectory()
    return [first, second]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="seeds the task draw")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server's /v1 URL")
    parser.add_argument("--model", default="smollm2", help="the served model's name")
    parser.add_argument("--api-key", default="none")
    parser.add_argument("--max-tokens", type=int, default=512, help="output tokens per turn")
    parser.add_argument("--max-steps", type=int, default=50, help="env setting")
    parser.add_argument("--forced-compaction-threshold", type=int, default=None, help="env setting")
    args = parser.parse_args()
    # ART is imported once the arguments are parsed (it lives in .venv-art)
    import art
    from art.preprocessing.tokenize import tokenize_trajectory_groups

    from ac_train.models.checkpoints import load_tokenizer

    tokenizer = load_tokenizer()
    group = asyncio.run(episodes(args, tokenizer))
    for index, trajectory in enumerate(group):
        print(
            f"trajectory {index}: reward {trajectory.reward}, {trajectory.metrics['steps']} turns, "
            f"{trajectory.metrics['compactions']} compaction(s), "
            f"{len(trajectory.additional_histories)} additional histories"
        )
        for history in [*trajectory.additional_histories, trajectory]:
            summary = next(
                (
                    m["content"]
                    for m in history.messages_and_choices
                    if isinstance(m, dict) and m["content"].startswith("# Auto Context Summary")
                ),
                None,
            )
            if summary:
                print("  a history that opens with the summary:")
                for line in summary.splitlines()[:6]:
                    print(f"  | {line[:100]}")
    results = tokenize_trajectory_groups(
        tokenizer,  # type: ignore[arg-type]
        [art.TrajectoryGroup(group)],
        allow_training_without_logprobs=False,
        scale_rewards=True,
        shuffle_group_trajectories=False,
    )
    print("ART's training sequences (one per history, each with its trajectory's advantage):")
    for result in results:
        print(
            f"  trajectory {group.index(result.trajectory)}: {len(result.token_ids)} tokens, "
            f"{sum(result.assistant_mask)} trained, advantage {result.advantage:+.3f}"
        )


if __name__ == "__main__":
    main()
