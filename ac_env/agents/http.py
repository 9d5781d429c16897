"""A policy served by any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, SGLang,
llama.cpp, ``python -m ac_train.models.serve``), over the standard library's HTTP client.

Token records for training (``server`` picks the dialect; ``"auto"`` reads ``owned_by`` from
``GET /models``):

- ``vllm`` (and ``ac_train.models.serve``): ``logprobs`` and vLLM's ``return_token_ids`` give the
  prompt ids, the sampled ids and their log-probs. vLLM reports log-probs at the sampling
  temperature only when started with ``--logprobs-mode processed_logprobs``.
- ``llamacpp`` (llama-cpp-python's server, ``llama-server``): log-probs come only when
  ``top_logprobs`` is sent too, at temperature 1 (so they are recorded only for greedy or
  temperature-1 sampling), and tokens come as text: ``tokenizer`` (the model's own, same
  vocabulary) maps each token text to its id, exactly where a text belongs to one token.
  The end-of-turn token the server stopped on is not reported: the ids end before it.
  Without a ``tokenizer`` no log-probs are asked for (there would be no ids to pair them with).
- ``sglang``: like ``llamacpp`` (token text and log-probs).
- ``openai``: log-probs only; no ids.

A call whose records could not be made exact records none of them (``missing_token_records``
names what is absent); nothing is ever guessed from re-tokenised text.

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
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from ac_env.agents.errors import ModelServerError, PolicyError
from ac_env.policy import PolicyOutput, SamplingConfig

RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
REQUEST_FAULT_STATUSES = frozenset({400, 413, 422})
"""Statuses that blame the request (its prompt), not the server: the policy's outcome."""
MAX_BODY_CHARS_IN_ERRORS = 2000
MAX_RETRY_AFTER_S = 60.0
ServerDialect = Literal["openai", "vllm", "sglang", "llamacpp"]
SERVER_OWNERS: dict[str, ServerDialect] = {
    "vllm": "vllm",
    "autocompact": "vllm",  # ac_train.models.serve speaks vLLM's return_token_ids
    "sglang": "sglang",
    "llamacpp": "llamacpp",  # llama-server
    "me": "llamacpp",  # llama-cpp-python's server
}
"""``owned_by`` of a ``GET /models`` entry -> the dialect of the server that lists it."""


