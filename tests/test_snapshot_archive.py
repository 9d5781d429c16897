"""Workspace archives are hostile input: ``restore`` of a crafted archive (or of one made by a
compromised container's own ``tar``) refuses every member that could write outside the
workspace, on both backends, before changing anything; ``snapshot`` stops at its cap."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from restore_cases import CASES, OUTSIDE, crafted
from sandbox_task import make_task

from ac_env.sandbox.archive_check import UnsafeArchiveError, check_archive
from ac_env.sandbox.base import SandboxError
from ac_env.sandbox.local import LocalSandbox
from ac_env.sandbox.workspace_archive import (
    SnapshotTooLargeError,
    pack_directories,
    relative_link,
)

try:
    from ac_env.sandbox.docker.session import docker_client

    docker_client()
    NO_DOCKER = None
except SandboxError as error:
    NO_DOCKER = str(error)

needs_docker = pytest.mark.skipif(NO_DOCKER is not None, reason=str(NO_DOCKER))
BACKENDS = ["local", pytest.param("docker", marks=needs_docker)]


@pytest.mark.parametrize("case", CASES)
def test_the_archive_check_names_the_refused_member(case):
    members, refused, reason = CASES[case]
    with pytest.raises(UnsafeArchiveError, match=reason) as raised:
        check_archive(crafted(members, "/var/lib/outside"))
    assert raised.value.member == refused.replace(OUTSIDE, "/var/lib/outside")


def test_the_archive_check_passes_what_snapshots_hold(tmp_path):
    repo, tmp = tmp_path / "repo", tmp_path / "tmp"
    (repo / "pkg").mkdir(parents=True)
    tmp.mkdir()
    (repo / "pkg" / "a.py").write_text("a = 1\n")
    os.link(repo / "pkg" / "a.py", repo / "hard.py")  # stored as a second copy
    os.mkfifo(repo / "fifo")  # left out
    (repo / "up").symlink_to("pkg/../pkg/a.py")
    (repo / "pkg" / "back").symlink_to("..")
    (repo / "pkg" / "dangling").symlink_to("missing/x")
    (tmp / "home").symlink_to(".")
    (tmp / "current").symlink_to("/tmp/home")  # into its own part's mount point
    archive = pack_directories({"repo": repo, "tmp": tmp}, {"repo": "/w", "tmp": "/tmp"}, 1 << 20)
    check_archive(archive)
    with tarfile.open(fileobj=io.BytesIO(archive)) as source:
        kinds = {m.name: m.type for m in source}
    assert kinds["repo/hard.py"] == tarfile.REGTYPE and "repo/fifo" not in kinds
    with tarfile.open(fileobj=io.BytesIO(archive)) as source:
        assert source.getmember("tmp/current").linkname == "home"


@pytest.mark.parametrize(
    ("name", "target", "mount", "stored"),
    [
        ("tmp/p/pytest-current", "/tmp/p/pytest-0", "/tmp", "pytest-0"),
        ("repo/a/abs.py", "/testbed/calc/ops.py", "/testbed", "../calc/ops.py"),
        ("repo/a.py", "/testbed/../etc/passwd", "/testbed", "/testbed/../etc/passwd"),
        ("repo/a.py", "/usr/bin/python3", "/testbed", "/usr/bin/python3"),
        ("repo/a.py", "rel/x", "/testbed", "rel/x"),
    ],
)
def test_absolute_links_into_their_own_part_are_stored_relative(name, target, mount, stored):
    assert relative_link(name, target, mount) == stored


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One started sandbox per backend (a refused restore changes nothing, so they are shared),
    each holding an edit that a refused restore must leave in place."""
    task = make_task(tmp_path_factory.mktemp("archive-task"))
    boxes: dict[str, Any] = {}
    yield {"task": task, "boxes": boxes}
    for box in boxes.values():
        box.close()


def sandbox(started: dict[str, Any], backend: str) -> Any:
    boxes = started["boxes"]
    if backend not in boxes:
        if backend == "docker":
            from ac_env.sandbox.docker import DockerSandbox

            boxes[backend] = DockerSandbox(max_snapshot_mb=16)
        else:
            boxes[backend] = LocalSandbox(isolation="none", max_snapshot_mb=16)
        boxes[backend].start(started["task"])
        boxes[backend].exec('echo edited >> calc/ops.py && echo kept > "$TMPDIR/kept"', 10, 1000)
    return boxes[backend]


def outside_of(box: Any, tmp_path: Path) -> str:
    """A directory outside the workspace, with a file ``victim`` in it."""
    if isinstance(box, LocalSandbox):
        (tmp_path / "victim").write_text("victim\n")
        return str(tmp_path)
    return "/opt/autocompact/base.git"


