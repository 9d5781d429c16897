"""The bubblewrap command line: what a sandboxed command can see, and nothing more.

Read-only: the system's programs and libraries (``/usr`` and the ``/bin``, ``/lib*`` links or
directories), ``/etc/alternatives``, and an ``/etc`` of the sandbox's own (``prepare_etc``) with
the few files that the dynamic linker, git, bash, coreutils and Python read. Read-write: the
workspace and the sandbox's own ``/tmp``. Generated: ``/proc``, a minimal ``/dev``, a
size-capped ``/dev/shm``. Every namespace is unshared (no network; a PID namespace whose end
kills every process in it), bubblewrap runs unprivileged so the command holds no capability,
and the root and ``/dev`` are remounted read-only so nothing can fill memory through them.
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ALTERNATIVES = "/etc/alternatives"
HOST_ETC_COPIED = ("/etc/ld.so.cache", "/etc/localtime", "/etc/os-release")
SANDBOX_UID = 1000
SANDBOX_GID = 1000
HOSTNAME = "sandbox"
SHM_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Bind:
    """A host path mounted at ``target`` inside the sandbox."""

    source: str
    target: str
    writable: bool = False


def bwrap_argv(bwrap: str, binds: Sequence[Bind], workdir: str) -> list[str]:
    """Arguments that run a command (appended after them) in a fresh bubblewrap sandbox."""
    argv = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_GID),
        "--hostname",
        HOSTNAME,
    ]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    for bind in binds:
        argv += ["--bind" if bind.writable else "--ro-bind", bind.source, bind.target]
    argv += [
        "--remount-ro",
        "/dev",
        "--remount-ro",
        "/",
        "--chdir",
        workdir,
        "--",
    ]
    return argv


def prepare_etc(etc: Path) -> list[Bind]:
    """Write the sandbox's ``/etc`` into ``etc`` (a new directory): its own passwd, group, hosts
    and nsswitch.conf, copies of the host's loader cache, time zone, os-release and Python
    site files. Returns the binds that mount it."""
    etc.mkdir()
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/bash\n"
        f"agent:x:{SANDBOX_UID}:{SANDBOX_GID}:agent:/tmp:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\nagent:x:{SANDBOX_GID}:\nnogroup:x:65534:\n")
    (etc / "hosts").write_text(f"127.0.0.1 localhost {HOSTNAME}\n::1 localhost\n")
    (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files\n")
    for path in HOST_ETC_COPIED:
        if os.path.isfile(path):
            shutil.copyfile(path, etc / os.path.basename(path))
    for path in glob.glob("/etc/python3*"):
        shutil.copytree(path, etc / os.path.basename(path), symlinks=True)
    binds = [Bind(str(etc), "/etc")]
    if os.path.isdir(ETC_ALTERNATIVES):
        (etc / "alternatives").mkdir()
        binds.append(Bind(ETC_ALTERNATIVES, ETC_ALTERNATIVES))
    return binds
