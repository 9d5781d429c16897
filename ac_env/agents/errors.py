"""Errors a policy raises when it cannot answer; the env's rollout records them, never crashes."""

from __future__ import annotations


class PolicyError(RuntimeError):
    """A policy could not produce a response (server error, bad reply, prompt too long).

    ``status`` and ``body`` carry the HTTP status and response body when a server answered.
    Messages never contain credentials.
    """

    def __init__(self, message: str, *, status: int | None = None, body: str | None = None):
        super().__init__(message)
        self.status = status
        self.body = body


class ContextLengthError(PolicyError):
    """The prompt does not fit in the model's context window."""


class ModelServerError(PolicyError):
    """The model server could not answer: it refused the connection, timed out, answered 5xx,
    408 or 429 after the retries, rejected the credentials (401, 403), does not serve the
    model (404), or sent a reply that is no chat completion. An infrastructure failure of the
    episode (reward nan, retried), never the policy's. A 400, 413 or 422 (the request's own
    fault, such as a prompt past the context window) is a plain ``PolicyError``: the
    episode ends as the policy's outcome and is graded."""
