"""What benchmarks/submit_rps.py sets up: gunicorn servers, the crowd database and study,
the joined workers, and Redis."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rps_load import Client

ROOT = Path(__file__).resolve().parents[1]
GUNICORN_CONF = ROOT / "deploy" / "gunicorn.conf.py"
# Databases this script must never reset: the test suite uses `test`.
PROTECTED_DATABASES = {"test", "postgres", "template0", "template1"}


# -- servers -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def gunicorn_command() -> list[str]:
    script = Path(sys.executable).parent / "gunicorn"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gunicorn"]


class Gunicorn:
    """A gunicorn master in its own process group, always stopped by stop()."""

    def __init__(self, app: str, env: dict[str, str], log_path: Path, pythonpath: str | None):
        self.port = free_port()
        # --bind overrides the config's 0.0.0.0: the benchmark stays on the loopback.
        bind = f"127.0.0.1:{self.port}"
        command = [*gunicorn_command(), "-c", str(GUNICORN_CONF), "--bind", bind]
        if pythonpath:
            command += ["--pythonpath", pythonpath]
        command.append(app)
        self.log_path = log_path
        self.log = open(log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, path: str, timeout: float = 60.0) -> None:
        """Wait until a request is answered (any status) and every worker has booted."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited early: see {self.log_path}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", path)
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"gunicorn did not answer within {timeout:.0f}s: see {self.log_path}")

    def stop(self) -> None:
        if self.process.poll() is None:
            # SIGTERM is gunicorn's graceful stop; the group kill covers a stuck worker.
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=40)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self.log.close()


@contextlib.contextmanager
def gunicorn(
    app: str, env: dict[str, str], log_path: Path, ready_path: str, pythonpath: str | None = None
) -> Iterator[Gunicorn]:
    server = Gunicorn(app, env, log_path, pythonpath)
    try:
        server.wait_ready(ready_path)
        yield server
    finally:
        server.stop()


def server_env(workers: int, extra: dict[str, str]) -> dict[str, str]:
    """The parent's environment without CROWD_* (so nothing leaks in), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROWD_")}
    env.update(WEB_CONCURRENCY=str(workers), PYTHONUNBUFFERED="1", **extra)
    env.pop("PORT", None)
    return env


# -- the crowd side: database, study, workers ----------------------------------------------------


def passages(n: int) -> list[dict[str, Any]]:
    """Two-sentence passages whose boundary is 1: the first "machine" step stores the answer."""
    return [
        {
            "id": f"b{i:06d}",
            "sentences": [f"Passage {i} begins like a person wrote it.", f"Passage {i} ends."],
            "boundary": 1,
        }
        for i in range(n)
    ]


def reset_postgres(url: str) -> str:
    """Create the database of `url` when missing and empty its public schema; its version."""
    import psycopg
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    name = parsed.database or ""
    if name in PROTECTED_DATABASES:
        raise SystemExit(f"refusing to reset PostgreSQL database {name!r}: use one for benchmarks")
    admin = parsed.set(drivername="postgresql", database="postgres")
    dsn = admin.render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
        row = conn.execute("SHOW server_version").fetchone()
    version = str(row[0]) if row else "?"
    db_dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return version


def prepare_study(
    database_url: str,
    n_items: int,
    config: dict[str, Any] | None = None,
    extra: list[dict[str, Any]] | None = None,
) -> tuple[str, int]:
    """Migrate, then create an API key and a published boundary study of n_items passages
    (and `extra` items), with `config` or the one below; (key, study id)."""
    from crowd.accounts import authenticate, create_api_key
    from crowd.platforms.publishing import open_study
    from crowd.storage import Database
    from crowd.studies.lifecycle import create_study, import_items
    from tasks import load_builtin

    load_builtin()
    db = Database(database_url)
    try:
        db.upgrade()
        with db.session() as session:
            key = create_api_key(session, "bench")
            experimenter = authenticate(session, key)
            # One answer per item, no attention checks, no explanation step: each item is
            # exactly next + reveal + store.
            config = config or {
                "annotations_per_item": 1,
                "attention_rate": 0.0,
                "require_explanation": False,
            }
            study = create_study(session, experimenter, "benchmark", "boundary", config)
            import_items(session, study, passages(n_items) + (extra or []))
            open_study(session, study, ["sim"])
            return key, study.id
    finally:
        db.dispose()


def count_responses(database_url: str) -> int:
    from sqlalchemy import func, select

    from crowd.storage import Database, Response

    db = Database(database_url)
    try:
        with db.session() as session:
            return session.scalar(select(func.count(Response.id))) or 0
    finally:
        db.dispose()


def join_workers(port: int, key: str, study_id: int, n: int) -> list[str]:
    """Join n sim workers over HTTP and give each its first assignment; their tokens."""
    client = Client(port)
    tokens = []
    try:
        for i in range(n):
            body = {"provider": "sim", "external_id": f"bench-{i:03d}"}
            status, data = client.post("/api/work/join", body, {"Authorization": f"Bearer {key}"})
            if status != 201:
                raise RuntimeError(f"join failed: HTTP {status} {data!r}")
            token = data["worker_token"]
            status, data = client.post(
                f"/api/work/studies/{study_id}/next", {}, {"X-Crowd-Worker": token}
            )
            if status != 200 or "assignment_id" not in data:
                raise RuntimeError(f"first assignment failed: HTTP {status} {data!r}")
            tokens.append(token)
    finally:
        client.close()
    return tokens


def queued_jobs(redis_url: str) -> int:
    import redis

    from crowd.queue import EVENTS, job_queue

    connection = redis.Redis.from_url(redis_url)
    try:
        return len(job_queue(EVENTS, connection))
    finally:
        connection.close()


def flush_redis(redis_url: str) -> str:
    import redis

    connection = redis.Redis.from_url(redis_url, socket_connect_timeout=2)
    try:
        connection.flushdb()
        info: dict[str, Any] = connection.info("server")
        return str(info.get("redis_version", "?"))
    finally:
        connection.close()
