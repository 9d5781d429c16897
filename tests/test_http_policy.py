import json
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ac_env.agents.errors import PolicyError
from ac_env.agents.http import OpenAIChatPolicy
from ac_train.models.checkpoints import load_model, tiny_model_and_tokenizer
from ac_train.models.policy import TransformersPolicy
from ac_train.models.serve import ChatCompletionServer, serving_in_thread

KEY_ENV = "AC_TEST_CHAT_API_KEY"
SERVER_KEY = "sk-test-server-key-0123456789"
CHAT = [
    {"role": "system", "content": "You are a helpful assistant. Be brief."},
    {"role": "user", "content": "What is the capital of France?"},
]
OK_BODY = json.dumps(
    {
        "choices": [{"message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
)


@pytest.fixture(scope="module")
def tiny():
    return tiny_model_and_tokenizer(max_positions=256)


@pytest.fixture(scope="module")
def tiny_url(tiny):
    model, tokenizer = tiny
    server = ChatCompletionServer(
        TransformersPolicy(model, tokenizer, seed=0), "tiny", api_key=SERVER_KEY
    )
    with serving_in_thread(server) as url:
        yield url


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SERVER_KEY)


def client(url, model="tiny", **kwargs):
    kwargs.setdefault("backoff_s", 0.01)
    return OpenAIChatPolicy(url, model, api_key_env=KEY_ENV, **kwargs)


def test_tiny_server_returns_text_usage_logprobs_and_token_ids(tiny, tiny_url, keyed):
    policy = client(tiny_url, max_tokens=8, logprobs=True, return_token_ids=True)
    out = policy.act(CHAT)
    local = TransformersPolicy(*tiny, max_new_tokens=8).act(CHAT)
    assert out.text == local.text
    assert out.prompt_token_ids == local.prompt_token_ids
    assert out.output_token_ids == local.output_token_ids
    assert out.output_logprobs == pytest.approx(local.output_logprobs, abs=1e-5)
    usage = policy.last_usage
    assert usage is not None
    assert usage.prompt_tokens == len(local.prompt_token_ids)
    assert usage.completion_tokens == len(local.output_token_ids) == 8
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_without_logprobs_requested_none_come_back(tiny_url, keyed):
    out = client(tiny_url, max_tokens=4).act(CHAT)
    assert out.output_logprobs is None and out.output_token_ids is None
    assert isinstance(out.text, str)


def test_models_endpoint_lists_the_served_name(tiny_url):
    request = urllib.request.Request(
        tiny_url + "/models", headers={"Authorization": f"Bearer {SERVER_KEY}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        listing = json.loads(response.read())
    assert [m["id"] for m in listing["data"]] == ["tiny"]


def test_wrong_key_is_a_401_policy_error_without_the_key(tiny_url, monkeypatch):
    wrong = "sk-wrong-key-that-must-not-leak"
    monkeypatch.setenv(KEY_ENV, wrong)
    policy = client(tiny_url, max_retries=2)
    with pytest.raises(PolicyError) as caught:
        policy.act(CHAT)
    error = caught.value
    assert error.status == 401
    assert "HTTP 401" in str(error) and "after 1 attempt(s)" in str(error)
    assert "missing or invalid API key" in str(error)
    assert wrong not in str(error) and wrong not in repr(policy)


def test_server_rejects_bad_sampling_and_prompts_too_long(tiny_url, keyed):
    with pytest.raises(PolicyError, match="HTTP 400.*temperature") as caught:
        client(tiny_url, temperature=5.0).act(CHAT)
    assert caught.value.status == 400
    long_chat = [{"role": "user", "content": "word " * 400}]
    with pytest.raises(PolicyError, match="context_length_exceeded"):
        client(tiny_url).act(long_chat)


def test_unknown_model_name_is_a_404(tiny_url, keyed):
    with pytest.raises(PolicyError, match="HTTP 404.*'other' is not served"):
        client(tiny_url, model="other").act(CHAT)


class Scripted:
    """A stub server answering each POST with the next (status, body, delay_s) of a script."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        self.release = threading.Event()
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                scripted.requests.append(dict(self.headers))
                self.rfile.read(int(self.headers["Content-Length"]))
                status, body, delay = scripted.script.pop(0)
                scripted.release.wait(delay)
                if callable(body):
                    body = body(self.headers)
                payload = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def test_a_500_is_retried_then_the_200_is_used(keyed):
    with Scripted([(500, "overloaded", 0), (200, OK_BODY, 0)]) as stub:
        policy = client(stub.url, max_retries=2)
        out = policy.act(CHAT)
    assert out.text == "ok"
    assert len(stub.requests) == 2
    assert policy.last_usage is not None and policy.last_usage.total_tokens == 4


def test_persistent_5xx_gives_up_after_max_retries(keyed):
    stub = Scripted([(503, "busy", 0)] * 3)
    with stub, pytest.raises(PolicyError, match="HTTP 503 after 3 attempt") as caught:
        client(stub.url, max_retries=2).act(CHAT)
    assert caught.value.body == "busy"
    assert len(stub.requests) == 3


def test_a_400_is_not_retried(keyed):
    stub = Scripted([(400, "bad request", 0), (200, OK_BODY, 0)])
    with stub, pytest.raises(PolicyError, match="HTTP 400"):
        client(stub.url, max_retries=3).act(CHAT)
    assert len(stub.requests) == 1


def test_malformed_reply_is_a_policy_error(keyed):
    stub = Scripted([(200, '{"choices": []}', 0)])
    with stub, pytest.raises(PolicyError, match="malformed chat completion"):
        client(stub.url).act(CHAT)


def test_connection_refused_is_a_policy_error_after_retries():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(PolicyError, match="after 3 attempt.*refused"):
        client(f"http://127.0.0.1:{port}/v1", max_retries=2).act(CHAT)


def test_no_answer_within_the_timeout_is_a_policy_error(keyed):
    with Scripted([(200, OK_BODY, 30)] * 2) as stub:
        started = time.monotonic()
        with pytest.raises(PolicyError, match=r"no response within 0\.2 s"):
            client(stub.url, timeout_s=0.2, max_retries=1).act(CHAT)
        assert time.monotonic() - started < 5
    assert len(stub.requests) == 2


def test_the_api_key_appears_in_no_message_repr_or_traceback(monkeypatch):
    planted = "sk-planted-secret-5f3a9c"
    monkeypatch.setenv(KEY_ENV, planted)

    def echo(headers):
        return f"denied for {headers['Authorization']}"

    with Scripted([(401, echo, 0), (500, echo, 0), (200, echo, 0)]) as stub:
        policy = client(stub.url, max_retries=0)
        errors = []
        for _ in range(3):
            with pytest.raises(PolicyError) as caught:
                policy.act(CHAT)
            errors.append(caught.value)
    assert [r["Authorization"] for r in stub.requests] == [f"Bearer {planted}"] * 3
    for error in errors:
        shown = "".join(traceback.format_exception(error)) + repr(error) + str(error.body)
        assert planted not in shown
        assert "[redacted]" in shown
    assert planted not in repr(policy) and planted not in str(policy)
    assert planted not in repr(vars(policy))


def test_no_key_variable_sends_no_authorization(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with Scripted([(200, OK_BODY, 0)]) as stub:
        client(stub.url).act(CHAT)
    assert "Authorization" not in stub.requests[0]


@pytest.mark.model
def test_real_smollm2_over_http():
    model, tokenizer = load_model("smollm2")
    server = ChatCompletionServer(TransformersPolicy(model, tokenizer), "smollm2")
    with serving_in_thread(server) as url:
        policy = OpenAIChatPolicy(url, "smollm2", api_key_env=None, max_tokens=16, logprobs=True)
        out = policy.act(CHAT)
    assert "Paris" in out.text
    assert policy.last_usage is not None
    assert len(out.output_logprobs) == policy.last_usage.completion_tokens <= 16
    assert all(lp <= 0 for lp in out.output_logprobs)


def test_the_http_policy_does_not_import_torch():
    check = "import sys, ac_env.agents.http; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
