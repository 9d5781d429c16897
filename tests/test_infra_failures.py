"""Failures never look like results: a model server that refuses, fails or hangs makes
infrastructure errors (reward nan, retried, reported, exit 3), never "ok" episodes with reward 0;
a configuration that cannot work is one line on stderr, exit 2, and nothing written.

The server is a real HTTP server on 127.0.0.1, driven through ``ac-bench``'s and
``ac-train collect``'s entry points with an ``openai:`` worker (its timeouts shortened)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.bench import cli as bench_cli
from ac_env.runs import checks
from ac_env.runs.failures import INFRA_EXIT_CODE
from ac_env.sandbox.docker import session as docker_session

MODEL = "m"
HANG_S = 3.0


class _Handler(BaseHTTPRequestHandler):
    mode = "ok"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = type(self).mode
        if mode == "500":
            self._send(500, {"error": {"message": "internal error"}})
        elif mode == "hang":
            time.sleep(HANG_S)
        elif mode == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif mode == "too_long":
            self._send(400, {"error": {"message": "context_length_exceeded", "code": 400}})
        else:
            text = "```bash\nsubmit\n```"
            self._send(200, {"choices": [{"message": {"role": "assistant", "content": text}}]})

    def _send(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", handler
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture(autouse=True)
def quick_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTTP worker with short timeouts and no backoff (the retries still happen)."""

    class Quick(OpenAIChatPolicy):
        def __init__(self, *args: Any, **settings: Any) -> None:
            quick = {"timeout_s": 0.5, "backoff_s": 0.0, "max_retries": 2}
            super().__init__(*args, **{**quick, **settings})

    monkeypatch.setattr("ac_env.runs.workers.OpenAIChatPolicy", Quick)


def bench(out: Path, task_file: Path, worker: str, *extra: str) -> int:
    return bench_cli.main(
        [
            "--out",
            str(out),
            "--source",
            str(task_file),
            "--split",
            "all",
            "--limit",
            "1",
            "--strategies",
            "none",
            "--budgets",
            "1",
            "--workers",
            "1",
            "--worker",
            worker,
            "--no-progress",
            *extra,
        ]
    )


@pytest.mark.parametrize(
    ("mode", "cause"),
    [("500", "HTTP 500"), ("hang", "no response within"), ("drop", "RemoteDisconnected")],
)
def test_a_failing_model_server_makes_infra_errors_and_exit_3(
    server, tiny_task_file: Path, tmp_path: Path, capsys, mode: str, cause: str
):
    url, handler = server
    handler.mode = mode
    out = tmp_path / "run"
    assert bench(out, tiny_task_file, f"openai:{MODEL}@{url}") == INFRA_EXIT_CODE
    stderr = capsys.readouterr().err
    assert "strategy none, budget $1: all 1 episode(s) failed for infrastructure reasons" in stderr
    assert cause in stderr and "model server" in stderr
    (record,) = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert record["status"] == "infra_error" and record["attempts"] == 2
    assert cause in record["error"]
    trajectory = [
        json.loads(line) for line in (out / record["trajectory"]).read_text().splitlines()
    ]
    end = trajectory[-1]
    assert end["reward"] is None and cause in end["infra_error"]
    report = (out / "report.md").read_text()
    assert "## Infrastructure failures" in report and cause in report


def test_a_prompt_the_server_refuses_as_too_long_is_the_policys_outcome(
    server, tiny_task_file: Path, tmp_path: Path
):
    url, handler = server
    handler.mode = "too_long"
    out = tmp_path / "run"
    assert bench(out, tiny_task_file, f"openai:{MODEL}@{url}") == 0
    (record,) = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert record["status"] == "ok" and record["budgets"][0]["reward"] == 0.0


def test_a_working_server_runs_clean(server, tiny_task_file: Path, tmp_path: Path):
    url, _ = server
    assert bench(tmp_path / "run", tiny_task_file, f"openai:{MODEL}@{url}") == 0


def test_the_fork_exits_3_when_the_server_fails(
    server, tiny_task_file: Path, tmp_path: Path, capsys
):
    url, handler = server
    handler.mode = "500"
    assert bench(tmp_path / "run", tiny_task_file, f"openai:{MODEL}@{url}", "--fork") == 3
    assert "fork, strategy none: all 1 episode(s) failed" in capsys.readouterr().err


