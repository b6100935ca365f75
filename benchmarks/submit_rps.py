"""Requests per second of crowd's answer path under gunicorn, against a bare Flask baseline.

    make bench            # or: .venv/bin/python benchmarks/submit_rps.py

In one run it measures, under the same gunicorn config (deploy/gunicorn.conf.py) and the
same worker and thread counts:

* bare Flask: one JSON POST endpoint (benchmarks/bare_flask.py), the ceiling of the setup;
* crowd on SQLite and crowd on PostgreSQL, with Redis (so each stored answer also enqueues
  its RQ job after the commit, as in production).

For crowd every client thread is a simulated worker (joined over HTTP before the clock
starts, with its first item already assigned) that answers boundary items of two
sentences: `next` gets the item, a "human" step at sentence 0 reveals sentence 1, and a
"machine" step at sentence 1 stores the answer. All three requests count as requests;
"answers/s" counts stored answers, and the store step's latency is shown on its own.

Only 127.0.0.1 is used. The script creates benchmarks/out/ (git-ignored), resets the
PostgreSQL database `bench` (never `test`) and flushes Redis database 14. Every process it
starts is stopped before it exits, also on errors and Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "benchmarks"
OUT_DIR = BENCH_DIR / "out"
RESULTS = BENCH_DIR / "RESULTS.md"
GUNICORN_CONF = ROOT / "deploy" / "gunicorn.conf.py"
COMMAND = ".venv/bin/python benchmarks/submit_rps.py"
START_MARK = "<!-- results:start -->"
END_MARK = "<!-- results:end -->"
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/bench"
DEFAULT_REDIS = "redis://127.0.0.1:6379/14"
# Databases this script must never reset: the test suite uses `test`.
PROTECTED_DATABASES = {"test", "postgres", "template0", "template1"}


# -- load generator (runs in child processes; it must not import crowd) -----------------------


class Client:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1 that reconnects after an error."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: http.client.HTTPConnection | None = None

    def post(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            self.conn.request(
                "POST", path, json.dumps(body), {"Content-Type": "application/json", **headers}
            )
            response = self.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        if response.getheader("Connection", "").lower() == "close":
            self.close()
        return response.status, json.loads(data) if data else None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass
class LoadResult:
    """Latencies in milliseconds per request kind, and what went wrong."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    answers: int = 0
    ran_out: int = 0
    started: float = 0.0
    finished: float = 0.0

    def add(self, kind: str, seconds: float) -> None:
        self.latencies.setdefault(kind, []).append(seconds * 1000)

    def error(self, message: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(message[:300])

    def merge(self, other: LoadResult) -> None:
        for kind, values in other.latencies.items():
            self.latencies.setdefault(kind, []).extend(values)
        self.errors += other.errors
        self.error_samples.extend(other.error_samples[: max(0, 5 - len(self.error_samples))])
        self.answers += other.answers
        self.ran_out += other.ran_out
        self.started = min(self.started, other.started) if self.started else other.started
        self.finished = max(self.finished, other.finished)

    @property
    def requests(self) -> int:
        return sum(len(values) for values in self.latencies.values())


@dataclass(frozen=True)
class LoadSpec:
    port: int
    mode: str  # "bare" or "submit"
    study_id: int
    tokens: tuple[str, ...]  # one worker token per thread ("submit"); empty strings for "bare"
    start_at: float  # wall-clock time.time() at which every thread starts
    duration: float
    max_requests: int


class Budget:
    """A request count shared by the threads of one process, so a run is bounded."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left <= 0:
                return False
            self.left -= 1
            return True


def _bare_loop(spec: LoadSpec, result: LoadResult, budget: Budget, deadline: float) -> None:
    client = Client(spec.port)
    body = {"step": 1, "choice": "machine"}
    try:
        while time.perf_counter() < deadline and budget.take():
            began = time.perf_counter()
            try:
                status, data = client.post("/submit", body, {})
            except (OSError, http.client.HTTPException, ValueError) as error:
                result.error(f"bare: {error!r}")
                continue
            result.add("submit", time.perf_counter() - began)
            if status != 200 or not data or not data.get("ok"):
                result.error(f"bare: HTTP {status} {data!r}")
    finally:
        client.close()


def _submit_loop(
    spec: LoadSpec, token: str, result: LoadResult, budget: Budget, deadline: float
) -> None:
    """Answer items one after the other as one worker: next, reveal step, store step."""
    client = Client(spec.port)
    headers = {"X-Crowd-Worker": token}

    def call(kind: str, path: str, body: dict[str, Any]) -> Any:
        began = time.perf_counter()
        try:
            status, data = client.post(path, body, headers)
        except (OSError, http.client.HTTPException, ValueError) as error:
            result.error(f"{kind}: {error!r}")
            return None
        result.add(kind, time.perf_counter() - began)
        if status != 200:
            result.error(f"{kind}: HTTP {status} {data!r}")
            return None
        return data

    try:
        while time.perf_counter() < deadline and budget.take():
            view = call("next", f"/api/work/studies/{spec.study_id}/next", {})
            if view is None:
                continue
            if view.get("done"):
                result.ran_out += 1
                return
            path = f"/api/work/assignments/{view['assignment_id']}/step"
            # A view left half-way by the warm-up resumes where it is: follow its step.
            while view is not None and "task" in view and not view.get("answered"):
                if time.perf_counter() >= deadline or not budget.take():
                    return
                step = view["task"]["step"]
                if step == 0:
                    view = call("reveal", path, {"step": 0, "choice": "human"})
                else:
                    view = call("store", path, {"step": step, "choice": "machine"})
                    if view is not None and view.get("answered"):
                        result.answers += 1
    finally:
        client.close()


def run_load(spec: LoadSpec) -> LoadResult:
    """Run one thread per token until the duration or the request budget is spent."""
    result = LoadResult()
    budget = Budget(spec.max_requests)
    # Every process starts on the same wall-clock instant, then times with perf_counter.
    time.sleep(max(0.0, spec.start_at - time.time()))
    start = time.perf_counter()
    deadline = start + spec.duration
    threads = []
    for token in spec.tokens:
        if spec.mode == "bare":
            target: Any = _bare_loop
            args: tuple[Any, ...] = (spec, result, budget, deadline)
        else:
            target, args = _submit_loop, (spec, token, result, budget, deadline)
        threads.append(threading.Thread(target=target, args=args, daemon=True))
    result.started = time.time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.finished = time.time()
    return result


def drive(
    pool: ProcessPoolExecutor,
    processes: int,
    port: int,
    mode: str,
    study_id: int,
    tokens: list[str],
    duration: float,
    max_requests: int,
) -> LoadResult:
    """Split the client threads over the processes of `pool` and merge their results."""
    start_at = time.time() + 0.5
    shares = [tokens[i::processes] for i in range(processes)]
    specs = [
        LoadSpec(port, mode, study_id, tuple(share), start_at, duration, max_requests // processes)
        for share in shares
        if share
    ]
    total = LoadResult()
    for part in pool.map(run_load, specs):
        total.merge(part)
    return total


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


def prepare_study(database_url: str, n_items: int) -> tuple[str, int]:
    """Migrate, then create an API key and a published boundary study; (key, study id)."""
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
            config: dict[str, Any] = {
                "annotations_per_item": 1,
                "attention_rate": 0.0,
                "require_explanation": False,
            }
            study = create_study(session, experimenter, "submit benchmark", "boundary", config)
            import_items(session, study, passages(n_items))
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


# -- reporting ------------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@dataclass
class Row:
    name: str
    result: LoadResult
    note: str = ""

    @property
    def elapsed(self) -> float:
        return max(1e-9, self.result.finished - self.result.started)

    def cells(self) -> list[str]:
        res = self.result
        every = [v for values in res.latencies.values() for v in values]
        store = res.latencies.get("store") or res.latencies.get("submit") or []
        answers = f"{res.answers / self.elapsed:.0f}" if "store" in res.latencies else "-"
        return [
            self.name,
            f"{res.requests / self.elapsed:.0f}",
            answers,
            f"{percentile(every, 0.5):.1f}",
            f"{percentile(every, 0.95):.1f}",
            f"{percentile(store, 0.5):.1f}",
            f"{percentile(store, 0.95):.1f}",
            str(res.errors),
            str(res.requests),
        ]


HEADER = [
    "target", "requests/s", "answers/s", "p50 ms", "p95 ms",
    "store p50 ms", "store p95 ms", "errors", "requests",
]  # fmt: skip


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text()
        match = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
        if match:
            return match.group(1).strip()
    return platform.processor() or "unknown CPU"


def results_block(rows: list[Row], facts: dict[str, str], args: argparse.Namespace) -> str:
    notes = [f"- {row.name}: {row.note}" for row in rows if row.note]
    lines = [
        START_MARK,
        f"Measured {facts['date']} with `make bench` (that is, `{COMMAND}`).",
        "",
        f"- Machine: {facts['cores']} cores ({facts['cpu']}), Linux, Python {facts['python']}; "
        f"load average 1/5/15 min at the start: {facts['load']}.",
        f"- Server: gunicorn with deploy/gunicorn.conf.py: {args.workers} workers x 4 threads "
        "(gthread), access log on, bound to 127.0.0.1.",
        f"- Load: {args.clients} client threads in {args.client_processes} processes on the same "
        f"machine, {args.duration:.0f} s per target after a {args.warmup:.0f} s warm-up, at most "
        f"{args.max_requests} requests per target.",
        f"- Stores: SQLite (WAL) file; PostgreSQL {facts['pg']} database `bench`; Redis "
        f"{facts['redis']} (db 14) takes the RQ job each answer enqueues after its commit "
        "(no queue worker runs during the benchmark).",
        "",
        table(rows),
        "",
        "requests/s counts every request; for crowd that is next + reveal step + store step "
        "per answer, so answers/s is about a third of it. p50/p95 cover every request; the "
        "store columns cover the step that stores the answer (the only request for bare Flask).",
        *([""] + notes if notes else []),
        END_MARK,
    ]
    return "\n".join(lines)


RESULTS_INTRO = """# Benchmark: answer submission under gunicorn

`benchmarks/submit_rps.py` measures requests per second and latency of crowd's answer path
(join once, then per item: `POST /api/work/studies/<id>/next`, a reveal step and the step
that stores the answer) under gunicorn, against a bare Flask endpoint
(`benchmarks/bare_flask.py`) under the same gunicorn settings, on SQLite and on PostgreSQL
with Redis. Run it with `make bench`. The block below is rewritten by each run; text
outside it is kept.

"""


def write_results(block: str) -> None:
    if RESULTS.exists():
        text = RESULTS.read_text()
        if START_MARK in text and END_MARK in text:
            head, rest = text.split(START_MARK, 1)
            tail = rest.split(END_MARK, 1)[1]
            RESULTS.write_text(head + block + tail)
            return
    RESULTS.write_text(RESULTS_INTRO + block + "\n")


# -- main ------------------------------------------------------------------------------------------


def bench_crowd(
    name: str,
    database_url: str,
    args: argparse.Namespace,
    pool: ProcessPoolExecutor,
    out: Path,
) -> Row:
    print(f"[{name}] preparing {args.items} items ...", flush=True)
    key, study_id = prepare_study(database_url, args.items)
    flush_redis(args.redis_url)
    env = server_env(
        args.workers,
        {
            "CROWD_DATA_DIR": str(out / "data"),
            "CROWD_DATABASE_URL": database_url,
            "CROWD_REDIS_URL": args.redis_url,
            "CROWD_SECRET_KEY": secrets.token_urlsafe(48),
        },
    )
    with gunicorn("crowd.wsgi:app", env, out / "gunicorn.log", "/healthz") as server:
        tokens = join_workers(server.port, key, study_id, args.clients)
        before = count_responses(database_url)
        if args.warmup > 0:
            drive(pool, args.client_processes, server.port, "submit", study_id, tokens,
                  args.warmup, args.max_requests)  # fmt: skip
        print(f"[{name}] measuring {args.duration:.0f} s ...", flush=True)
        warm = count_responses(database_url)
        result = drive(pool, args.client_processes, server.port, "submit", study_id, tokens,
                       args.duration, args.max_requests)  # fmt: skip
    stored = count_responses(database_url) - warm
    jobs = queued_jobs(args.redis_url)
    by_kind = ", ".join(
        f"{kind} {percentile(result.latencies.get(kind, []), 0.5):.0f}/"
        f"{percentile(result.latencies.get(kind, []), 0.95):.0f} ms"
        for kind in ("next", "reveal", "store")
    )
    note = (
        f"p50/p95 by request: {by_kind}; {stored} answers stored in the measured window "
        f"({warm - before} in the warm-up), {jobs} RQ jobs queued in all"
    )
    if result.ran_out:
        note += f"; {result.ran_out} workers ran out of items (raise --items)"
    if result.error_samples:
        note += "; first errors: " + " | ".join(result.error_samples[:3])
    print(f"[{name}] {note}", flush=True)
    return Row(name, result, note)


def bench_bare(args: argparse.Namespace, pool: ProcessPoolExecutor, out: Path) -> Row:
    env = server_env(args.workers, {})
    with gunicorn("bare_flask:app", env, out / "gunicorn.log", "/submit",
                  pythonpath=str(BENCH_DIR)) as server:  # fmt: skip
        tokens = [""] * args.clients
        if args.warmup > 0:
            drive(pool, args.client_processes, server.port, "bare", 0, tokens, args.warmup,
                  args.max_requests)  # fmt: skip
        print(f"[bare flask] measuring {args.duration:.0f} s ...", flush=True)
        result = drive(pool, args.client_processes, server.port, "bare", 0, tokens,
                       args.duration, args.max_requests)  # fmt: skip
    note = "first errors: " + " | ".join(result.error_samples[:3]) if result.errors else ""
    return Row("bare Flask", result, note)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from importlib import util

    spec = util.spec_from_file_location("gunicorn_conf", GUNICORN_CONF)
    default_workers = 3
    if spec and spec.loader:
        conf = util.module_from_spec(spec)
        spec.loader.exec_module(conf)
        default_workers = int(conf.default_workers())
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per target")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds first")
    parser.add_argument("--clients", type=int, default=16, help="client threads (sim workers)")
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument("--max-requests", type=int, default=200_000, help="per target")
    parser.add_argument("--items", type=int, default=20_000, help="passages in each study")
    parser.add_argument("--workers", type=int, default=default_workers, help="gunicorn workers")
    parser.add_argument("--pg-url", default=DEFAULT_PG)
    parser.add_argument("--redis-url", default=DEFAULT_REDIS)
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    if not args.redis_url.startswith("redis://127.0.0.1") and not args.redis_url.startswith(
        "redis://localhost"
    ):
        parser.error("--redis-url must point at 127.0.0.1: this script flushes it")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def on_term(_signum: int, _frame: Any) -> None:
        # Turn SIGTERM into an exception so that the finally blocks stop the servers.
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, on_term)
    shutil.rmtree(OUT_DIR, ignore_errors=True)
    OUT_DIR.mkdir(parents=True)
    facts = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": str(os.cpu_count()),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "redis": flush_redis(args.redis_url),
        "pg": "(skipped)",
        # Other work on the machine skews every row: record how busy it was at the start.
        "load": " / ".join(f"{v:.1f}" for v in os.getloadavg()),
    }
    rows: list[Row] = []
    # spawn: the clients must not inherit the parent's database connections.
    context = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(args.client_processes, mp_context=context) as pool:
            (OUT_DIR / "bare").mkdir()
            rows.append(bench_bare(args, pool, OUT_DIR / "bare"))
            if not args.skip_sqlite:
                out = OUT_DIR / "sqlite"
                out.mkdir()
                url = f"sqlite:///{out / 'crowd.db'}"
                rows.append(bench_crowd("crowd, SQLite", url, args, pool, out))
            if not args.skip_postgres:
                out = OUT_DIR / "postgres"
                out.mkdir()
                facts["pg"] = reset_postgres(args.pg_url)
                rows.append(bench_crowd("crowd, PostgreSQL", args.pg_url, args, pool, out))
    finally:
        # Leave db 14 empty; an error here must not hide the one that got us here.
        with contextlib.suppress(Exception):
            flush_redis(args.redis_url)
    print()
    print(table(rows))
    if not args.no_write:
        write_results(results_block(rows, facts, args))
        print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
