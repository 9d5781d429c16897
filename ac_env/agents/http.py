"""A policy served by any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, SGLang,
``python -m ac_train.serve``), over the standard library's HTTP client.

The API key is read from an environment variable at every call and only ever placed in the
request header: it is never stored, and error messages have it redacted even when a server
echoes it back.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ac_env.agents.errors import ModelServerError, PolicyError
from ac_env.policy import PolicyOutput

RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
REQUEST_FAULT_STATUSES = frozenset({400, 413, 422})
"""Statuses that blame the request (its prompt), not the server: the policy's outcome."""
MAX_BODY_CHARS_IN_ERRORS = 2000
MAX_RETRY_AFTER_S = 60.0


class ChatUsage(BaseModel):
    """Token counts the server billed for one call."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class _TokenLogprob(BaseModel):
    logprob: float


class _ChoiceLogprobs(BaseModel):
    content: list[_TokenLogprob] | None = None


class _Message(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    message: _Message
    logprobs: _ChoiceLogprobs | None = None
    token_ids: list[int] | None = None


class _Completion(BaseModel):
    choices: list[_Choice] = Field(min_length=1)
    usage: ChatUsage | None = None
    prompt_token_ids: list[int] | None = None


@dataclass(frozen=True)
class _Reply:
    """What one attempt got: an HTTP status and body, or ``status=None`` and why it failed."""

    status: int | None
    body: str
    retry_after_s: float | None = None


class OpenAIChatPolicy:
    """``Policy`` over ``POST {base_url}/chat/completions``.

    Connection errors, timeouts, 408, 429 and 5xx are retried ``max_retries`` times with
    exponential backoff (``backoff_s``, doubled each time; a server's ``Retry-After`` wins);
    other failures raise at once. What is left unanswered after that raises
    ``ModelServerError`` (infrastructure), except a 400, 413 or 422, which blames the request
    and raises ``PolicyError`` (the policy's outcome). ``logprobs=True`` asks for the sampled
    tokens' log-probs (``output_logprobs``); ``return_token_ids=True`` asks for prompt and
    output token ids (vLLM's ``return_token_ids``, also served by ``ac_train.serve``).
    The usage of the latest call is kept in ``last_usage``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        temperature: float = 0.0,
        max_tokens: int = 1024,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        logprobs: bool = False,
        backoff_s: float = 1.0,
        return_token_ids: bool = False,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if timeout_s <= 0 or max_retries < 0 or backoff_s < 0:
            raise ValueError("timeout_s must be > 0, max_retries and backoff_s >= 0")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.logprobs = logprobs
        self.backoff_s = backoff_s
        self.return_token_ids = return_token_ids
        self.last_usage: ChatUsage | None = None

    def __repr__(self) -> str:
        return (
            f"OpenAIChatPolicy(url={self.url!r}, model={self.model!r}, "
            f"api_key_env={self.api_key_env!r}, temperature={self.temperature}, "
            f"max_tokens={self.max_tokens})"
        )

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        completion = self._parse(self._post_with_retries(self._request_body(observation)))
        self.last_usage = completion.usage
        choice = completion.choices[0]
        if choice.message.content is None:
            raise PolicyError(f"POST {self.url}: the response's message has no text content")
        logprobs = choice.logprobs.content if choice.logprobs else None
        return PolicyOutput(
            text=choice.message.content,
            prompt_token_ids=completion.prompt_token_ids,
            output_token_ids=choice.token_ids,
            output_logprobs=[t.logprob for t in logprobs] if logprobs is not None else None,
        )

    def _request_body(self, observation: Sequence[Mapping[str, str]]) -> bytes:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in observation],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.logprobs:
            payload["logprobs"] = True
        if self.return_token_ids:
            payload["return_token_ids"] = True
        return json.dumps(payload).encode("utf-8")

    def _post_with_retries(self, body: bytes) -> str:
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            reply = self._post_once(body)
            if reply.status == 200:
                return reply.body
            retriable = reply.status is None or reply.status in RETRIED_STATUSES
            if not retriable or attempt == attempts - 1:
                break
            delay = self.backoff_s * 2**attempt
            if reply.retry_after_s is not None:
                delay = min(reply.retry_after_s, MAX_RETRY_AFTER_S)
            time.sleep(delay)
        if reply.status is None:
            raise ModelServerError(
                f"POST {self.url} failed after {attempt + 1} attempt(s): {reply.body}"
            )
        body_text = reply.body[:MAX_BODY_CHARS_IN_ERRORS]
        fault = PolicyError if reply.status in REQUEST_FAULT_STATUSES else ModelServerError
        raise fault(
            f"POST {self.url} failed with HTTP {reply.status} after {attempt + 1} attempt(s): "
            f"{body_text}",
            status=reply.status,
            body=body_text,
        )

    def _post_once(self, body: bytes) -> _Reply:
        """One request. Every outcome is returned, never raised, and carries no credential."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with _OPENER.open(request, timeout=self.timeout_s) as response:
                return _Reply(response.status, _redact(response.read(), key))
        except urllib.error.HTTPError as error:
            return _Reply(error.code, _redact(error.read(), key), _retry_after(error.headers))
        except (OSError, http.client.HTTPException) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):
                return _Reply(None, f"no response within {self.timeout_s} s")
            return _Reply(None, _redact(f"{type(error).__name__}: {reason}".encode(), key))

    def _parse(self, body: str) -> _Completion:
        try:
            return _Completion.model_validate_json(body)
        except ValidationError as error:
            raise ModelServerError(
                f"POST {self.url}: malformed chat completion ({error.error_count()} problem(s), "
                f"first: {error.errors()[0]['loc']} {error.errors()[0]['msg']}): "
                f"{body[:MAX_BODY_CHARS_IN_ERRORS]}"
            ) from None


def probe_server(
    base_url: str, model: str, api_key_env: str | None = "OPENAI_API_KEY", timeout_s: float = 10.0
) -> None:
    """Check with one request that ``base_url`` serves ``model``: ``GET {base_url}/models``
    lists it or, where that route is missing or answers something else, a 1-token chat
    completion succeeds. Raises ``ModelServerError`` saying what failed."""
    url = base_url.rstrip("/") + "/models"
    key = os.environ.get(api_key_env) if api_key_env else None
    headers = {"Accept": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            served = _served_models(response.read())
    except urllib.error.HTTPError as error:
        if error.code in (401, 403):
            body = _redact(error.read(), key)[:MAX_BODY_CHARS_IN_ERRORS]
            raise ModelServerError(f"GET {url}: HTTP {error.code}: {body}") from None
        served = None
    except (OSError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", error)
        what = "no response" if isinstance(reason, TimeoutError) else f"{reason}"
        raise ModelServerError(f"GET {url}: {_redact(what.encode(), key)}") from None
    if served is not None:
        if model not in served:
            raise ModelServerError(f"GET {url}: model {model!r} is not served; served: {served}")
        return
    policy = OpenAIChatPolicy(
        base_url, model, api_key_env, max_tokens=1, timeout_s=timeout_s, max_retries=0
    )
    try:
        policy.act([{"role": "user", "content": "ping"}])
    except PolicyError as error:
        raise ModelServerError(f"a 1-token chat completion failed: {error}") from None


def _served_models(body: bytes) -> list[str] | None:
    """The model ids of a ``/models`` listing, or None when the body is no such listing."""
    try:
        listing = json.loads(body)
        return [str(entry["id"]) for entry in listing["data"]]
    except (ValueError, KeyError, TypeError):
        return None


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect would carry the Authorization header to wherever it points: fail instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_RefuseRedirects)


def _redact(raw: bytes, key: str | None) -> str:
    text = raw.decode("utf-8", errors="replace")
    return text.replace(key, "[redacted]") if key else text


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
