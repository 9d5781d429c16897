"""``scripts/docker_daemon.sh start`` from nothing: a daemon of its own (own state directory and
image tags, beside any daemon already running) that builds the base image with debootstrap,
tags it once it runs pytest, leaves no partial file, is reused by a second ``start`` and ends
with ``stop``. Then the ways a first start failed, with a stand-in debootstrap that unpacks the
rootfs the real one built: a process left writing in the rootfs, stale partial files, a failed
first attempt, an image that cannot run pytest (never tagged)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "scripts" / "docker_daemon.sh"
MISSING = [p for p in ("dockerd", "docker", "debootstrap") if shutil.which(p) is None]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the script runs dockerd and debootstrap as root"),
    pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}"),
]

FAKE_DEBOOTSTRAP = """#!/bin/bash
# debootstrap's stand-in: unpack $SOURCE_TAR into the target (the 4th argument), then misbehave.
set -eu
target="$4"
count=$(( $(cat "$COUNTER" 2>/dev/null || echo 0) + 1 ))
echo "$count" > "$COUNTER"
if [[ "$MODE" == fail-once && "$count" == 1 ]]; then echo "mirror unreachable" >&2; exit 1; fi
mkdir -p "$target"
tar --numeric-owner -C "$target" -xf "$SOURCE_TAR"
case "$MODE" in
  leftover)  # a process left in the rootfs, changing its top directory for two seconds
    setsid chroot "$target" /bin/sh -c \\
      'i=0; while [ $i -lt 40 ]; do touch /.busy; rm -f /.busy; sleep 0.05; i=$((i+1)); done' \\
      </dev/null >/dev/null 2>&1 &
    ;;
  no-pytest)
    rm -rf "$target"/usr/lib/python3/dist-packages/{pytest,_pytest}
    ;;
esac
"""


@dataclass
class Daemon:
    state: Path
    env: dict[str, str]
    socket: str

    def script(self, command: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), command],
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=900,
        )

    def docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker", "-H", self.socket, *args], capture_output=True, text=True, timeout=120
        )


@pytest.fixture(scope="module")
def cold(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Daemon, subprocess.CompletedProcess[str], str]]:
    """A real cold start in a fresh state directory; stopped and removed at the end."""
    state = tmp_path_factory.mktemp("dd") / "state"  # short: the socket path has a limit
    image = f"autocompact/base-coldstart:{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "AUTOCOMPACT_DOCKER_DIR": str(state), "AUTOCOMPACT_BASE_IMAGE": image}
    daemon = Daemon(state, env, f"unix://{state}/docker.sock")
    try:
        yield daemon, daemon.script("start"), image
    finally:
        pid_file = state / "dockerd.pid"
        pid = pid_file.read_text().strip() if pid_file.exists() else ""
        stopped = daemon.script("stop")
        shutil.rmtree(state, ignore_errors=True)
        assert stopped.returncode == 0, stopped.stderr
        assert not (pid and Path(f"/proc/{pid}").exists()), "dockerd outlived stop"


def test_a_cold_start_builds_the_image_once(cold):
    daemon, first, image = cold
    assert first.returncode == 0, first.stderr
    assert first.stdout == f"export DOCKER_HOST={daemon.socket}\n"
    assert f"image {image} built" in first.stderr
    assert not [p.name for p in daemon.state.iterdir() if "partial" in p.name]
    smoke = daemon.docker("run", "--rm", "--network", "none", image, "git", "--version")
    assert smoke.returncode == 0 and smoke.stdout.startswith("git version"), smoke.stderr
    again = daemon.script("start")
    assert again.returncode == 0, again.stderr
    assert "reusing dockerd" in again.stderr and f"image {image} present" in again.stderr


@pytest.fixture
def stand_in(cold, tmp_path: Path) -> tuple[Daemon, dict[str, str]]:
    """The cold start's rootfs tarball moved aside as the stand-in debootstrap's source."""
    daemon, first, _image = cold
    assert first.returncode == 0, first.stderr
    source = daemon.state.parent / "source-rootfs.tar"
    if not source.exists():
        shutil.copyfile(daemon.state / "base-rootfs.tar", source)
    (daemon.state / "base-rootfs.tar").unlink(missing_ok=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "debootstrap").write_text(FAKE_DEBOOTSTRAP)
    (bin_dir / "debootstrap").chmod(0o755)
    extra = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SOURCE_TAR": str(source),
        "COUNTER": str(tmp_path / "count"),
        "AUTOCOMPACT_BASE_IMAGE": f"autocompact/base-coldstart:{uuid.uuid4().hex[:8]}",
    }
    return daemon, extra


def test_a_process_left_in_the_rootfs_and_stale_partials_do_not_break_the_build(stand_in):
    daemon, extra = stand_in
    (daemon.state / "rootfs.partial" / "usr").mkdir(parents=True)
    (daemon.state / "base-rootfs.tar.partial").write_bytes(b"half a tarball")
    with open(extra["SOURCE_TAR"], "rb") as source:
        (daemon.state / "base-rootfs.tar").write_bytes(source.read(8 << 20))  # cut short
    started = daemon.script("start", MODE="leftover", **extra)
    assert started.returncode == 0, started.stderr
    assert "base-rootfs.tar is incomplete" in started.stderr
    assert daemon.docker("image", "inspect", extra["AUTOCOMPACT_BASE_IMAGE"]).returncode == 0
    assert not [p.name for p in daemon.state.iterdir() if "partial" in p.name]


def test_a_failed_first_build_is_retried_once(stand_in):
    daemon, extra = stand_in
    started = daemon.script("start", MODE="fail-once", **extra)
    assert started.returncode == 0, started.stderr
    assert "trying once more from scratch" in started.stderr
    assert Path(extra["COUNTER"]).read_text().strip() == "2"


def test_an_image_that_cannot_run_pytest_is_never_tagged(stand_in):
    daemon, extra = stand_in
    dangling = daemon.docker("images", "-q", "--filter", "dangling=true").stdout
    started = daemon.script("start", MODE="no-pytest", **extra)
    assert started.returncode == 1 and "could not build image" in started.stderr
    assert "cannot run python3 -m pytest" in started.stderr
    assert daemon.docker("image", "inspect", extra["AUTOCOMPACT_BASE_IMAGE"]).returncode != 0
    assert daemon.docker("images", "-q", "--filter", "dangling=true").stdout == dangling
    assert not (daemon.state / "base-rootfs.tar").exists()
