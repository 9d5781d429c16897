"""A replay cache of real command outputs, for cheap repeated episodes (opt-in).

``CachingSandbox`` wraps a ``LocalSandbox``. Before each ``exec`` it takes a manifest of
everything a command can see that an episode can change: every entry of the workspace (the
repo with its untracked and ignored files and its ``.git``) and of the sandbox's ``/tmp``, each
with its kind, executable bit and content hash. The key is (task id, the manifest's hash, the
exact command, its timeout and output limit).

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

What the manifest abstracts, and why: the stat data in ``.git/index`` (its entries count, as
``git ls-files --stage`` lists them; git re-reads a file whose stat data differ), git objects
(content-addressed: their names stand for their contents), and file times and owners. Nothing
else is left out: bytecode and pytest caches count like any file (the sandbox sets
``PYTHONDONTWRITEBYTECODE``, and the reference agent runs pytest without its cache, so they rarely
appear). An effect over ``MAX_EFFECT_BYTES`` is not stored.

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
import subprocess
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ac_env.sandbox.base import ExecResult, SandboxError
from ac_env.sandbox.local import LocalSandbox
from ac_env.tasks.model import Task

MAX_EFFECT_BYTES = 4 * 1024 * 1024

Manifest = dict[str, tuple[str, str]]
"""``"repo/<path>"`` or ``"tmp/<path>"`` -> (kind: ``dir``/``file``/``exec``/``link``, the
content's SHA-256, a link's target, or '' for a directory and a git object)."""


def manifest(roots: dict[str, Path]) -> Manifest:
    """Every entry under each root (see the module docstring)."""
    entries: Manifest = {}
    for label, root in roots.items():
        for directory, dirs, files in os.walk(root):
            here = Path(directory)
            relative = here.relative_to(root)
            for name in dirs:
                entries[f"{label}/{relative / name}"] = ("dir", "")
            for name in files:
                entries[f"{label}/{relative / name}"] = _file_entry(here / name, relative)
    if "repo" in roots and (roots["repo"] / ".git" / "index").is_file():
        entries["repo/.git/index"] = ("file", _index_digest(roots["repo"]))
    return entries


def fingerprint(entries: Manifest) -> str:
    return hashlib.sha256(json.dumps(sorted(entries.items())).encode()).hexdigest()


def _file_entry(path: Path, relative: Path) -> tuple[str, str]:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return "link", os.readlink(path)
    if relative.parts[:2] == (".git", "objects"):
        return "file", ""
    kind = "exec" if info.st_mode & stat.S_IXUSR else "file"
    return kind, hashlib.sha256(path.read_bytes()).hexdigest()


def _index_digest(repo: Path) -> str:
    listing = subprocess.run(
        ["git", "-c", "safe.directory=*", "ls-files", "--stage", "-z"],
        cwd=repo,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_DIR": str(repo / ".git"),
        },
        capture_output=True,
        check=False,
        timeout=60,
    )
    return hashlib.sha256(listing.stdout + str(listing.returncode).encode()).hexdigest()


class CachingSandbox:
    """The ``Sandbox`` protocol over ``inner``, replaying stored commands (see the module
    docstring). ``directory`` holds the store (created when missing)."""

    def __init__(self, inner: LocalSandbox, directory: str | Path) -> None:
        self.inner = inner
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.task_id = ""
        self.hits = 0
        self.misses = 0

    def start(self, task: Task) -> None:
        self.inner.start(task)
        self.task_id = task.instance_id

    def exec(self, command: str, timeout_s: float, output_limit: int) -> ExecResult:
        before = self.manifest()
        key = json.dumps([self.task_id, fingerprint(before), command, timeout_s, output_limit])
        path = self.directory / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
        record = read_record(path, key)
        if record is not None:
            self.hits += 1
            return self._replay(record)
        self.misses += 1
        result = self.inner.exec(command, timeout_s, output_limit)
        if not result.timed_out:
            after = self.manifest()
            effect = self._effect(before, after)
            if effect is not None:
                _store(path, key, result, fingerprint(after), effect)
        return result

    def manifest(self) -> Manifest:
        """The manifest of the workspace and /tmp (``manifest``)."""
        return manifest({"repo": self.inner.workspace, "tmp": self.inner.tmp_dir})

    def _host(self, entry: str) -> Path:
        label, _, relative = entry.partition("/")
        return (self.inner.workspace if label == "repo" else self.inner.tmp_dir) / relative

    def _effect(self, before: Manifest, after: Manifest) -> dict[str, Any] | None:
        """What the run did to the files, with the new contents; None when too large."""
        written: dict[str, list[str]] = {}
        size = 0
        for entry, (kind, digest) in sorted(after.items()):
            if before.get(entry) == (kind, digest):
                continue
            if kind == "dir":
                written[entry] = [kind, ""]
            elif kind == "link":
                written[entry] = [kind, digest]
            else:
                data = self._host(entry).read_bytes()
                size += len(data)
                written[entry] = [kind, base64.b64encode(data).decode()]
        if size > MAX_EFFECT_BYTES:
            return None
        removed = sorted(set(before) - set(after), reverse=True)
        return {"written": written, "removed": removed}

    def _replay(self, record: dict[str, Any]) -> ExecResult:
        owner = self.inner.workspace.stat()
        for entry in record["effect"]["removed"]:  # deepest first
            path = self._host(entry)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        for entry, (kind, value) in record["effect"]["written"].items():  # parents first
            path = self._host(entry)
            if path.is_symlink() or (path.exists() and kind != "dir" and path.is_dir()):
                _remove(path)
            if kind == "dir":
                path.mkdir(exist_ok=True)
            elif kind == "link":
                path.symlink_to(value)
            else:
                path.write_bytes(base64.b64decode(value))
                path.chmod(0o755 if kind == "exec" else 0o644)
            os.lchown(path, owner.st_uid, owner.st_gid)
        if fingerprint(self.manifest()) != record["after"]:
            raise SandboxError("command cache: a replayed effect did not give the recorded files")
        return ExecResult(**record["result"])

    def read_file(self, path: str) -> bytes:
        return self.inner.read_file(path)

    def write_file(self, path: str, data: bytes) -> None:
        self.inner.write_file(path, data)

    def diff(self) -> str:
        """The inner sandbox's diff, replayed by the repo's manifest (the diff is a
        function of the repo's files and the task's base commit only)."""
        repo = manifest({"repo": self.inner.workspace})
        key = json.dumps([self.task_id, fingerprint(repo)])
        path = self.directory / "diffs" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
        record = read_record(path, key)
        if record is not None:
            return str(record["diff"])
        diff = self.inner.diff()
        path.parent.mkdir(exist_ok=True)
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
        path.unlink()


def read_record(path: Path, key: str) -> dict[str, Any] | None:
    """The JSON record stored at ``path`` for ``key``; None when absent, unreadable or another
    key's (a hash collision)."""
    try:
        record: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if record.get("key") == key else None  # a collision is never replayed


def _store(path: Path, key: str, result: ExecResult, after: str, effect: dict[str, Any]) -> None:
    write_record(path, {"key": key, "result": asdict(result), "after": after, "effect": effect})


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` as JSON at ``path`` atomically (staged beside it, then renamed), so
    processes sharing a cache never read half a record."""
    fd, staging = tempfile.mkstemp(dir=path.parent, prefix=".staging-")
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle)
    os.replace(staging, path)
