"""A replay cache of real command outputs, for cheap repeated episodes (opt-in).

``CachingSandbox`` wraps a ``LocalSandbox``. Before each ``exec`` it takes a manifest of
everything a command can see that an episode can change: every entry of the workspace (the
repo with its untracked and ignored files and its whole ``.git``, objects included) and of the
sandbox's ``/tmp``, each with its kind, executable bit and content hash. The key is (the
record format, the task, the sandbox's settings, the manifest's hash, the exact command, its
timeout and output limit).

- On a miss the command runs for real. Unless it timed out, its ``ExecResult`` is stored with
  the manifest's hash after the run and the run's effect on the files: the entries it created
  or changed (with their contents) and those it removed.
- On a hit nothing runs: the stored effect is applied to the files, the manifest is taken again
  and must hash to the recorded one (else ``SandboxError``), and the stored result is returned.

Why replay is sound: a sandboxed command (``LocalSandbox``: bubblewrap, no network, a fresh PID
namespace per command, nothing survives it) sees only the files in the manifest, the read-only
system and the command text, all in the key; the same inputs give the same outputs and the same
files afterwards, which the check after applying an effect confirms. What can differ between two
runs of one key is what nothing may rely on: wall-clock time and durations (a replay reports the
recorded ones), and a non-deterministic program (random numbers, the clock), for which a replay
returns the recorded sample of the same distribution. A command that timed out is never stored
(its outcome depends on the machine's speed).

The workspace is the agent's, so the host only ever reads it as bytes: the manifest is taken in
Python with ``os.lstat`` and bounded reads of regular files (``host_files``); git's index is
read by ``git_index`` (its stat data left out: git re-reads a file whose stat data differ);
no program runs on the workspace outside the sandbox. A workspace holding a fifo, socket or
device, or more than ``MAX_MANIFEST_BYTES`` of files, is not cached (``Uncacheable``): its
commands run for real and nothing is stored (``bypassed`` counts them). Records are signed
(``signed_records``): one that this machine's trusted side did not write is never replayed.
An effect over ``MAX_EFFECT_BYTES`` is not stored.

``diff`` is replayed too, keyed by the repo's manifest: the diff is a function of the repo's
files and the task's base commit. (The env replays final grades by task and patch:
``ac_env.grading.cache``.)

The store is a directory of JSON files (one per key, written atomically), so several processes
can share it. ``hits`` and ``misses`` count this sandbox's command lookups. Only ``LocalSandbox``
is supported: the manifest is read on the host.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ac_env.sandbox.base import ExecResult, SandboxError, SandboxLifecycle
from ac_env.sandbox.git_index import index_digest
from ac_env.sandbox.host_files import UnsafeFileError, read_regular, write_regular
from ac_env.sandbox.local import LocalSandbox
from ac_env.sandbox.signed_records import read_record, record_path, write_record
from ac_env.tasks.model import Task

FORMAT = 2
"""The record format: records of another format are never replayed."""
MAX_EFFECT_BYTES = 4 * 1024 * 1024
MAX_MANIFEST_BYTES = 512 * 1024 * 1024
"""The most file content one manifest hashes; past it the state is not cached."""
_CHUNK = 1 << 20

Manifest = dict[str, tuple[str, str]]
"""``"repo/<path>"`` or ``"tmp/<path>"`` -> (kind: ``dir``/``file``/``exec``/``link``, the
content's SHA-256, a link's target, or '' for a directory)."""


class Uncacheable(Exception):
    """A workspace state the cache does not replay (a special file, too much content)."""


def manifest(roots: dict[str, Path], max_bytes: int = MAX_MANIFEST_BYTES) -> Manifest:
    """Every entry under each root (see the module docstring)."""
    entries: Manifest = {}
    budget = [max_bytes]
    for label, root in roots.items():
        pending = [Path()]  # a stack, not recursion: the agent decides how deep trees go
        while pending:
            relative = pending.pop()
            try:
                with os.scandir(root / relative) as listing:
                    children = [(c.name, c.stat(follow_symlinks=False)) for c in listing]
            except OSError as error:
                raise Uncacheable(f"cannot list {label}/{relative}: {error.strerror}") from None
            for child, info in children:
                path = relative / child
                name = f"{label}/{path}"
                if stat.S_ISDIR(info.st_mode):
                    entries[name] = ("dir", "")
                    pending.append(path)
                elif stat.S_ISLNK(info.st_mode):
                    entries[name] = ("link", os.readlink(root / path))
                elif stat.S_ISREG(info.st_mode):
                    kind = "exec" if info.st_mode & stat.S_IXUSR else "file"
                    index = label == "repo" and path == Path(".git", "index")
                    digest = _content_digest(root / path, info.st_size, budget, index)
                    entries[name] = (kind, digest)
                else:
                    raise Uncacheable(f"{name} is a special file (fifo, socket or device)")
    return entries


def _content_digest(path: Path, size: int, budget: list[int], is_index: bool) -> str:
    if size > budget[0]:
        raise Uncacheable(f"the workspace holds more than {MAX_MANIFEST_BYTES} bytes of files")
    try:
        data = read_regular(path, budget[0])
    except OSError as error:
        raise Uncacheable(f"cannot read {path.name}: {error}") from None
    budget[0] -= len(data)
    return index_digest(data) if is_index else hashlib.sha256(data).hexdigest()


def fingerprint(entries: Manifest) -> str:
    return hashlib.sha256(json.dumps(sorted(entries.items())).encode()).hexdigest()


class CachingSandbox(SandboxLifecycle):
    """The ``Sandbox`` protocol over ``inner``, replaying stored commands (see the module
    docstring). ``directory`` holds the store (created when missing)."""

    def __init__(self, inner: LocalSandbox, directory: str | Path) -> None:
        self.inner = inner
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.task_id = ""
        self.hits = 0
        self.misses = 0
        self.bypassed = 0

    def start(self, task: Task) -> None:
        self.inner.start(task)
        self.task_id = task.instance_id

    def _key(self, *parts: object) -> str:
        return json.dumps([FORMAT, self.task_id, self.inner.profile, *parts])

    def exec(self, command: str, timeout_s: float, output_limit: int) -> ExecResult:
        try:
            before = self.manifest()
        except Uncacheable:
            self.bypassed += 1
            return self.inner.exec(command, timeout_s, output_limit)
        key = self._key(fingerprint(before), command, timeout_s, output_limit)
        path = record_path(self.directory, key)
        record = read_record(path, key)
        if record is not None:
            self.hits += 1
            return self._replay(record)
        self.misses += 1
        result = self.inner.exec(command, timeout_s, output_limit)
        if result.timed_out:
            return result
        try:
            after = self.manifest()
        except Uncacheable:
            return result
        effect = self._effect(before, after)
        if effect is not None:
            body = {"key": key, "result": asdict(result), "after": fingerprint(after)}
            write_record(path, {**body, "effect": effect})
        return result

    def manifest(self) -> Manifest:
        """The manifest of the workspace and /tmp (``manifest``)."""
        return manifest({"repo": self.inner.workspace, "tmp": self.inner.tmp_dir})

    def _host(self, entry: str) -> Path:
        """The host path of a manifest entry, every parent checked to be a real directory
        (never a symlink) inside its root."""
        label, _, relative = entry.partition("/")
        root = self.inner.workspace if label == "repo" else self.inner.tmp_dir
        parts = Path(relative).parts
        if not parts or ".." in parts or Path(relative).is_absolute():
            raise SandboxError(f"command cache: a record names {entry!r}")
        for depth in range(1, len(parts)):
            parent = root.joinpath(*parts[:depth])
            if not stat.S_ISDIR(os.lstat(parent).st_mode):
                raise SandboxError(f"command cache: {entry!r} lies below a non-directory")
        return root.joinpath(*parts)

    def _effect(self, before: Manifest, after: Manifest) -> dict[str, Any] | None:
        """What the run did to the files, with the new contents; None when too large."""
        written: dict[str, list[str]] = {}
        size = 0
        for entry, (kind, digest) in sorted(after.items()):
            if before.get(entry) == (kind, digest):
                continue
            if kind in ("dir", "link"):
                written[entry] = [kind, digest]
                continue
            try:
                data = read_regular(self._host(entry), MAX_EFFECT_BYTES - size)
            except UnsafeFileError:
                return None
            size += len(data)
            written[entry] = [kind, base64.b64encode(data).decode()]
        removed = sorted(set(before) - set(after), reverse=True)
        return {"written": written, "removed": removed}

    def _replay(self, record: dict[str, Any]) -> ExecResult:
        owner = self.inner.workspace.stat()
        for entry in record["effect"]["removed"]:  # deepest first
            _remove(self._host(entry))
        for entry, (kind, value) in record["effect"]["written"].items():  # parents first
            path = self._host(entry)
            if os.path.lexists(path) and (kind != "dir" or path.is_symlink() or not path.is_dir()):
                _remove(path)
            if kind == "dir":
                path.mkdir(exist_ok=True)
            elif kind == "link":
                path.symlink_to(value)
            else:
                write_regular(path, base64.b64decode(value), 0o755 if kind == "exec" else 0o644)
                os.chmod(path, 0o755 if kind == "exec" else 0o644, follow_symlinks=False)
            os.lchown(path, owner.st_uid, owner.st_gid)
        try:
            replayed = fingerprint(self.manifest())
        except Uncacheable:
            replayed = ""
        if replayed != record["after"]:
            raise SandboxError("command cache: a replayed effect did not give the recorded files")
        return ExecResult(**record["result"])

    def read_file(self, path: str) -> bytes:
        return self.inner.read_file(path)

    def write_file(self, path: str, data: bytes) -> None:
        self.inner.write_file(path, data)

    def diff(self) -> str:
        """The inner sandbox's diff, replayed by the repo's manifest (the diff is a
        function of the repo's files and the task's base commit only)."""
        try:
            repo = manifest({"repo": self.inner.workspace})
        except Uncacheable:
            return self.inner.diff()
        key = self._key("diff", fingerprint(repo))
        path = record_path(self.directory / "diffs", key)
        record = read_record(path, key)
        if record is not None:
            return str(record["diff"])
        diff = self.inner.diff()
        write_record(path, {"key": key, "diff": diff})
        return diff

    def snapshot(self) -> bytes:
        return self.inner.snapshot()

    def restore(self, archive: bytes) -> None:
        self.inner.restore(archive)

    def close(self) -> None:
        self.inner.close()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
