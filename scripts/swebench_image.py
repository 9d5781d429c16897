"""SWE-bench-format instances in Docker: build one image per task from its snapshot
directory, and check a task file's instances.

    .venv/bin/python scripts/swebench_image.py build IN.jsonl OUT.jsonl [--ids ID ...]
        [--base-image autocompact/base:latest] [--repository autocompact/swe-task]
    .venv/bin/python scripts/swebench_image.py check TASKS.jsonl [--ids ID ...]

``build``: IN is a task file whose tasks have a ``snapshot_dir`` (``ac-env tasks build``
writes one). For each task a container is created, never started, from the base image (the
daemon's own, see ``scripts/docker_daemon.sh``: Debian's python3, pytest and git); the
snapshot is copied to the task's ``workdir`` (``/testbed``), owned by root; the container is
committed as ``REPOSITORY:<instance_id>`` with that workdir as the image's working directory.
No network is used: nothing is pulled and no ``docker build`` runs. Each image is then checked
(below); one that fails is removed and the script exits 1. OUT gets the tasks, in order, with
``image_name`` set and no ``snapshot_dir``: ``gym.make("AutoCompact-SWE-v0", task_source=OUT,
sandbox="docker")`` and ``ac-bench --source OUT --split all --sandbox docker`` run them. The
base image holds no other package: the tasks' tests must need only pytest and the standard
library, as mined tasks' tests do.

``check``: each task is graded in the docker sandbox, as the env grades an episode, with its
gold patch (it must resolve) and with an empty patch (it must not). Exit 1 if any fails.
Exit 2: the task file cannot be read, no Docker daemon answers, or (``build``) the base
image is missing.
"""

from __future__ import annotations

import argparse
import io
import sys
import tarfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

from ac_env.grading import grade
from ac_env.sandbox.base import SandboxError
from ac_env.sandbox.docker import BASE_IMAGE, DockerSandbox, missing_images
from ac_env.sandbox.docker.session import docker_client, remove_container
from ac_env.tasks import load_tasks
from ac_env.tasks.model import Task

REPOSITORY = "autocompact/swe-task"


def repo_tar(snapshot: Path, workdir: str) -> bytes:
    """``snapshot`` as a tar archive rooted at ``/``, placed at ``workdir``, owned by root (the
    sandbox's commands run as a root without capabilities: they could not write files of
    another owner), git hooks left out."""
    top = PurePosixPath(workdir).relative_to("/")

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        inside = PurePosixPath(info.name).relative_to(top).parts
        if inside[:2] == (".git", "hooks"):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for parent in reversed(top.parents[:-1]):
            directory = tarfile.TarInfo(str(parent))
            directory.type, directory.mode = tarfile.DIRTYPE, 0o755
            archive.addfile(directory)
        archive.add(str(snapshot), arcname=str(top), filter=owned_by_root)
    return buffer.getvalue()


def build_image(client: Any, task: Task, base_image: str, repository: str) -> str:
    """Commit an image holding ``task``'s snapshot at its workdir; the image's name."""
    if task.snapshot_dir is None:
        raise ValueError(f"task {task.instance_id} has no snapshot_dir to build an image from")
    if not (task.snapshot_dir / ".git").is_dir():
        raise ValueError(f"task {task.instance_id}: {task.snapshot_dir} is not a git repository")
    container = client.containers.create(base_image, network_mode="none")
    try:
        container.put_archive("/", repo_tar(task.snapshot_dir, task.workdir))
        container.commit(
            repository=repository,
            tag=task.instance_id,
            message=f"AutoCompact task {task.instance_id}",
            changes=[f"WORKDIR {task.workdir}"],
        )
    finally:
        remove_container(container)
    return f"{repository}:{task.instance_id}"


def check_instance(task: Task) -> str | None:
    """Why ``task`` (its image built) is not a valid instance, or None: the gold patch must
    resolve it and the empty patch must not."""
    for patch, expected in ((task.patch, True), ("", False)):
        result = grade(task, patch, DockerSandbox())
        if result.resolved is not expected:
            which = "gold" if patch else "empty"
            return f"the {which} patch gives resolved={result.resolved}: {result.reason}"
    return None


def build(tasks: list[Task], out: Path, base_image: str, repository: str) -> int:
    """Build and check an image per task, then write ``out``; the exit status."""
    import docker.errors

    client = docker_client()
    if missing_images(client, [base_image]):
        print(
            f"swebench_image: the base image {base_image!r} is not on the daemon (nothing is "
            "pulled): `bash scripts/docker_daemon.sh start` builds it",
            file=sys.stderr,
        )
        return 2
    rows = []
    for task in tasks:
        started = time.monotonic()
        try:
            image = build_image(client, task, base_image, repository)
        except (ValueError, docker.errors.DockerException) as error:
            print(f"swebench_image: {task.instance_id}: {error}", file=sys.stderr)
            return 1
        instance = task.model_copy(update={"image_name": image, "snapshot_dir": None})
        problem = check_instance(instance)
        if problem is not None:
            client.images.remove(image, force=True)
            print(f"swebench_image: {task.instance_id}: {problem}", file=sys.stderr)
            return 1
        print(f"{image}: built, gold resolves, empty does not ({time.monotonic() - started:.1f} s)")
        rows.append(instance.model_dump_json(exclude={"snapshot_dir"}))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"{row}\n" for row in rows))
    print(f"{len(rows)} task(s) in {out}")
    return 0


def check(tasks: list[Task]) -> int:
    """Check each task as an instance (its image, or its snapshot in the base image)."""
    failed = 0
    for task in tasks:
        started = time.monotonic()
        problem = check_instance(task)
        where = task.image_name or f"{task.snapshot_dir} in {BASE_IMAGE}"
        if problem is None:
            print(f"{task.instance_id} ({where}): gold resolves, empty does not", end="")
            print(f" ({time.monotonic() - started:.1f} s)")
        else:
            failed += 1
            print(f"{task.instance_id} ({where}): {problem}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("build", help="build an image per task, write OUT")
    make.add_argument("tasks_in", type=Path, help="task file whose tasks have snapshot_dir")
    make.add_argument("tasks_out", type=Path, help="task file to write (image_name set)")
    make.add_argument("--base-image", default=BASE_IMAGE)
    make.add_argument("--repository", default=REPOSITORY, help="images are REPOSITORY:<id>")
    verify = commands.add_parser("check", help="check a task file's instances in Docker")
    verify.add_argument("tasks_in", type=Path, help="task file (image_name or snapshot_dir)")
    for command in (make, verify):
        command.add_argument("--ids", nargs="+", default=None, help="only these task ids")
    args = parser.parse_args(argv)
    try:
        tasks = load_tasks(str(args.tasks_in), task_ids=args.ids)
        docker_client()
    except (ValueError, SandboxError) as error:
        print(f"swebench_image: {error}", file=sys.stderr)
        return 2
    if args.command == "check":
        return check(tasks)
    return build(tasks, args.tasks_out, args.base_image, args.repository)


if __name__ == "__main__":
    sys.exit(main())
