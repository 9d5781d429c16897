"""Crafted workspace archives, one per way an archive could write outside the workspace, for
``tests/test_snapshot_archive.py`` and ``benchmarks/restore_refusals.py``."""

from __future__ import annotations

import io
import tarfile

OUTSIDE = "@OUTSIDE@"
"""Replaced by a directory outside the workspace: a host directory for the local sandbox, the
sandbox's own base objects (/opt/autocompact/base.git) in a container."""

Member = tuple[str, str, str]  # name, kind, link target or file content

CASES: dict[str, tuple[list[Member], str, str]] = {
    # case: (members after repo/ and tmp/, the member refused, the reason)
    "absolute name": ([(f"{OUTSIDE}/new", "file", "x")], f"{OUTSIDE}/new", "absolute name"),
    "dot-dot name": ([("repo/../../new", "file", "x")], "repo/../../new", r"'\.\.' in the name"),
    "outside the parts": ([("etc/new", "file", "x")], "etc/new", "outside the parts"),
    "part replaced by a symlink": ([("repo", "sym", OUTSIDE)], "repo", "twice"),
    "absolute symlink": ([("repo/l", "sym", OUTSIDE)], "repo/l", "symbolic link to the absolute"),
    "symlink climbing out": ([("repo/l", "sym", "../../..")], "repo/l", "leaves repo/"),
    "symlink out through a symlink": (
        [("repo/a", "dir", ""), ("repo/a/s", "sym", ".."), ("repo/a/m", "sym", "s/..")],
        "repo/a/m",
        "leaves repo/",
    ),
    "symlink from tmp into repo": ([("tmp/l", "sym", "../repo")], "tmp/l", "leaves tmp/"),
    "symlink loop": (
        [("repo/x", "sym", "y/z"), ("repo/y", "sym", "x/z")],
        "repo/x",
        "leaves repo/ .or loops",
    ),
    "file through an earlier symlink": (
        [("repo/l", "sym", "../../../../../../../.."), ("repo/l/new", "file", "x")],
        "repo/l/new",
        "lies below the symbolic link 'repo/l'",
    ),
    "file through an absolute symlink": (
        [("repo/l", "sym", OUTSIDE), ("repo/l/new", "file", "x")],
        "repo/l",
        "symbolic link to the absolute",
    ),
    "hard link through an absolute symlink": (
        [("repo/l", "sym", OUTSIDE), ("repo/h", "lnk", "repo/l/victim")],
        "repo/l",
        "symbolic link to the absolute",
    ),
    "directory replaced by a symlink": (
        [("repo/d", "dir", ""), ("repo/d", "sym", OUTSIDE), ("repo/d/new", "file", "x")],
        "repo/d",
        "twice",
    ),
    "hard link outside": ([("repo/h", "lnk", f"{OUTSIDE}/victim")], "repo/h", "hard link"),
    "hard link through a symlink": (
        [("repo/l", "sym", "."), ("repo/h", "lnk", "repo/l/../../victim")],
        "repo/h",
        "hard link",
    ),
    "hard link inside": (
        [("repo/a", "file", "x"), ("repo/h", "lnk", "repo/a")],
        "repo/h",
        "hard link",
    ),
    "character device": ([("repo/null", "chr", "")], "repo/null", "device file or fifo"),
    "block device": ([("repo/disk", "blk", "")], "repo/disk", "device file or fifo"),
    "fifo": ([("repo/fifo", "fifo", "")], "repo/fifo", "device file or fifo"),
}


def crafted(members: list[Member], outside: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, kind, extra in [("repo", "dir", ""), ("tmp", "dir", ""), *members]:
            member = tarfile.TarInfo(name.replace(OUTSIDE, outside))
            data = extra.encode()
            if kind == "file":
                member.size = len(data)
            else:
                member.type = {
                    "dir": tarfile.DIRTYPE,
                    "sym": tarfile.SYMTYPE,
                    "lnk": tarfile.LNKTYPE,
                    "chr": tarfile.CHRTYPE,
                    "blk": tarfile.BLKTYPE,
                    "fifo": tarfile.FIFOTYPE,
                }[kind]
                member.linkname = extra.replace(OUTSIDE, outside)
                member.devmajor, member.devminor = (1, 3) if kind in ("chr", "blk") else (0, 0)
                member.mode = 0o755
            archive.addfile(member, io.BytesIO(data) if kind == "file" else None)
    return buffer.getvalue()
