"""Commands that try to break out of the sandbox, on every isolating backend (bubblewrap and
Docker). Each test fails if the sandbox leaks; what is checked is checked from the host."""

from __future__ import annotations

import hashlib
import resource
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sandbox_task import make_task, processes_mentioning

from ac_env.grading import grade
from ac_env.sandbox.base import Sandbox, SandboxError
from ac_env.sandbox.local import LocalSandbox
from ac_env.sandbox.process import KILLED_EXIT_CODE
from ac_env.tasks.model import Task

PROJECT = Path(__file__).resolve().parent.parent
BoxFactory = Callable[..., Sandbox]


def docker_skip_reason() -> str | None:
    try:
        from ac_env.sandbox.docker.session import docker_client

        docker_client()
    except SandboxError as error:
        return str(error)
    return None


def _backend_params() -> list[object]:
    bwrap_missing = shutil.which("bwrap") is None
    docker_reason = docker_skip_reason()
    return [
        pytest.param("bwrap", marks=pytest.mark.skipif(bwrap_missing, reason="bwrap missing")),
        pytest.param(
            "docker",
            marks=pytest.mark.skipif(docker_reason is not None, reason=str(docker_reason)),
        ),
    ]


BACKENDS = _backend_params()


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path, hidden_test=True)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_box(backend: str, task: Task) -> Iterator[BoxFactory]:
    """Starts sandboxes of the backend on the task (limits as keyword arguments)."""
    boxes: list[Sandbox] = []

    def make(**limits: int) -> Sandbox:
        box: Sandbox
        if backend == "docker":
            from ac_env.sandbox.docker import DockerSandbox

            box = DockerSandbox(**limits)
        else:
            box = LocalSandbox(isolation="bwrap", **limits)
        boxes.append(box)
        box.start(task)
        return box

    yield make
    for box in boxes:
        box.close()


@pytest.fixture
def box(make_box: BoxFactory) -> Sandbox:
    return make_box()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_writes_outside_the_workspace_never_reach_the_host(box: Sandbox, backend: str):
    marker = f"autocompact-escape-{uuid.uuid4().hex}"
    home, venv = Path.home(), PROJECT / ".venv"
    pyvenv = venv / "pyvenv.cfg"
    before = file_digest(pyvenv) if pyvenv.exists() else None
    result = box.exec(
        f"for p in /{marker} /usr/{marker} /etc/{marker} /dev/{marker} {home}/{marker}"
        f" {venv}/{marker}; do touch $p 2>/dev/null && echo wrote $p; done;"
        f" {{ echo x >> {pyvenv}; }} 2>/dev/null && echo wrote pyvenv;"
        f" {{ echo x > /etc/passwd; }} 2>/dev/null && echo wrote passwd;"
        f" touch /tmp/{marker} && echo own-tmp",
        10,
        10_000,
    )
    assert result.output.endswith("own-tmp\n")
    if backend == "bwrap":
        assert result.output == "own-tmp\n"
    for path in (Path(f"/{marker}"), Path(f"/tmp/{marker}"), home / marker, venv / marker):
        assert not path.exists(), path
    assert not Path(f"/usr/{marker}").exists() and not Path(f"/etc/{marker}").exists()
    assert (file_digest(pyvenv) if pyvenv.exists() else None) == before


def test_host_secrets_are_unreadable(box: Sandbox, backend: str):
    secret_text = f"hunter2-{uuid.uuid4().hex}"
    planted = [Path(f"/tmp/secret-{uuid.uuid4().hex}"), Path.home() / f".secret-{uuid.uuid4().hex}"]
    for path in planted:
        path.write_text(secret_text)
        path.chmod(0o644)
    try:
        result = box.exec(
            f"cat {planted[0]} {planted[1]} {Path.home()}/.bashrc 2>&1;"
            f" ls {PROJECT} {Path.home()} 2>&1; ls /tmp; cat /etc/shadow 2>&1;"
            f" grep -rs {secret_text} /tmp /root /home 2>/dev/null; echo done",
            20,
            100_000,
        )
    finally:
        for path in planted:
            path.unlink()
    assert secret_text not in result.output and result.output.endswith("done\n")
    assert f"{planted[0]}: No such file or directory" in result.output
    assert f"{planted[1]}: No such file or directory" in result.output
    assert f"{PROJECT}': No such file or directory" in result.output
    if backend == "bwrap":
        assert result.output.count("No such file or directory") == 6


