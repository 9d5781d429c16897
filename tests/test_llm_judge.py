"""The LLM judge over an OpenAI-compatible server: the request asks for schema-constrained
JSON in each server family's form (checked on a real local HTTP server), and against the real
llama.cpp server with SmolLM2 every answer is a verdict (slow)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import gymnasium as gym
import pytest
from served_llamacpp import needs_llamacpp

import ac_env  # noqa: F401  (registers the ids)
from ac_env.agents.errors import ModelServerError
from ac_env.policy import PolicyOutput, SamplingConfig
from ac_train.collect import make_judge
from ac_train.judge.llm import VERDICT_SCHEMA, LLMJudge, ServedVerdicts
from ac_train.judge.review import JudgeView

RUN_TESTS = "```bash\npython3 -m pytest -q -p no:cacheprovider 2>&1 | tail -n 20\n```"
READ_ROOT = "```bash\ncat calc/ops.py\n```"
SUMMARY = """# Auto Context Summary
## Task
add(2, 3) returns -1
## Known
The bug is in `add` in calc/ops.py.
## Workspace
no changes yet
## Next
Edit add: `sed -i 's/a - b/a + b/' calc/ops.py`
"""
VERDICT = {"decision": "correct", "correction": "continuation", "replacement": "```bash\nls\n```"}


class Recorder(BaseHTTPRequestHandler):
    """Records each request; answers ``VERDICT``, or a 400 (prompt too long) when ``refuse``."""

    bodies: list[dict] = []
    refuse = False

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        reply: dict = {
            "choices": [{"message": {"role": "assistant", "content": json.dumps(VERDICT)}}]
        }
        if self.refuse:
            reply = {"error": {"message": "prompt too long", "code": "context_length_exceeded"}}
        data = json.dumps(reply).encode()
        self.send_response(400 if self.refuse else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server_url() -> Iterator[str]:
    Recorder.bodies, Recorder.refuse = [], False
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def env(tiny_task_file):
    env = gym.make("AutoCompact-SWE-v0", task_source=str(tiny_task_file), split=None)
    yield env
    env.close()


def view_after(env, *outputs: str):
    observation, _ = env.reset(options={"task_id": "tiny-calc-1"})
    for output in outputs:
        observation, *_ = env.step(output)
    return JudgeView.of(env, observation)


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        ("llamacpp", {"type": "json_object", "schema": VERDICT_SCHEMA}),
        (
            "vllm",
            {"type": "json_schema", "json_schema": {"name": "verdict", "schema": VERDICT_SCHEMA}},
        ),
    ],
)
def test_a_served_judge_asks_for_the_verdict_schema(env, server_url, dialect, expected):
    backend = ServedVerdicts(server_url, "judge", server=dialect, max_retries=0)
    verdict = LLMJudge(backend).review(view_after(env, RUN_TESTS), PolicyOutput(text=READ_ROOT))
    assert verdict.correction == "continuation"
    (body,) = Recorder.bodies
    assert body["response_format"] == expected
    assert body["messages"][0]["role"] == "system" and READ_ROOT in body["messages"][1]["content"]


def test_make_judge_serves_an_llm_judge_through_the_openai_client(env, server_url):
    judge = make_judge(f"llm:openai:judge@{server_url}")
    assert isinstance(judge, LLMJudge) and isinstance(judge.backend, ServedVerdicts)
    judge.review(view_after(env, RUN_TESTS), PolicyOutput(text=READ_ROOT))
    (body,) = Recorder.bodies
    assert "response_format" in body and body["temperature"] == 0.0
    with pytest.raises(ValueError, match="llm:openai:<model>@<base url>"):
        make_judge("llm:openai:judge")


def test_a_refused_request_is_an_accept_and_a_server_failure_propagates(env, server_url):
    Recorder.refuse = True
    judge = LLMJudge(ServedVerdicts(server_url, "judge", server="vllm", max_retries=0))
    verdict = judge.review(view_after(env, RUN_TESTS), PolicyOutput(text=READ_ROOT))
    assert verdict.decision == "accept" and judge.rejected == {"request_refused": 1}
    Recorder.refuse = False
    gone = LLMJudge(ServedVerdicts("http://127.0.0.1:9/v1", "judge", server="vllm", max_retries=0))
    with pytest.raises(ModelServerError):  # a server that is not there: infrastructure
        gone.review(view_after(env, RUN_TESTS), PolicyOutput(text=READ_ROOT))


@pytest.mark.slow
@needs_llamacpp
def test_smollm2_on_llamacpp_answers_every_review_with_a_verdict(env):
    """With the schema constraint the 135M model always answers in the format; what it
    answers is poor (``benchmarks/llm_judge_agreement.py`` measures it), so only the format
    and the judge's handling are asserted here."""
    from ac_train.models.checkpoints import smollm2_gguf_path
    from ac_train.models.llamacpp import llamacpp_server

    views = [
        (view_after(env, RUN_TESTS), READ_ROOT),
        (view_after(env, RUN_TESTS, READ_ROOT), SUMMARY),
        (view_after(env, RUN_TESTS, READ_ROOT, SUMMARY), READ_ROOT),
    ]
    with llamacpp_server([(smollm2_gguf_path(), "smollm2")], threads=2) as url:
        sampling = SamplingConfig(temperature=0.0, max_new_tokens=256)
        judge = LLMJudge(ServedVerdicts.served(url, "smollm2", sampling), max_chars=4_000)
        verdicts = [judge.review(view, PolicyOutput(text=text)) for view, text in views]
    assert judge.rejected["no_verdict"] == 0
    assert all(v.decision in ("accept", "correct") for v in verdicts)