class ChatUsage(BaseModel):
    """Token counts the server billed for one call."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class _TokenLogprob(BaseModel):
    token: str | None = None
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
    output token ids (vLLM's ``return_token_ids``, also served by ``ac_train.models.serve``).
    The usage of the latest call is kept in ``last_usage``. ``api_key``: the key itself, in
    place of the variable ``api_key_env`` names (a per-rollout secret, as verifiers'
    interception server hands each harness).
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
        server: ServerDialect | Literal["auto"] | None = None,
        tokenizer: Any = None,
        top_p: float = 1.0,
        api_key: str | None = None,
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
        self._api_key = api_key
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.logprobs = logprobs
        self.backoff_s = backoff_s
        self.return_token_ids = return_token_ids
        self.server = server
        self.top_p = top_p
        self._vocabulary = TokenVocabulary(tokenizer) if tokenizer is not None else None
        self.last_usage: ChatUsage | None = None

    @classmethod
    def served(
        cls,
        base_url: str,
        model: str,
        sampling: SamplingConfig,
        server: ServerDialect | Literal["auto"] = "auto",
        tokenizer: Any = None,
        **settings: Any,
    ) -> OpenAIChatPolicy:
        """A policy that samples by ``sampling`` and records what ``server`` can give."""
        if sampling.stop_after_action:
            raise ValueError(
                "sampling.stop_after_action: in-process sampling only (a served model's stop "
                "strings cannot tell the fence that closes a bash block from one that opens it)"
            )
        return cls(
            base_url,
            model,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_new_tokens,
            server=server,
            tokenizer=tokenizer,
            **settings,
        )

    @property
    def dialect(self) -> ServerDialect | None:
        """The server family (detected on first use when ``server="auto"``)."""
        if self.server == "auto":
            self.server = detect_server(self.url.removesuffix("/chat/completions"), self)
        return self.server

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
        text = choice.message.content
        logprobs = choice.logprobs.content if choice.logprobs else None
        if self.dialect in TEXT_TOKEN_DIALECTS:
            return self._from_token_texts(text, logprobs)
        return PolicyOutput(
            text=text,
            prompt_token_ids=completion.prompt_token_ids,
            output_token_ids=choice.token_ids,
            output_logprobs=[t.logprob for t in logprobs] if logprobs is not None else None,
        )

    def _from_token_texts(self, text: str, logprobs: list[_TokenLogprob] | None) -> PolicyOutput:
        """Ids from the token texts (through the vocabulary), kept only when they decode to
        ``text``; log-probs only where the server's (temperature 1) are the sampler's."""
        if logprobs is None or self._vocabulary is None:
            return PolicyOutput(text=text)
        ids = self._vocabulary.ids([t.token for t in logprobs], text)
        at_temperature = self.temperature in (0.0, 1.0)
        return PolicyOutput(
            text=text,
            output_token_ids=ids,
            output_logprobs=[t.logprob for t in logprobs] if ids and at_temperature else None,
        )

    def _request_body(self, observation: Sequence[Mapping[str, str]]) -> bytes:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in observation],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.top_p != 1.0:
            payload["top_p"] = self.top_p
        if self.logprobs:
            payload["logprobs"] = True
        if self.return_token_ids:
            payload["return_token_ids"] = True
        fields = DIALECT_FIELDS[self.dialect] if self.dialect else {}
        if self.dialect in TEXT_TOKEN_DIALECTS and self._vocabulary is None:
            # token texts map to no id without the tokenizer, so their log-probs would be
            # dropped; llama-cpp-python's server spends seconds a call computing them
            fields = {k: v for k, v in fields.items() if k not in ("logprobs", "top_logprobs")}
        payload.update(fields)
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
        key = self._api_key
        if key is None and self.api_key_env:
            key = os.environ.get(self.api_key_env)
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


TEXT_TOKEN_DIALECTS: tuple[ServerDialect, ...] = ("llamacpp", "sglang")
"""Servers that report sampled tokens as text: ids only through the model's tokenizer."""
DIALECT_FIELDS: dict[ServerDialect, dict[str, Any]] = {
    "openai": {"logprobs": True},
    "vllm": {"logprobs": True, "return_token_ids": True},
    "sglang": {"logprobs": True, "top_logprobs": 1},
    # llama.cpp's defaults (top-k 40, min-p 0.05, repeat penalty 1.1) would change sampling.
    "llamacpp": {
        "logprobs": True,
        "top_logprobs": 1,
        "top_k": 0,
        "min_p": 0.0,
        "repeat_penalty": 1.0,
    },
}
"""The request fields that ask each server family for its token records."""


class TokenVocabulary:
    """Token text -> id for a tokenizer's vocabulary, where the text is one token's alone.

    A text that several tokens decode to (a piece of a multi-byte character, a special
    token) has no id here, so a reply holding one gets no ids: they are exact or absent.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        special = set(getattr(tokenizer, "all_special_ids", []))
        texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
        seen: dict[str, int] = {}
        ambiguous: set[str] = set()
        for token_id, piece in enumerate(texts):
            if token_id in special or not piece or "\ufffd" in piece:
                continue
            if piece in seen:
                ambiguous.add(piece)
            seen[piece] = token_id
        self._ids = {piece: i for piece, i in seen.items() if piece not in ambiguous}

    def ids(self, pieces: Sequence[str | None], text: str) -> list[int] | None:
        """The ids of ``pieces`` when each is one token's text and together they decode to
        ``text``; else None."""
        found = [self._ids.get(piece) if piece is not None else None for piece in pieces]
        if any(i is None for i in found):
            return None
        ids = [int(i) for i in found if i is not None]
        decoded = self.tokenizer.decode(ids, skip_special_tokens=True)
        return ids if decoded == text else None


def detect_server(
    base_url: str, policy: OpenAIChatPolicy, timeout_s: float = 10.0
) -> ServerDialect:
    """The dialect of the server at ``base_url`` from its ``GET /models`` listing's
    ``owned_by`` (``SERVER_OWNERS``); ``openai`` when it names no known family."""
    url = base_url.rstrip("/") + "/models"
    key = os.environ.get(policy.api_key_env) if policy.api_key_env else None
    headers = {"Accept": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            listing = json.loads(response.read())
        owners = {str(entry.get("owned_by")) for entry in listing["data"]}
    except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError, AttributeError):
        return "openai"
    known = [SERVER_OWNERS[o] for o in sorted(owners) if o in SERVER_OWNERS]
    return known[0] if known else "openai"


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
