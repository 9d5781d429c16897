"""What ``restore()`` does with each crafted archive of ``tests/restore_cases.py``, per sandbox
backend (docker only when a daemon answers): refused (the error) or accepted, and whether
anything changed outside the workspace (a host directory for the local sandbox; the
container's base objects under /opt/autocompact for docker) or a link, device or fifo was left
in the workspace. Uses nothing newer than ``Sandbox.restore``, so pointing PYTHONPATH at an
older checkout prints that code's table.

    .venv/bin/python benchmarks/restore_refusals.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ac_env.sandbox.base import SandboxError
from ac_env.sandbox.local import LocalSandbox

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from restore_cases import CASES, crafted  # noqa: E402
from sandbox_task import make_task  # noqa: E402

DOCKER_OUTSIDE = "/opt/autocompact/base.git"
DOCKER_LOOK = "ls -lAR --time-style=+ /opt/autocompact"
DOCKER_LEFT = (
    "find /testbed /tmp /opt/autocompact-stage \\( -type l -lname '/*' -o -type l -lname '*..*'"
    " \\) -printf 'link %p -> %l\\n' -o \\( -type c -o -type b -o -type p \\)"
    " -printf 'special %p\\n' 2>/dev/null; true"
)


def outcome(box: Any, archive: bytes) -> str:
    try:
        box.restore(archive)
    except SandboxError as error:
        return f"refused: {type(error).__name__}: {str(error).splitlines()[0][:100]}"
    return "accepted"


def local_row(task: Any, members: list[Any]) -> tuple[str, str]:
    outside = Path(tempfile.mkdtemp(prefix="restore-case-"))
    (outside / "victim").write_text("victim\n")

    def state() -> list[tuple[str, int, int]]:
        return sorted((p.name, p.stat().st_nlink, p.stat().st_uid) for p in outside.iterdir())

    with LocalSandbox(isolation="none") as box:
        box.start(task)
        before = state()
        result = outcome(box, crafted(members, str(outside)))
        repo = box.workspace
        left = sorted({kind for p in repo.parent.rglob("*") if (kind := _odd(p, repo.parent))})
        changed = state() != before
    effect = ("WROTE OUTSIDE; " if changed else "") + ", ".join(left)
    return result, effect


def _odd(path: Path, root: Path) -> str:
    """What ``path`` left in a local workspace is, when no sandbox should hold it."""
    if path.is_symlink():
        inside = os.path.realpath(path).startswith(f"{root}{os.sep}")
        return "" if inside or path.parent == root / "bin" else "outward link"
    return "" if path.is_file() or path.is_dir() else "device or fifo"


def docker_row(box: Any, task: Any, members: list[Any]) -> tuple[str, str]:
    box.start(task)
    try:
        state = box._state
        run = lambda script: box._helper(state, script, {}, 1 << 20, "probe").decode()  # noqa: E731
        before = run(DOCKER_LOOK)
        result = outcome(box, crafted(members, DOCKER_OUTSIDE))
        changed = run(DOCKER_LOOK) != before
        left = run(DOCKER_LEFT).strip().replace("\n", "; ")
    finally:
        box.close()
    return result, ("WROTE OUTSIDE /opt/autocompact; " if changed else "") + left


def main() -> None:
    task = make_task(Path(tempfile.mkdtemp(prefix="restore-cases-")))
    rows = [("local", case, *local_row(task, CASES[case][0])) for case in CASES]
    try:
        from ac_env.sandbox.docker import DockerSandbox
        from ac_env.sandbox.docker.session import docker_client

        docker_client()
        box = DockerSandbox()
        rows += [("docker", case, *docker_row(box, task, CASES[case][0])) for case in CASES]
    except SandboxError as error:
        print(f"docker skipped: {error}")
    print("| case | backend | restore | left behind |")
    print("|---|---|---|---|")
    for backend, case, result, effect in sorted(
        rows, key=lambda r: (list(CASES).index(r[1]), r[0])
    ):
        print(f"| {case} | {backend} | {result} | {effect or '-'} |")


if __name__ == "__main__":
    main()
