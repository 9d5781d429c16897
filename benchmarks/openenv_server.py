"""``ac-env serve``: what the OpenEnv server adds to a step, and how many concurrent episodes a
server on 2 cores holds.

1. **Per-step overhead**: the same seed and actions in-process (``env.step``) and through the
   server (OpenEnv's client over a localhost WebSocket); the overhead of step i is its round
   trip minus the in-process step i. The actions are format errors (pure env work, no
   sandbox), so the figure is the server's: JSON of the whole context each step, the socket,
   OpenEnv's session executor. Measured on a fresh context and on one grown to
   ``--context-tokens`` (the observation carries the whole context). Target: median < 5 ms.
2. **Concurrency**: K clients at once, each running scripted episodes of the built-in easy
   split (a few commands, the gold patch, submit: real sandboxes and grading), with
   ``--think-s`` of "generation" between steps as a model would take. Per K: episodes a
   minute, step latency (median, p95) and reset latency. The server is pinned to
   ``--server-cpus`` cores (default 2); it holds K episodes while step latency stays near
   K=1's.

    .venv/bin/python benchmarks/openenv_server.py             # full (about 10 minutes)
    .venv/bin/python benchmarks/openenv_server.py --reduced   # a quick check that it works
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import requests

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.oracle import GoldPatchPolicy
from ac_env.integrations.openenv_client import AutoCompactEnvClient

ROOT = Path(__file__).resolve().parents[1]
# No forced compaction and no step limit within reach: the context only grows.
ENV = {"max_steps": 100_000, "forced_compaction_threshold": 9_000_000, "context_window": 10**7}
ENV_FLAGS = [f"--{key.replace('_', '-')}={value}" for key, value in ENV.items()]
FORMAT_ERROR = "I will look around first."  # no bash block: a format-error observation


def bash(command: str) -> str:
    return f"THOUGHT: next\n```bash\n{command}\n```"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    sandboxes: str  # the server's TMPDIR, removed by ``stop``


def start_server(max_episodes: int, cpus: int, flags: list[str]) -> Server:
    """A server on ``cpus`` cores, with its sandboxes in a fresh directory."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chosen = sorted(os.sched_getaffinity(0))[:cpus]
    sandboxes = tempfile.mkdtemp(prefix="autocompact-openenv-bench-")
    os.chmod(sandboxes, 0o755)  # commands run as nobody when the host is root
    command = [sys.executable, "-m", "ac_env.cli", "serve", "--port", str(port)]
    command += ["--max-episodes", str(max_episodes), *flags]
    process = subprocess.Popen(
        command,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": sandboxes},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.sched_setaffinity(0, chosen),
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if requests.get(f"{url}/health", timeout=2).ok:
                return Server(process, url, sandboxes)
        except requests.ConnectionError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the server did not start")


def stop(server: Server) -> None:
    server.process.send_signal(signal.SIGINT)
    server.process.wait(timeout=60)
    shutil.rmtree(server.sandboxes, ignore_errors=True)


def grow(step, context_tokens: int) -> None:
    """Grow the context to about ``context_tokens`` with command output."""
    tokens = 0
    while tokens < context_tokens:
        lines = max(1, min(200_000, (context_tokens - tokens) // 3))
        tokens = step(bash(f"seq 1 {lines}"))


def overhead(url: str, steps: int, context_tokens: int) -> None:
    env = gym.make("AutoCompact-SWE-v0", **ENV)
    env.reset(seed=0)
    grow(lambda action: env.step(action)[4]["context_tokens"], context_tokens)
    local = []
    for _ in range(steps):
        started = time.perf_counter()
        *_, info = env.step(FORMAT_ERROR)
        local.append(time.perf_counter() - started)
    env.close()
    with AutoCompactEnvClient(base_url=url, message_timeout_s=300).sync() as remote:
        remote.reset(seed=0)
        grow(lambda action: remote.step(action).observation.info["context_tokens"], context_tokens)
        trips = []
        for _ in range(steps):
            started = time.perf_counter()
            result = remote.step(FORMAT_ERROR)
            trips.append(time.perf_counter() - started)
    assert result.observation.info["context_tokens"] == info["context_tokens"]
    extra = [(trip - own) * 1e3 for trip, own in zip(trips, local, strict=True)]
    print(
        f"  context {info['context_tokens']:>7} tokens: in-process step median "
        f"{statistics.median(local) * 1e3:6.2f} ms; server overhead median "
        f"{statistics.median(extra):6.2f} ms, p95 {percentile(extra, 0.95):6.2f} ms "
        f"({steps} steps; target median < 5 ms)"
    )


def scripted_actions(seeds: list[int]) -> dict[int, list[str]]:
    env = gym.make("AutoCompact-SWE-v0")
    scripts = {}
    for seed in seeds:
        env.reset(seed=seed)
        gold = GoldPatchPolicy(env.unwrapped.task).act(()).text
        looks = [bash("ls"), bash("grep -rn 'def ' . | head -20"), bash("git status --short")]
        scripts[seed] = [*looks, gold, bash("submit")]
    env.close()
    return scripts


def concurrency(url: str, clients: int, episodes: int, think_s: float) -> None:
    scripts = scripted_actions(list(range(clients * episodes)))
    steps: list[float] = []
    resets: list[float] = []
    rewards: list[float | None] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        with AutoCompactEnvClient(base_url=url, message_timeout_s=600).sync() as env:
            for episode in range(episodes):
                seed = index * episodes + episode
                started = time.perf_counter()
                env.reset(seed=seed)
                mine = [time.perf_counter() - started]
                times = []
                for action in scripts[seed]:
                    time.sleep(think_s)
                    started = time.perf_counter()
                    result = env.step(action)
                    times.append(time.perf_counter() - started)
                with lock:
                    resets.extend(mine)
                    steps.extend(times[:-1])  # the last step grades: counted apart
                    rewards.append(result.reward)

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    minutes = (time.perf_counter() - started) / 60
    solved = sum(reward == 1.0 for reward in rewards)
    print(
        f"  K={clients:>3}: {len(rewards) / minutes:6.1f} episodes/min ({solved}/{len(rewards)} "
        f"solved); step median {statistics.median(steps) * 1e3:7.1f} ms, p95 "
        f"{percentile(steps, 0.95) * 1e3:7.1f} ms; reset median "
        f"{statistics.median(resets) * 1e3:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reduced", action="store_true", help="few steps, K=1,2, one episode")
    parser.add_argument("--steps", type=int, default=200, help="steps per overhead figure")
    parser.add_argument("--context-tokens", type=int, nargs="+", default=[0, 32_000])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--episodes", type=int, default=3, help="episodes per client")
    parser.add_argument("--think-s", type=float, default=1.0, help="generation time per step")
    parser.add_argument("--server-cpus", type=int, default=2, help="cores the server may use")
    parser.add_argument("--compress", action="store_true", help="serve with --compress")
    args = parser.parse_args()
    if args.reduced:
        args.steps, args.context_tokens, args.clients, args.episodes = 20, [0], [1, 2], 1
        args.think_s = 0.2
    print(f"cores here: {os.cpu_count()}; server pinned to {args.server_cpus}")
    compress = ["--compress"] if args.compress else []
    server = start_server(1, args.server_cpus, [*ENV_FLAGS, *compress])
    try:
        print("per-step overhead of the server over in-process env.step:")
        for tokens in args.context_tokens:
            overhead(server.url, args.steps, tokens)
    finally:
        stop(server)
    server = start_server(max(args.clients), args.server_cpus, compress)
    try:
        print(f"concurrent episodes (think {args.think_s} s per step, {args.episodes} per client):")
        for clients in args.clients:
            concurrency(server.url, clients, args.episodes, args.think_s)
    finally:
        stop(server)


if __name__ == "__main__":
    main()
