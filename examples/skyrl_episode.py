"""Run AutoCompact episodes through skyrl_gym's API the way a SkyRL generator does (make from
the registry, ``init``, then ``step`` per turn), keeping the chat by the adapter's rule
``chat[: metadata["keep"]] + observations``; the model-free reference agent stands in for a
model.

    .venv/bin/python examples/skyrl_episode.py --seeds 0 1     # needs the skyrl extra
"""

from __future__ import annotations

import argparse
from typing import Any

import skyrl_gym

from ac_env.agents import ReferenceAgent
from ac_env.integrations.skyrl import ENV_CLASS, register


def print_compaction(compaction: dict[str, Any]) -> None:
    """What a compaction did: who wrote the summary, the context before and after, the summary."""
    print(
        f"  compaction ({compaction['kind']}, summary by {compaction['summarizer']}): context "
        f"{compaction['tokens_before']} -> {compaction['tokens_after']} tokens; the summary:"
    )
    for line in (compaction.get("summary") or "").splitlines()[:8]:
        print(f"  | {line[:100]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one episode each")
    parser.add_argument(
        "--compact-when",
        default="after_locate",
        help="when the reference agent compacts: its phase rule after_locate (default), "
        "never, or a timing rule",
    )
    parser.add_argument("--forced-compaction-threshold", type=int, default=None, help="env setting")
    args = parser.parse_args()
    register()
    env_config = {}
    if args.forced_compaction_threshold is not None:
        env_config["forced_compaction_threshold"] = args.forced_compaction_threshold
    for seed in args.seeds:
        env = skyrl_gym.make(ENV_CLASS, env_config=env_config, extras={"seed": seed})
        try:
            chat, meta = env.init([])
            agent = ReferenceAgent(compact_when=args.compact_when)
            print(f"=== {meta['info']['instance_id']} (seed {seed})")
            done = False
            while not done:
                text = agent.act(tuple(chat)).text
                chat.append({"role": "assistant", "content": text})
                output = env.step(text)
                chat = chat[: output["metadata"]["keep"]] + output["observations"]
                done = output["done"]
                info = output["metadata"]["info"]
                rewrite = " (context rewritten)" if output["metadata"]["prefix_rewritten"] else ""
                print(
                    f"step {info['step']:>2}  ctx {info['context_tokens']:>6} tok  "
                    f"{len(chat):>3} msgs  ${info['cost']['total']['usd']:.4f}{rewrite}"
                )
                if info.get("compaction"):
                    print_compaction(info["compaction"])
            print(f"--> {info['exit_reason']}: reward {output['reward']}  {env.get_metrics()}")
        finally:
            env.close()


if __name__ == "__main__":
    main()
