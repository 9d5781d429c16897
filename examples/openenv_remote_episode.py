"""Run episodes of AutoCompact-SWE-v0 on an ``ac-env serve`` server through OpenEnv's client,
with the model-free reference agent standing in for a model.

    ac-env serve --port 8000 &          # needs the openenv extra; see docs/openenv.md
    .venv/bin/python examples/openenv_remote_episode.py --url http://127.0.0.1:8000 --seeds 1 2
"""

from __future__ import annotations

import argparse
from typing import Any

from ac_env.agents import ReferenceAgent
from ac_env.integrations.openenv_client import AutoCompactEnvClient


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
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the server")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one episode each")
    parser.add_argument(
        "--compact-when",
        default="after_locate",
        help="when the reference agent compacts: its phase rule after_locate (default), "
        "never, or a timing rule",
    )
    args = parser.parse_args()
    with AutoCompactEnvClient(base_url=args.url, message_timeout_s=600).sync() as env:
        for seed in args.seeds:
            agent = ReferenceAgent(compact_when=args.compact_when)
            result = env.reset(seed=seed)
            print(f"=== {result.observation.info['instance_id']} (seed {seed})")
            while not result.done:
                result = env.step(agent.act(result.observation.chat()).text)
                info = result.observation.info
                rewrite = " (context rewritten)" if info["prefix_rewritten"] else ""
                print(
                    f"step {info['step']:>2}  ctx {info['context_tokens']:>6} tok  "
                    f"${info['cost']['total']['usd']:.4f}{rewrite}"
                )
                if info.get("compaction"):
                    print_compaction(info["compaction"])
            print(f"--> {info['exit_reason']}: reward {result.reward}")


if __name__ == "__main__":
    main()
