"""The local backends: bubblewrap isolation (``sandbox: "local"``) and plain subprocesses
(``"unisolated"``), both ``LocalSandbox`` (``sandbox``); the bubblewrap command line is
``bwrap``."""

from __future__ import annotations

from collections.abc import Callable

from ac_env.sandbox.base import Sandbox
from ac_env.sandbox.local.sandbox import Isolation, LocalSandbox


def bubblewrap_sandboxes(disk_quota_mb: int | None) -> Callable[[], Sandbox]:
    """``"local"``: refuses to run without bubblewrap."""
    LocalSandbox.check_available("bwrap")
    return lambda: LocalSandbox(isolation="bwrap", disk_quota_mb=disk_quota_mb)


def unisolated_sandboxes(disk_quota_mb: int | None) -> Callable[[], Sandbox]:
    """``"unisolated"``: an explicit opt-out of isolation."""
    return lambda: LocalSandbox(isolation="none", disk_quota_mb=disk_quota_mb)


__all__ = ["Isolation", "LocalSandbox", "bubblewrap_sandboxes", "unisolated_sandboxes"]
