"""Requests per second of crowd's answer path under gunicorn, against a bare Flask baseline.

    make bench            # or: .venv/bin/python benchmarks/submit_rps.py

In one run it measures, under the same gunicorn config (deploy/gunicorn.conf.py) and the
same worker and thread counts:

* bare Flask: one JSON POST endpoint (benchmarks/bare_flask.py), the ceiling of the setup;
* on SQLite and on PostgreSQL, interleaved over --rounds rounds: crowd, with Redis (so each
  stored answer also enqueues its RQ job after the commit, as in production), and the floor
  (benchmarks/floor_app.py): the same three requests with the minimal honest work (locks,
  the response, the assignment's state and the outbox row in one transaction) over crowd's
  tables and engine settings. The target is crowd at 0.5x the floor's requests/s or more.

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
import multiprocessing
import os
import platform
import secrets
import shutil
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "benchmarks"
OUT_DIR = BENCH_DIR / "out"
# The parts live beside this script (rps_*.py); it is run as a file, so make them importable
# however it is started. The client processes get the same sys.path.
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from rps_load import drive  # noqa: E402
from rps_report import (  # noqa: E402
    RESULTS,
    Row,
    cpu_model,
    percentile,
    results_block,
    table,
    write_results,
)
from rps_servers import (  # noqa: E402
    GUNICORN_CONF,
    count_responses,
    flush_redis,
    gunicorn,
    join_workers,
    prepare_study,
    queued_jobs,
    reset_postgres,
    server_env,
)

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/bench"
DEFAULT_REDIS = "redis://127.0.0.1:6379/14"


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


def bench_floor(
    name: str,
    database_url: str,
    args: argparse.Namespace,
    pool: ProcessPoolExecutor,
    out: Path,
) -> Row:
    """The floor (benchmarks/floor_app.py) on a study of its own in the same database, its
    workers' tokens signed with a secret of this run."""
    from floor_app import token_for

    print(f"[{name}] preparing {args.items} items ...", flush=True)
    _key, study_id = prepare_study(database_url, args.items)
    secret = secrets.token_hex(32)
    tokens = [token_for(i, secret.encode()) for i in floor_workers(database_url, args.clients)]
    env = server_env(args.workers, {"CROWD_DATABASE_URL": database_url, "FLOOR_SECRET": secret})
    with gunicorn("floor_app:app", env, out / "gunicorn.log", "/healthz",
                  pythonpath=str(BENCH_DIR)) as server:  # fmt: skip
        if args.warmup > 0:
            drive(pool, args.client_processes, server.port, "submit", study_id, tokens,
                  args.warmup, args.max_requests)  # fmt: skip
        print(f"[{name}] measuring {args.duration:.0f} s ...", flush=True)
        result = drive(pool, args.client_processes, server.port, "submit", study_id, tokens,
                       args.duration, args.max_requests)  # fmt: skip
    note = "first errors: " + " | ".join(result.error_samples[:3]) if result.errors else ""
    print(f"[{name}] {result.requests} requests, {result.answers} answers; {note}", flush=True)
    return Row(name, result, note)


def floor_workers(database_url: str, n: int) -> list[int]:
    """n new workers for the floor (it has no join endpoint): their ids."""
    from crowd.storage import Database, Worker

    db = Database(database_url)
    try:
        with db.session() as session:
            workers = [Worker(provider="sim", external_id=f"floor-{secrets.token_hex(6)}")
                       for _ in range(n)]  # fmt: skip
            session.add_all(workers)
            session.flush()
            return [worker.id for worker in workers]
    finally:
        db.dispose()


def bench_pair(
    engine: str, url: str, args: argparse.Namespace, pool: ProcessPoolExecutor
) -> list[Row]:
    """crowd and the floor on one engine, interleaved over the rounds (floor first, then
    crowd first, ...), so that drift in the machine's load falls on both arms alike."""
    rows = []
    for round_ in range(1, args.rounds + 1):
        arms = [("floor", bench_floor), ("crowd", bench_crowd)]
        for arm, bench in arms if round_ % 2 else arms[::-1]:
            out = OUT_DIR / f"{engine.lower()}-{arm}-{round_}"
            out.mkdir()
            rows.append(bench(f"{arm}, {engine} ({round_})", url, args, pool, out))
    return rows


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
    parser.add_argument("--items", type=int, default=5_000, help="passages in each study")
    parser.add_argument("--rounds", type=int, default=2, help="crowd and floor runs per engine")
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
                rows += bench_pair("SQLite", f"sqlite:///{OUT_DIR / 'crowd.db'}", args, pool)
            if not args.skip_postgres:
                facts["pg"] = reset_postgres(args.pg_url)
                rows += bench_pair("PostgreSQL", args.pg_url, args, pool)
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