def test_network_is_unreachable(box: Sandbox):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # reachable from host
        probe = (
            "import socket\n"
            "for target in (('example.com', 80), ('127.0.0.1', PORT)):\n"
            "    try:\n"
            "        socket.create_connection(target, timeout=2)\n"
            "        print('reached', target)\n"
            "    except OSError as err:\n"
            "        print('blocked', type(err).__name__)\n"
        ).replace("PORT", str(port))
        box.write_file("probe.py", probe.encode())
        result = box.exec("python3 probe.py", 20, 1000)
    assert result.output == "blocked gaierror\nblocked ConnectionRefusedError\n"


def test_host_address_is_unreachable(box: Sandbox):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        try:
            udp.connect(("192.0.2.1", 9))  # no packet is sent: picks the outgoing address
            address = udp.getsockname()[0]
        except OSError:
            pytest.skip("the host has no outgoing IPv4 address")
    with socket.create_server((address, 0)) as server:
        port = server.getsockname()[1]
        result = box.exec(
            f"python3 -c \"import socket; socket.create_connection(('{address}', {port}), 2)\""
            " 2>&1 | tail -1",
            20,
            1000,
        )
    assert "Error" in result.output and "reached" not in result.output


def test_fork_bomb_is_bounded_and_the_sandbox_survives(make_box: BoxFactory):
    box = make_box(max_processes=32)
    marker = f"bomb{uuid.uuid4().hex[:12]}"
    result = box.exec(f"{marker}() {{ {marker} | {marker} & }}; {marker}; sleep 2", 4, 4000)
    assert "Resource temporarily unavailable" in result.output
    assert processes_mentioning(marker) == []
    assert box.exec("echo alive", 10, 100).output == "alive\n"


def test_runaway_memory_is_bounded_and_the_sandbox_survives(make_box: BoxFactory):
    box = make_box(memory_limit_mb=256)
    small = box.exec("python3 -c 'b = bytearray(64 << 20); print(len(b))'", 20, 1000)
    hog = box.exec("python3 -c 'b = bytearray(1 << 30)'", 20, 1000)
    assert small.output == f"{64 << 20}\n"
    assert hog.exit_code == 1 and "MemoryError" in hog.output
    growing = box.exec(
        "python3 -c 'chunks = []\nwhile True: chunks.append(bytearray(16 << 20))'", 30, 1000
    )
    assert growing.exit_code != 0 and not growing.timed_out
    assert box.exec("echo alive", 10, 100).output == "alive\n"


def test_infinite_loop_is_killed_at_the_timeout(box: Sandbox):
    marker = f"loop{uuid.uuid4().hex[:12]}"
    result = box.exec(f"echo started; {marker}() {{ while :; do :; done; }}; {marker}", 1, 1000)
    assert result.timed_out and result.exit_code == KILLED_EXIT_CODE
    assert result.output == "started\n" and result.duration_s < 5
    assert box.exec("echo alive", 10, 100).output == "alive\n"


def test_timeout_kills_a_command_that_ignores_sigterm(box: Sandbox):
    marker = f"1000.{uuid.uuid4().int % 10**6}"
    result = box.exec(f"trap '' TERM; echo started; sleep {marker}", 1, 1000)
    assert result.timed_out and result.exit_code == KILLED_EXIT_CODE
    assert result.output == "started\n" and result.duration_s < 5
    assert processes_mentioning(f"sleep {marker}") == []