def test_collect_exits_3_when_the_server_fails(
    server, tiny_task_file: Path, tmp_path: Path, capsys
):
    from ac_train.cli import main

    url, handler = server
    handler.mode = "500"
    out = tmp_path / "collect"
    argv = ["collect", "--out", str(out), "--source", str(tiny_task_file), "--split", "all"]
    argv += ["--limit", "1", "--rollouts-per-task", "1", "--judge", "none", "--no-progress"]
    assert main([*argv, "--worker", f"openai:{MODEL}@{url}"]) == INFRA_EXIT_CODE
    assert "collect: all 1 episode(s) failed for infrastructure reasons" in capsys.readouterr().err
    (episode,) = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert episode["status"] == "infra_error" and "HTTP 500" in episode["error"]


def _one_line_exit_2(code: int, capsys, out: Path, *words: str) -> None:
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert stderr.count("\n") == 1, stderr
    for word in words:
        assert word in stderr
    assert not out.exists()


def test_a_dead_port_fails_validation_and_writes_nothing(
    dead_url: str, tiny_task_file: Path, tmp_path: Path, capsys
):
    out = tmp_path / "run"
    code = bench(out, tiny_task_file, f"openai:{MODEL}@{dead_url}")
    _one_line_exit_2(code, capsys, out, "worker:", "does not answer", "refused")
    code = bench(out, tiny_task_file, f"openai:{MODEL}@{dead_url}", "--fork")
    _one_line_exit_2(code, capsys, out, "worker:", "does not answer")


def test_a_model_the_server_does_not_serve_fails_validation(
    server, tiny_task_file: Path, tmp_path: Path, capsys
):
    url, _ = server
    out = tmp_path / "run"
    code = bench(out, tiny_task_file, f"openai:other@{url}")
    _one_line_exit_2(code, capsys, out, "'other' is not served")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--pricing", "no-such-preset"], ["pricing:", "no-such-preset"]),
        (["--strategies", "no-such-strategy"], ["no-such-strategy"]),
        (["--split", "no-such-split"], ["tasks:"]),
        (["--ids", "no-such-id"], ["tasks:", "no-such-id"]),
    ],
)
def test_a_bad_setting_fails_validation_and_writes_nothing(
    tiny_task_file: Path, tmp_path: Path, capsys, args: list[str], words: list[str]
):
    out = tmp_path / "run"
    _one_line_exit_2(bench(out, tiny_task_file, "reference", *args), capsys, out, *words)


def test_a_missing_task_file_fails_validation(tmp_path: Path, capsys):
    out = tmp_path / "run"
    code = bench(out, tmp_path / "missing.jsonl", "reference")
    _one_line_exit_2(code, capsys, out, "tasks:", "missing.jsonl")


def test_a_docker_backend_without_a_daemon_fails_validation(
    tiny_task_file: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    monkeypatch.setattr(docker_session, "_client", None)
    out = tmp_path / "run"
    code = bench(out, tiny_task_file, "reference", "--sandbox", "docker")
    _one_line_exit_2(code, capsys, out, "sandbox:", "no Docker daemon answers")


def test_collect_validates_before_writing(
    dead_url: str, tiny_task_file: Path, tmp_path: Path, capsys
):
    from ac_train.cli import main

    out = tmp_path / "collect"
    argv = ["collect", "--out", str(out), "--source", str(tiny_task_file), "--split", "all"]
    code = main([*argv, "--worker", f"openai:{MODEL}@{dead_url}"])
    _one_line_exit_2(code, capsys, out, "worker:", "does not answer")
    code = main([*argv, "--worker", "reference", "--judge", f"llm:openai:{MODEL}@{dead_url}"])
    _one_line_exit_2(code, capsys, out, "judge:", "does not answer")
    code = main([*argv, "--worker", "reference", "--strategy", "no-such-strategy"])
    _one_line_exit_2(code, capsys, out, "no-such-strategy")


def test_configuration_errors_are_one_line():
    error = checks.ConfigurationError("worker", "a\nb\n  c")
    assert str(error) == "worker: a b c"
