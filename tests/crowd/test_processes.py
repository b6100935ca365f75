"""`crowd serve`, `crowd worker` and `crowd demo` stop every process they started (the
embedded Redis) on any exit: SIGTERM, SIGINT, and SIGKILL too (the kernel stops it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import SECRET, free_port

CROWD = str(Path(sys.executable).with_name("crowd"))


def children(pid: int) -> list[int]:
    """The pids of the processes whose parent is `pid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def redis_child(pid: int) -> int | None:
    """The child of `pid` that runs redis-server, once it does: between fork and exec a new
    child still shows its parent's command line."""
    for child in children(pid):
        try:
            if "redis-server" in Path(f"/proc/{child}/cmdline").read_text():
                return child
        except OSError:
            continue
    return None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(check: Callable[[], object], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} within {seconds:.0f} s")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A user's machine: no CROWD_REDIS_URL, so the commands start an embedded Redis."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CROWD_")}
    # PYTHONFAULTHANDLER: a command that hangs is sent SIGABRT (`exits`), which then prints
    # every thread's stack to its log.
    return {**clean, "CROWD_DATA_DIR": str(tmp_path / "data"), "CROWD_SECRET_KEY": SECRET,
            "PYTHONFAULTHANDLER": "1"}  # fmt: skip


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def exits(process: subprocess.Popen[bytes], seconds: float, log: Path) -> None:
    """Wait for `process` to end; past `seconds`, fail with its log and every thread's stack
    (SIGABRT to Python's fault handler), so a rare hang can be read rather than guessed at."""
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        process.wait(30)
        pytest.fail(f"still running {seconds:.0f} s after the signal; its log and stacks:\n"
                    + log.read_text(errors="replace")[-20000:])  # fmt: skip


def _default_signals() -> None:
    """The stop signals as a terminal gives them: a suite started in the background (`&`)
    has SIGINT ignored, which the command would inherit, and Ctrl-C would do nothing."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def run(args: list[str], env: dict[str, str], tmp_path: Path,
        started: list[subprocess.Popen[bytes]]) -> tuple[subprocess.Popen[bytes], int]:  # fmt: skip
    """Start `crowd ARGS` and wait for its embedded Redis; returns it and Redis's pid."""
    log = (tmp_path / f"{args[0]}.log").open("wb")
    process = subprocess.Popen([CROWD, *args], env=env, stdout=log, stderr=log,
                               preexec_fn=_default_signals)  # fmt: skip
    started.append(process)
    wait_for(lambda: redis_child(process.pid) or process.poll() is not None, 90,
             f"crowd {args[0]} starting its embedded Redis")  # fmt: skip
    assert process.poll() is None, (tmp_path / f"{args[0]}.log").read_text()
    redis_pid = redis_child(process.pid)
    assert redis_pid is not None and children(process.pid) == [redis_pid]
    return process, redis_pid


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_serve_stops_its_redis_on_a_signal(
    stop: signal.Signals, env: dict[str, str], tmp_path: Path,
    started: list[subprocess.Popen[bytes]],
) -> None:  # fmt: skip
    port = free_port()
    process, redis_pid = run(["serve", "--port", str(port)], env, tmp_path, started)

    def serving() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/play", timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    wait_for(serving, 60, "crowd serve answering")
    process.send_signal(stop)
    exits(process, 30, tmp_path / "serve.log")
    wait_for(lambda: not alive(redis_pid), 10, "the embedded Redis stopping")
    assert not (tmp_path / "data" / "redis" / "redis.sock").exists()


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["worker"], ["demo"]])
def test_a_killed_command_takes_its_redis_with_it(
    command: list[str], env: dict[str, str], tmp_path: Path,
    started: list[subprocess.Popen[bytes]],
) -> None:  # fmt: skip
    process, redis_pid = run(command, env, tmp_path, started)
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    wait_for(lambda: not alive(redis_pid), 10, "the embedded Redis stopping with its owner")


@pytest.mark.parametrize("command", [["worker"], ["demo"]])
def test_worker_and_demo_stop_their_redis_on_sigterm(
    command: list[str], env: dict[str, str], tmp_path: Path,
    started: list[subprocess.Popen[bytes]],
) -> None:  # fmt: skip
    process, redis_pid = run(command, env, tmp_path, started)
    time.sleep(1)  # mid-run
    process.send_signal(signal.SIGTERM)
    exits(process, 60, tmp_path / f"{command[0]}.log")
    wait_for(lambda: not alive(redis_pid), 10, "the embedded Redis stopping")
    data = tmp_path / "data" / ("demo" if command == ["demo"] else "")
    assert not (data / "redis" / "redis.sock").exists()