def listing(box: Any, outside: str) -> str:
    if isinstance(box, LocalSandbox):
        return repr(sorted((p.name, p.stat().st_nlink) for p in Path(outside).iterdir()))
    return box._helper(box._state, f"ls -lA {outside} /opt", {}, 1 << 16, "listing").decode()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_restore_refuses_a_crafted_archive_and_changes_nothing(started, backend, case, tmp_path):
    box = sandbox(started, backend)
    members, refused, reason = CASES[case]
    outside = outside_of(box, tmp_path)
    before, diff = listing(box, outside), box.diff()
    with pytest.raises(UnsafeArchiveError, match=reason) as raised:
        box.restore(crafted(members, outside))
    assert raised.value.member == refused.replace(OUTSIDE, outside)
    assert listing(box, outside) == before  # nothing written outside
    assert box.diff() == diff and "edited" in diff  # nor inside
    assert box.exec('cat "$TMPDIR/kept"', 10, 100).output == "kept\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_snapshot_stops_at_its_cap_on_sparse_files(started, backend):
    box = sandbox(started, backend)
    box.exec("truncate -s 100M sparse.bin", 10, 1000)  # no block on disk
    try:
        with pytest.raises(SnapshotTooLargeError, match="snapshot cap of 16777216") as raised:
            box.snapshot()
        if backend == "local":  # found before writing anything
            assert "the largest is repo/sparse.bin (104857600 bytes)" in str(raised.value)
        assert box.exec("echo alive", 10, 100).output == "alive\n"
    finally:
        box.exec("rm sparse.bin", 10, 1000)
    assert box.snapshot()  # under the cap again


@needs_docker
def test_a_compromised_containers_snapshot_is_refused_by_both_backends(started, tmp_path):
    """The agent, root in its container, replaces ``tar``: the snapshot holds what it wrote."""
    box = sandbox(started, "docker")
    fake_tar = (
        "#!/bin/sh\nexec python3 -c 'import io, sys, tarfile\n"
        'out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")\n'
        'link = tarfile.TarInfo("./escape"); link.type = tarfile.SYMTYPE\n'
        'link.linkname = "/opt/autocompact/base.git"; out.addfile(link)\n'
        "out.close()'\n"
    )
    box.write_file("fake-tar", fake_tar.encode())
    box.exec("install -m 755 fake-tar /usr/local/bin/tar && rm fake-tar", 10, 1000)
    try:
        archive = box.snapshot()
    finally:
        box.exec("rm /usr/local/bin/tar", 10, 1000)
    with LocalSandbox(isolation="none") as local:
        local.start(started["task"])
        for target in (local, box):
            with pytest.raises(UnsafeArchiveError, match="symbolic link to the absolute"):
                target.restore(archive)


@pytest.mark.parametrize("backend", BACKENDS)
def test_links_pytest_writes_in_tmp_survive_a_snapshot(tmp_path, backend):
    """pytest's ``tmp_path`` leaves ``/tmp/pytest-of-USER/pytest-current``, an absolute link
    into /tmp: a snapshot after any test run holds one, and must restore."""
    from ac_env.sandbox.docker import DockerSandbox

    task = make_task(tmp_path / "task")
    make = "mkdir -p /tmp/p/x0 && echo t > /tmp/p/x0/f && ln -s /tmp/p/x0 /tmp/p/x-current"
    make += ' && ln -s "$PWD/calc/ops.py" abs.py'
    with DockerSandbox() if backend == "docker" else LocalSandbox() as box:
        box.start(task)
        assert box.exec(make, 10, 1000).exit_code == 0
        archive = box.snapshot()
        box.exec("rm -rf /tmp/p abs.py", 10, 1000)
        box.restore(archive)
        shown = box.exec("cat /tmp/p/x-current/f; readlink abs.py; head -c 3 abs.py", 10, 1000)
        assert shown.output == "t\ncalc/ops.py\n" + box.read_file("calc/ops.py").decode()[:3]


@needs_docker
def test_a_snapshot_restores_in_the_other_backend(started):
    """The same rules pass what either backend's snapshot holds: links inside, hard links
    (stored as files), an untracked file, /tmp."""
    make = "ln -s calc/ops.py link.py && ln calc/ops.py hard.py && echo new > new.txt"
    make += ' && echo t > "$TMPDIR/t"'
    local, docker = sandbox(started, "local"), sandbox(started, "docker")
    for source, target in ((local, docker), (docker, local)):
        archive_before = source.snapshot()
        source.exec(make, 10, 1000)
        target.restore(source.snapshot())
        assert target.diff() == source.diff() and "new.txt" in target.diff()
        assert (
            target.exec('readlink link.py; cat "$TMPDIR/t"', 10, 100).output == "calc/ops.py\nt\n"
        )
        source.restore(archive_before)
