"""Play AutoCompact episodes through verifiers' own rollout code (``Env.run_episode``, the path
prime-rl's orchestrator takes): the hub package's ``load_environment``, a model behind an
OpenAI-compatible server, and every model call relayed by verifiers' interception server.
Prints each compaction and each branch of the trace (one per compaction segment: what
prime-rl trains as separate samples, all with the trace's reward).

    .venv/bin/python examples/verifiers_episode.py                  # SmolLM2 on llama.cpp's server
    .venv/bin/python examples/verifiers_episode.py --base-url http://127.0.0.1:8000/v1 --model NAME

Without ``--base-url`` it serves the SmolLM2 GGUF with llama-cpp-python's server
(``bash scripts/llamacpp.sh install``). Needs the verifiers extra and the hub package
(docs/verifiers.md); from a clone the package is found in ``environments/autocompact_swe``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HUB_PACKAGE = Path(__file__).resolve().parents[1] / "environments" / "autocompact_swe"
if HUB_PACKAGE.is_dir():
    sys.path.insert(0, str(HUB_PACKAGE))

from autocompact_swe import load_environment  # noqa: E402
from verifiers.v1 import EvalClientConfig, ModelContext  # noqa: E402


def print_compaction(compaction: dict[str, Any]) -> None:
    print(
        f"  compaction at step {compaction['step']} ({compaction['trigger']}, summary by "
        f"{compaction['summarizer']}): context {compaction['tokens_before']} -> "
        f"{compaction['tokens_after']} tokens; the summary:"
    )
    for line in compaction["summary"].splitlines()[:6]:
        print(f"  | {line[:100]}")


def print_trace(trace: Any) -> None:
    record = trace.info["autocompact"]
    print(
        f"=== {record['instance_id']}: reward {trace.reward} (env: {record['reward']}), "
        f"{record['exit_reason']}, {len(record['compactions'])} compaction(s), "
        f"{trace.num_branches} branch(es)"
    )
    for compaction in record["compactions"]:
        print_compaction(compaction)
    for branch in trace.branches:
        roles = " ".join(m.role[0] for m in branch.messages)
        sampled = sum(node.sampled for node in branch.nodes)
        print(
            f"  branch {branch.index}: {len(branch.messages)} messages [{roles}], {sampled} sampled"
        )


@contextlib.contextmanager
def model_server(base_url: str | None) -> Iterator[str]:
    if base_url is not None:
        yield base_url
        return
    from ac_train.models.checkpoints import smollm2_gguf_path
    from ac_train.models.llamacpp import llamacpp_server

    with llamacpp_server([(smollm2_gguf_path(), "smollm2")]) as url:
        yield url


async def play(args: argparse.Namespace, url: str) -> None:
    env_settings: dict[str, Any] = {"split": args.split, "max_steps": args.max_steps}
    if args.forced_compaction_threshold > 0:
        env_settings["forced_compaction_threshold"] = args.forced_compaction_threshold
    env = load_environment(env=env_settings, seeds=args.seeds, max_tokens=args.max_tokens)
    client = EvalClientConfig(base_url=url, api_key_var=args.api_key_var)
    context = ModelContext(model=args.model, client=client)
    started = time.perf_counter()
    for task in env.taskset:
        episode = await env.run_episode(task, context)
        if episode.errors:
            raise SystemExit(f"episode failed: {episode.errors}")
        for trace in episode.traces:
            print_trace(trace)
    minutes = (time.perf_counter() - started) / 60
    print(
        f"{len(args.seeds)} episode(s) in {minutes * 60:.1f} s: {len(args.seeds) / minutes:.2f}/min"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server (.../v1)")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--api-key-var", default="OPENAI_API_KEY", help="its key's variable")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one episode each")
    parser.add_argument("--split", default="easy")
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=96, help="per model call")
    parser.add_argument(
        "--forced-compaction-threshold",
        type=int,
        default=900,
        help="context tokens past which the env asks for a summary (default low enough to "
        "compact within the first turns; 0: the env's default)",
    )
    args = parser.parse_args()
    with model_server(args.base_url) as url:
        asyncio.run(play(args, url))


if __name__ == "__main__":
    main()
