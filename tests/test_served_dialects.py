"""Token records from served models: each server family's request fields, its replies turned
into exact ids and log-probs (or none), the benchmark's one warning and training's refusal."""

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ac_env.agents.http import OpenAIChatPolicy, TokenVocabulary
from ac_env.policy import SamplingConfig, missing_token_records
from ac_env.runs.workers import policy_factory, require_token_records
from ac_env.strategies import get_strategy
from ac_train.models.checkpoints import tiny_model_and_tokenizer

CHAT = [{"role": "user", "content": "List the files."}]
TEXT = "```bash\nls -la\n```"


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_model_and_tokenizer()[1]


class Stub:
    """A server listing one model as ``owned_by`` and answering every chat completion with
    ``reply(request_body)``; it keeps the request bodies."""

    def __init__(self, owned_by, reply):
        self.bodies = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self._send({"object": "list", "data": [{"id": "m", "owned_by": owned_by}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.bodies.append(body)
                self._send(reply(body))

            def _send(self, payload):
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def llamacpp_reply(pieces, text=TEXT):
    """What llama-cpp-python's server answers: token texts and log-probs, no ids."""
    content = [{"token": p, "logprob": -0.5, "bytes": None, "top_logprobs": []} for p in pieces]
    return lambda body: {
        "choices": [{"message": {"content": text}, "logprobs": {"content": content}}]
    }


def pieces_of(tokenizer, text=TEXT):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids, [tokenizer.decode([i]) for i in ids]


def served(url, tokenizer, temperature=0.0):
    sampling = SamplingConfig(temperature=temperature, max_new_tokens=32)
    return OpenAIChatPolicy.served(url, "m", sampling, tokenizer=tokenizer, api_key_env=None)


def test_llamacpp_is_detected_asked_for_log_probs_and_its_token_texts_become_ids(tokenizer):
    ids, pieces = pieces_of(tokenizer)
    with Stub("me", llamacpp_reply(pieces)) as stub:
        policy = served(stub.url, tokenizer)
        out = policy.act(CHAT)
    assert policy.dialect == "llamacpp"
    body = stub.bodies[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 1
    assert (body["top_k"], body["min_p"], body["repeat_penalty"]) == (0, 0.0, 1.0)
    assert out.output_token_ids == ids
    assert out.output_logprobs == [-0.5] * len(ids)
    assert missing_token_records(out) == []


def test_token_texts_that_do_not_rebuild_the_text_give_no_records(tokenizer):
    _, pieces = pieces_of(tokenizer)
    with Stub("me", llamacpp_reply(pieces[:-1])) as stub:
        out = served(stub.url, tokenizer).act(CHAT)
    assert out.text == TEXT
    assert missing_token_records(out) == ["output_token_ids", "output_logprobs"]


def test_llamacpp_log_probs_are_kept_only_at_temperature_0_or_1(tokenizer):
    ids, pieces = pieces_of(tokenizer)
    with Stub("me", llamacpp_reply(pieces)) as stub:
        warm = served(stub.url, tokenizer, temperature=0.7).act(CHAT)
        one = served(stub.url, tokenizer, temperature=1.0).act(CHAT)
    assert warm.output_token_ids == ids and warm.output_logprobs is None
    assert one.output_logprobs == [-0.5] * len(ids)


def test_without_a_tokenizer_no_log_probs_are_asked_for_and_none_recorded(tokenizer):
    _, pieces = pieces_of(tokenizer)
    with Stub("me", llamacpp_reply(pieces)) as stub:
        out = served(stub.url, None).act(CHAT)
    assert missing_token_records(out) == ["output_token_ids", "output_logprobs"]
    body = stub.bodies[0]
    assert "logprobs" not in body and "top_logprobs" not in body  # costly, and unusable
    assert body["top_k"] == 0 and body["repeat_penalty"] == 1.0  # sampling is unchanged


def test_a_piece_of_a_character_maps_to_no_id(tokenizer):
    """Byte tokens of a multi-byte character decode alone to the replacement character."""
    vocabulary = TokenVocabulary(tokenizer)
    assert vocabulary.ids(["\ufffd"], "\ufffd") is None
    ls = tokenizer("ls", add_special_tokens=False)["input_ids"]
    assert vocabulary.ids(["l", "s"], "ls") == ls


def test_vllm_is_asked_for_token_ids_and_they_are_recorded():
    reply = {
        "prompt_token_ids": [1, 2, 3],
        "choices": [
            {
                "message": {"content": "hi"},
                "token_ids": [7, 8],
                "logprobs": {"content": [{"token": "h", "logprob": -0.1}, {"logprob": -0.2}]},
            }
        ],
    }
    with Stub("vllm", lambda body: reply) as stub:
        policy = served(stub.url, None, temperature=0.7)
        out = policy.act(CHAT)
    assert policy.dialect == "vllm"
    assert stub.bodies[0]["return_token_ids"] is True and stub.bodies[0]["logprobs"] is True
    assert stub.bodies[0]["temperature"] == 0.7 and stub.bodies[0]["max_tokens"] == 32
    assert out.prompt_token_ids == [1, 2, 3]
    assert out.output_token_ids == [7, 8] and out.output_logprobs == [-0.1, -0.2]


def test_the_benchmark_warns_once_and_training_refuses_naming_what_is_missing(caplog):
    reply = {"choices": [{"message": {"content": "ok"}}]}
    with Stub("someone", lambda body: reply) as stub:
        make = policy_factory(f"openai:m@{stub.url}", get_strategy("none"))
        with caplog.at_level(logging.WARNING, logger="ac_env.runs.workers"):
            for seed in range(3):
                assert make(seed).act(CHAT).text == "ok"
        warnings = [r for r in caplog.records if "gave no" in r.getMessage()]
        assert len(warnings) == 1
        assert "output_token_ids and no output_logprobs" in warnings[0].getMessage()
        with pytest.raises(ValueError, match="openai dialect.*no output_token_ids"):
            require_token_records(make(0), "collect")
    assert stub.bodies[0]["temperature"] == SamplingConfig().temperature
    assert stub.bodies[0]["max_tokens"] == SamplingConfig().max_new_tokens


def test_an_evaluation_needs_no_token_records_but_a_collection_to_train_on_does(
    tiny_task_file, tmp_path, tokenizer
):
    from ac_train.collect import CollectConfig, collect

    reply = {"choices": [{"message": {"content": "```bash\nsubmit\n```"}}]}
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    with Stub("someone", lambda body: reply) as stub:
        settings = {
            "task_source": str(tiny_task_file),
            "split": None,
            "task_ids": ["tiny-calc-1"],
            "worker": f"openai:m@{stub.url}",
            "rollouts_per_task": 1,
            "max_steps": 2,
        }
        shadow = CollectConfig(**settings, judge_mode="shadow")
        summary = collect(shadow, tmp_path / "eval", progress=False)
        assert summary.episodes == 1 and summary.valid_action_rate == 1.0
        to_train = CollectConfig(**settings, tokenizer=str(tmp_path / "tokenizer"))
        with pytest.raises(ValueError, match="no output_token_ids"):
            collect(to_train, tmp_path / "train", progress=False)
