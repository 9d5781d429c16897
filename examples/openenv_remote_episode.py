"""Run episodes of AutoCompact-SWE-v0 on an ``ac-env serve`` server through OpenEnv's client,
with the model-free reference agent standing in for a model.

    ac-env serve --port 8000 &          # needs the openenv extra; see docs/openenv.md
    .venv/bin/python examples/openenv_remote_episode.py --url http://127.0.0.1:8000 --seeds 1 2
"""

from __future__ import annotations

import argparse

from ac_env.agents import ReferenceAgent
from ac_env.integrations.openenv_client import AutoCompactEnvClient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the server")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one episode each")
    args = parser.parse_args()
    with AutoCompactEnvClient(base_url=args.url, message_timeout_s=600).sync() as env:
        for seed in args.seeds:
            agent = ReferenceAgent()
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
            print(f"--> {info['exit_reason']}: reward {result.reward}")


if __name__ == "__main__":
    main()
