"""Records that only this machine's trusted side can have written: the command cache's and the
grade cache's JSON files, each carrying an HMAC-SHA256 of its body under a key that never
enters a sandbox.

The key is 32 random bytes in ``$AUTOCOMPACT_CACHE/record-key`` (``~/.cache/autocompact``),
created on first use with mode 0600 and never mounted into or copied to a sandbox. A record
whose MAC does not verify (planted, edited, copied from another machine, or written under
another key) is treated as absent, never replayed. Reads are bounded (``MAX_RECORD_BYTES``)
and refuse anything but a regular file (``host_files``); writes are atomic (staged beside
the record, then renamed), so processes sharing a store never read half a record.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from ac_env.sandbox.host_files import read_regular
from ac_env.tasks.git_repo import cache_root

MAX_RECORD_BYTES = 64 * 1024 * 1024
KEY_FILE = "record-key"
_KEY_BYTES = 32


@functools.cache
def record_key(path: Path | None = None) -> bytes:
    """This machine's record key (created with mode 0600 when missing)."""
    path = path or cache_root() / KEY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        key = read_regular(path, 1024)
    else:
        key = secrets.token_bytes(_KEY_BYTES)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
    if len(key) != _KEY_BYTES:
        raise ValueError(f"{path} is not a record key ({len(key)} bytes, expected 32)")
    return key


def _mac(key: bytes, body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, canonical, hashlib.sha256).hexdigest()


def read_record(path: Path, key: str) -> dict[str, Any] | None:
    """The body stored at ``path`` for ``key``; None when absent, unreadable, not signed by
    this machine's record key, or another key's (a hash collision)."""
    try:
        record = json.loads(read_regular(path, MAX_RECORD_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("body"), dict):
        return None
    body: dict[str, Any] = record["body"]
    mac = record.get("mac")
    if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(record_key(), body)):
        return None
    return body if body.get("key") == key else None


def write_record(path: Path, body: dict[str, Any]) -> None:
    """Store ``body`` (which holds its ``key``) at ``path``, signed, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"body": body, "mac": _mac(record_key(), body)}
    fd, staging = tempfile.mkstemp(dir=path.parent, prefix=".staging-")
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle)
    os.replace(staging, path)


def record_path(directory: Path, key: str) -> Path:
    """Where the record of ``key`` lives in ``directory`` (its SHA-256, so any key is a
    safe file name)."""
    return directory / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
