"""``ac-env serve``: a real server process on localhost, driven by OpenEnv's own client
(``EnvClient`` with our models) and by raw WebSocket frames, on the built-in tasks with
scripted text actions."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import pytest
import requests  # openenv's dependency, as websockets is
from websockets.sync.client import connect

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.oracle import GoldPatchPolicy
from ac_env.integrations.openenv_client import AutoCompactEnvClient, ServerError
from ac_env.integrations.openenv_models import json_safe

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = "# Auto Context Summary\n## Known\nthe bug is in src\n## Workspace\nclean\n## Next\nfix"
SANDBOX_GLOB = "autocompact-sandbox-*"


def bash(command: str) -> str:
    return f"THOUGHT: x\n```bash\n{command}\n```"


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str
    sandboxes: Path  # the server's TMPDIR: every sandbox directory it makes is in here

    def sandbox_dirs(self) -> list[Path]:
        return sorted(self.sandboxes.glob(SANDBOX_GLOB))

    def leftovers(self) -> list[str]:
        """Sandbox directories, tmpfs mounts under them, and child processes still there."""
        mounts = [
            line.split()[1]
            for line in Path("/proc/self/mounts").read_text().splitlines()
            if str(self.sandboxes) in line
        ]
        return [str(p) for p in self.sandbox_dirs()] + mounts + _children(self.process.pid)


def _children(pid: int) -> list[str]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(f"child process {stat.parent.name}")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(root: Path, *flags: str) -> Server:
    # not under pytest's tmp_path: commands run as nobody, who cannot enter it (mode 700)
    sandboxes = Path(tempfile.mkdtemp(prefix="autocompact-openenv-test-"))
    sandboxes.chmod(0o755)
    port = _free_port()
    log = (root / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "ac_env.cli", "serve", "--port", str(port), *flags],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(sandboxes)},
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, (root / "server.log").read_text()
        try:
            if requests.get(f"{url}/health", timeout=2).ok:
                return Server(process, url, sandboxes)
        except requests.ConnectionError:
            time.sleep(0.3)
    process.kill()
    raise AssertionError("the server did not come up: " + (root / "server.log").read_text())


def stop(server: Server) -> None:
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=60)


def check_and_remove(server: Server) -> None:
    leftovers = server.leftovers()
    shutil.rmtree(server.sandboxes, ignore_errors=True)
    assert leftovers == []


def wait_until(condition, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("serve"), "--max-episodes", "2")
    yield running
    stop(running)
    check_and_remove(running)


def client(server: Server) -> AutoCompactEnvClient:
    return AutoCompactEnvClient(base_url=server.url, message_timeout_s=300)


def scripted_episode(seed: int) -> tuple[list[str], list[tuple]]:
    """Actions covering each kind of turn (a command, a format error, a compaction, the gold
    patch, submit), and what the in-process env answers to them on ``seed``."""
    env = gym.make("AutoCompact-SWE-v0")
    observation, info = env.reset(seed=seed)
    gold = GoldPatchPolicy(env.unwrapped.task).act(()).text
    actions = [bash("grep -rn 'def ' . | head -5"), "no action here", SUMMARY, gold]
    actions.append(bash("submit"))
    answers: list[tuple] = [(observation, 0.0, False, False, info)]
    answers += [env.step(action) for action in actions]
    env.close()
    return actions, answers


def without_timings(info: dict) -> dict:
    return {key: value for key, value in info.items() if key != "timings"}


def test_concurrent_clients_see_what_the_in_process_env_shows(server):
    seeds = (0, 1)
    scripts = {seed: scripted_episode(seed) for seed in seeds}
    both_reset = threading.Barrier(len(seeds), timeout=120)
    seen: dict[int, list] = {}

    def run(seed: int) -> None:
        actions, _ = scripts[seed]
        with client(server).sync() as env:
            results = [env.reset(seed=seed)]
            both_reset.wait()  # two sessions, two sandboxes, at the same time
            seen[f"sandboxes {seed}"] = len(server.sandbox_dirs())
            results += [env.step(action) for action in actions]
        seen[seed] = results

    threads = [threading.Thread(target=run, args=(seed,)) for seed in seeds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    for seed in seeds:
        assert seen[f"sandboxes {seed}"] >= len(seeds)
        _, answers = scripts[seed]
        assert len(seen[seed]) == len(answers)
        for result, (observation, reward, terminated, truncated, info) in zip(
            seen[seed], answers, strict=True
        ):
            remote = result.observation
            assert remote.chat() == tuple(observation)
            assert (result.reward, remote.terminated, remote.truncated) == (
                reward,
                terminated,
                truncated,
            )
            assert result.done == (terminated or truncated)
            assert without_timings(remote.info) == json_safe(without_timings(info))
        assert seen[seed][3].observation.info["compaction"]["summarizer"] == "policy"
        assert seen[seed][-1].reward == 1.0 and seen[seed][-1].observation.terminated
    assert wait_until(lambda: server.sandbox_dirs() == [])


def test_the_bound_refuses_a_client_past_max_episodes(server):
    first, second = client(server).sync(), client(server).sync()
    first.reset(seed=0)
    second.reset(seed=1)
    assert len(server.sandbox_dirs()) == 2
    with client(server).sync() as third, pytest.raises(ServerError) as refused:
        third.reset(seed=2)
    assert refused.value.code == "CAPACITY_REACHED" and "2/2" in str(refused.value)
    first.close()
    with client(server).sync() as third:  # the closed session's slot is free again
        assert wait_until(lambda: len(server.sandbox_dirs()) == 1)
        assert third.reset(seed=2).observation.info["step"] == 0
        assert second.step(bash("ls")).observation.messages[-1].role == "user"
    second.close()
    assert wait_until(lambda: server.sandbox_dirs() == [])


def test_a_malformed_request_is_refused_naming_the_field(server):
    ws_url = server.url.replace("http", "ws") + "/ws"
    with connect(ws_url) as raw:

        def send(frame: str) -> dict:
            raw.send(frame)
            return json.loads(raw.recv(timeout=120))

        assert send("{not json")["data"]["code"] == "INVALID_JSON"
        refused = send(json.dumps({"type": "step", "data": {"txt": "ls"}}))["data"]
        assert refused["code"] == "VALIDATION_ERROR"
        assert {tuple(error["loc"]) for error in refused["errors"]} == {("text",), ("txt",)}
        refused = send(json.dumps({"type": "reset", "data": {"seed": "zero"}}))["data"]
        assert [error["loc"] for error in refused["errors"]] == [["seed"]]
        refused = send(json.dumps({"type": "step", "data": {"text": "ls"}}))["data"]
        assert refused["code"] == "EXECUTION_ERROR" and "reset first" in refused["message"]
        # the same connection goes on serving
        assert send(json.dumps({"type": "reset", "data": {"seed": 0}}))["type"] == "observation"
        answer = send(json.dumps({"type": "step", "data": {"text": bash("ls")}}))
        assert answer["data"]["observation"]["info"]["step"] == 1
    with client(server).sync() as env:
        with pytest.raises(ServerError, match="task_idd: Extra inputs are not permitted"):
            env.reset(task_idd="x")
        with pytest.raises(ServerError, match="unknown task 'nope'"):
            env.reset(task_id="nope")
        assert env.reset(seed=0).observation.info["instance_id"]
    assert requests.get(f"{server.url}/health", timeout=10).ok


@pytest.mark.slow  # 9 s; the server's episodes are checked by the default run's other tests
def test_the_example_runs_an_episode_on_the_server(server):
    example = ROOT / "examples" / "openenv_remote_episode.py"
    run = subprocess.run(
        [sys.executable, str(example), "--url", server.url, "--seeds", "1"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "--> submitted: reward 1.0" in run.stdout
    assert "compaction (proactive, summary by policy): context" in run.stdout
    assert "(context rewritten)" in run.stdout


CLIENT = """
import sys
from ac_env.integrations.openenv_client import AutoCompactEnvClient
with AutoCompactEnvClient(base_url=sys.argv[1]).sync() as env:
    env.reset(seed=0)
    env.step("```bash\\nls\\n```")
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        env.step("```bash\\nls\\n```")
        print("served", flush=True)
    except Exception as error:
        print(type(error).__name__, error, flush=True)
