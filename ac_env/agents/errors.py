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