def test_background_processes_do_not_outlive_the_command(box: Sandbox):
    marker = f"2000.{uuid.uuid4().int % 10**6}"
    command = (
        f"nohup sleep {marker} >/dev/null 2>&1 & setsid sleep {marker} & "
        f"(trap '' TERM HUP; sleep {marker}) & echo spawned"
    )
    result = box.exec(command, 10, 1000)
    assert result.output == "spawned\n" and result.duration_s < 5
    assert processes_mentioning(f"sleep {marker}") == []


def test_a_detached_writer_stops_writing(box: Sandbox):
    box.exec(
        "setsid nohup bash -c 'while :; do date +%s%N > heartbeat; sleep 0.05; done'"
        " >/dev/null 2>&1 & sleep 0.3; echo started",
        10,
        1000,
    )
    first = box.read_file("heartbeat")
    time.sleep(0.5)
    assert box.read_file("heartbeat") == first


@pytest.mark.slow
def test_gigabytes_of_output_are_capped_with_bounded_host_memory(box: Sandbox):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = box.exec("echo first; yes | head -c 2000000000; echo last", 120, 10_000)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.truncated and result.exit_code == 0 and not result.timed_out
    assert result.output.startswith("first\ny\ny\n") and result.output.endswith("y\nlast\n")
    total = len("first\n") + 2_000_000_000 + len("last\n")
    assert f"{total - 10_000} bytes omitted" in result.output
    assert len(result.output) < 10_200
    assert grown_mb < 100


def test_undecodable_bytes_become_replacement_characters(box: Sandbox):
    result = box.exec(r"printf 'a\xff\xfeb\n'; head -c 3000 /dev/urandom >/dev/null", 10, 1000)
    assert result.output == "a\ufffd\ufffdb\n"
    binary = box.exec("head -c 100000 /dev/urandom", 10, 1000)
    assert binary.truncated and "bytes omitted" in binary.output


def test_no_future_commit_is_reachable(box: Sandbox):
    result = box.exec(
        "git log --all --oneline | wc -l; git reflog --format=%H | sort -u | wc -l;"
        " git stash list | wc -l;"
        " cat .git/packed-refs 2>/dev/null | grep -vc '^#';"
        " git fsck --lost-found 2>&1 | grep -c dangling; git rev-list --all --objects"
        " --reflog | wc -l",
        20,
        10_000,
    )
    log, reflog, stash, packed, dangling, objects = result.output.split("\n")[:6]
    assert (log, stash, packed, dangling, objects) == ("1", "0", "0", "0", "7"), result.output
    assert reflog in ("0", "1")


def test_editing_the_tests_does_not_pass_grading(
    box: Sandbox, make_box: BoxFactory, backend: str, task: Task
):
    box.exec(
        "printf 'def test_add():\\n    pass\\n\\ndef test_mul():\\n    pass\\n' > tests/test_ops.py"
        " && printf 'import pytest\\n@pytest.fixture(autouse=True)\\ndef f(): pass\\n'"
        " > conftest.py && mkdir -p tests && cp tests/test_ops.py tests/test_hidden.py",
        10,
        1000,
    )
    cheat = box.diff()
    assert "tests/test_ops.py" in cheat and "conftest.py" in cheat

    def fresh() -> Sandbox:
        if backend == "docker":
            from ac_env.sandbox.docker import DockerSandbox

            return DockerSandbox()
        return LocalSandbox()

    cheated = grade(task, cheat, fresh(), timeout_s=60)
    assert cheated.reward == 0.0 and cheated.patch_applied
    assert cheated.fail_to_pass.failed == task.FAIL_TO_PASS
    assert "conftest.py" in (cheated.tampered or "")
    # a planted conftest is tampering even beside a real fix; edited tests are only ignored
    box.exec("rm conftest.py && sed -i 's/a - b/a + b/' calc/ops.py", 10, 1000)
    fixed = grade(task, box.diff(), fresh(), timeout_s=60)
    assert fixed.reward == 1.0, fixed.reason