"""


@pytest.mark.slow  # 23 s: waits out the server's idle timeout
def test_a_vanished_client_loses_its_sandbox(tmp_path):
    flags = ("--max-episodes", "1", "--idle-timeout", "4")
    server = start_server(tmp_path, *flags, "--command-timeout", "1", "--grading-timeout", "2")

    def vanishing_client() -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", CLIENT, server.url],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        assert len(server.sandbox_dirs()) == 1
        return process

    try:
        # frozen mid-episode: its connection stays open, it sends nothing: the idle timeout
        frozen = vanishing_client()
        frozen.send_signal(signal.SIGSTOP)
        assert wait_until(lambda: server.sandbox_dirs() == [], timeout_s=30)  # < ping timeout
        frozen.send_signal(signal.SIGCONT)
        out, _ = frozen.communicate("\n", timeout=60)
        assert out.startswith("ServerError") and "session was closed" in out
        # killed mid-episode: the connection drops, the sandbox goes at once
        killed = vanishing_client()
        killed.kill()
        killed.wait()
        assert wait_until(lambda: server.sandbox_dirs() == [], timeout_s=30)
        # the slot is free again; a session still open when the server stops is closed too
        with client(server).sync() as env:
            env.reset(seed=0)
            assert len(server.sandbox_dirs()) == 1
            stop(server)
    finally:
        if server.process.poll() is None:  # the test failed early: stop it gracefully
            stop(server)
        leftovers = server.leftovers()
        shutil.rmtree(server.sandboxes, ignore_errors=True)
    assert leftovers == []


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--idle-timeout", "5"], "idle_timeout_s (5.0) must exceed the longest step"),
        (["--max-steps", "0"], "max_steps: Input should be greater than 0"),
        (["--max-episodes", "0"], "max_episodes: Input should be greater than or equal to 1"),
    ],
)
def test_serve_refuses_a_bad_setting_naming_it(flags, named, capsys):
    from ac_env.cli import main

    assert main(["serve", *flags]) == 2
    assert named in capsys.readouterr().err
