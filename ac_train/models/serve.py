"""A small OpenAI-compatible chat-completions server for a local ``TransformersPolicy``.

    python -m ac_train.models.serve --model smollm2 --port 8000

Serves ``POST /v1/chat/completions`` (``messages``, ``temperature``, ``top_p``, ``max_tokens``,
``logprobs``, and vLLM's ``return_token_ids``) and ``GET /v1/models`` on loopback by default.
Requests are answered one generation at a time (the policy holds a lock). With
``--api-key-env NAME`` every request must carry ``Authorization: Bearer $NAME``; the key is
read from the environment, never from the command line.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ac_env.agents.errors import ContextLengthError
from ac_env.policy import PolicyOutput
from ac_train.models.checkpoints import SMOLLM2, load_model
from ac_train.models.policy import SamplingSettings, TransformersPolicy

MAX_REQUEST_BYTES = 32 * 1024 * 1024
log = logging.getLogger(__name__)


class ChatMessage(BaseModel):
    role: str = Field(min_length=1)
    content: str


class ChatCompletionRequest(BaseModel):
    """The subset of OpenAI's request this server honours; unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    temperature: float = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: Literal[0] | None = None
    n: Literal[1] = 1
    stream: Literal[False] = False
    return_token_ids: bool = False


class ChatCompletionServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        policy: TransformersPolicy,
        model_name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        default_max_tokens: int = 512,
    ):
        super().__init__((host, port), _Handler)
        self.policy = policy
        self.model_name = model_name
        self.api_key = api_key
        self.default_max_tokens = default_max_tokens

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"


@contextmanager
def serving_in_thread(server: ChatCompletionServer) -> Iterator[str]:
    """Run ``server`` in a background thread; yields its base URL; shuts it down on exit."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="chat-server", daemon=True
    )
    thread.start()
    try:
        yield server.base_url
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _Handler(BaseHTTPRequestHandler):
    server: ChatCompletionServer

    def do_GET(self) -> None:
        if not self._authorized():
            return
        if self.path.rstrip("/") != "/v1/models":
            self._error(404, f"no route GET {self.path}", "not_found")
            return
        model = {"id": self.server.model_name, "object": "model", "owned_by": "autocompact"}
        self._json(200, {"object": "list", "data": [model]})

    def do_POST(self) -> None:
        if not self._authorized():
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route POST {self.path}", "not_found")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            self._error(413, f"request body over {MAX_REQUEST_BYTES} bytes", "too_large")
            return
        try:
            request = ChatCompletionRequest.model_validate_json(self.rfile.read(length))
        except ValidationError as error:
            self._error(400, _describe(error), "invalid_request")
            return
        if request.model not in (None, self.server.model_name):
            self._error(404, f"model {request.model!r} is not served here", "model_not_found")
            return
        try:
            self._json(200, self._complete(request))
        except ContextLengthError as error:
            self._error(400, str(error), "context_length_exceeded")
        except Exception:
            log.exception("generation failed")
            self._error(500, "generation failed; see the server log", "server_error")

    def _complete(self, request: ChatCompletionRequest) -> dict[str, Any]:
        policy = self.server.policy
        max_tokens = request.max_completion_tokens or request.max_tokens
        sampling = SamplingSettings(
            max_new_tokens=max_tokens or self.server.default_max_tokens,
            temperature=request.temperature,
            top_p=request.top_p,
        )
        observation = [m.model_dump() for m in request.messages]
        output = policy.generate(observation, sampling)
        prompt_ids = output.prompt_token_ids or []
        output_ids = output.output_token_ids or []
        stopped = bool(output_ids) and output_ids[-1] in policy.stop_token_ids
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": output.text},
            "logprobs": None,
            "finish_reason": "stop" if stopped else "length",
        }
        if request.logprobs:
            choice["logprobs"] = {"content": _logprob_entries(policy, output)}
        response: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.server.model_name,
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": len(output_ids),
                "total_tokens": len(prompt_ids) + len(output_ids),
            },
        }
        if request.return_token_ids:
            choice["token_ids"] = output_ids
            response["prompt_token_ids"] = prompt_ids
        return response

    def _authorized(self) -> bool:
        expected = self.server.api_key
        if expected is None:
            return True
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {expected}".encode()):
            return True
        self._error(401, "missing or invalid API key", "invalid_api_key")
        return False

    def _error(self, status: int, message: str, code: str) -> None:
        self._json(status, {"error": {"message": message, "type": "error", "code": code}})

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)


def _logprob_entries(policy: TransformersPolicy, output: PolicyOutput) -> list[dict[str, Any]]:
    entries = []
    pairs = zip(output.output_token_ids or [], output.output_logprobs or [], strict=True)
    for token_id, logprob in pairs:
        text = str(policy.tokenizer.decode([token_id]))
        entries.append(
            {"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": []}
        )
    return entries


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    return f"invalid request: {where}: {first['msg']}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=SMOLLM2, help="'smollm2' (offline) or an HF path/dir")
    parser.add_argument("--served-model-name", help="name clients send (default: --model)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-new-tokens", type=int, default=512, help="when a request omits it")
    parser.add_argument("--seed", type=int, default=None, help="sampling seed")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument(
        "--api-key-env", help="environment variable holding the key every request must carry"
    )
    args = parser.parse_args(argv)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            parser.error(f"--api-key-env {args.api_key_env}: that variable is not set or empty")
    if args.threads:
        torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    model, tokenizer = load_model(args.model, dtype=getattr(torch, args.dtype))
    policy = TransformersPolicy(model, tokenizer, seed=args.seed)
    server = ChatCompletionServer(
        policy,
        args.served_model_name or args.model,
        host=args.host,
        port=args.port,
        api_key=api_key,
        default_max_tokens=args.max_new_tokens,
    )
    print(f"Serving {server.model_name} on {server.base_url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
