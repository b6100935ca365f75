"""Does one `crowd worker` keep up with one web box? Answers stored against events processed.

    make bench            # or: .venv/bin/python benchmarks/queue_rps.py --duration 600

One gunicorn box (deploy/gunicorn.conf.py) takes answers from simulated workers at full speed
(next, reveal step, store step, as benchmarks/submit_rps.py drives it; attention checks
answered as asked) on a boundary study with QC on (3 answers per item, attention checks;
no rules, which would stop clients this fast and regular: see `prepare`), while one `crowd
worker` processes the outbox: each answer's QC refresh and report request. Every second the
script counts the outbox events not processed yet (the backlog). It reports the web's
answers/s, the queue's events/s, the backlog's growth per minute over the second half of the
load, and how long the queue took to drain it after the load stopped. The target: the
backlog does not grow. The worker runs on the default settings: it begins a batch of the
study's answer events at most once every CROWD_QC_REFRESH_INTERVAL seconds (2), so the
backlog swings between nothing and about two seconds of answers as long as a refresh of the
whole study takes less than that.

Only 127.0.0.1 is used. The script creates benchmarks/out/queue/ (git-ignored), resets the
PostgreSQL database `bench` (never `test`) with --postgres, and flushes Redis database 13.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import secrets
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "benchmarks"
OUT_DIR = BENCH_DIR / "out" / "queue"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from results_md import write_block  # noqa: E402
from rps_load import drive  # noqa: E402
from rps_servers import (  # noqa: E402
    flush_redis,
    gunicorn,
    join_workers,
    prepare_study,
    reset_postgres,
    server_env,
)

START, END = "<!-- queue:start -->", "<!-- queue:end -->"
INTRO = """
## Does the queue keep up with the web? (`benchmarks/queue_rps.py`)

See the script's docstring. The block below is rewritten by each run.

"""
DEFAULT_REDIS = "redis://127.0.0.1:6379/13"


def prepare(database_url: str, n_items: int) -> tuple[str, int]:
    """A published boundary study with QC as people run it, its rules aside: 3 answers per
    item and an attention check in ten; (API key, study id).

    The clients answer at machine speed and always alike, which the default rules rightly
    stop within seconds (too fast, constant answers), ending the load. With no rules every
    answer's event still refreshes every reader's evidence (gold, attention, agreement,
    collusion, drift) and requests a report: the work the queue must keep up with."""
    config = {"annotations_per_item": 3, "attention_rate": 0.1, "require_explanation": False,
              "qc": {"rules": []}}  # fmt: skip
    checks = [
        {"id": f"check-{i}", "kind": "attention", "boundary": 2,
         "sentences": [f"Check {i}: please answer human.", "Human again."]}
        for i in range(30)
    ]  # fmt: skip
    return prepare_study(database_url, n_items, config, checks)


def outbox_counts(database_url: str) -> tuple[int, int]:
    """(events in all, events not processed yet)."""
    from sqlalchemy import func, select

    from crowd.storage import Database, OutboxEvent

    db = Database(database_url)
    try:
        with db.session() as session:
            total, left = session.execute(
                select(func.count(OutboxEvent.id),
                       func.count(OutboxEvent.id).filter(OutboxEvent.processed_at.is_(None)))
            ).one()  # fmt: skip
            return int(total), int(left)
    finally:
        db.dispose()


class Sampler(threading.Thread):
    """Counts the outbox every `every` seconds: (seconds since start, events, backlog)."""

    def __init__(self, database_url: str, every: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.url, self.every = database_url, every
        self.samples: list[tuple[float, int, int]] = []
        self.stop_at = threading.Event()
        self.began = time.perf_counter()

    def run(self) -> None:
        while not self.stop_at.is_set():
            total, left = outbox_counts(self.url)
            self.samples.append((time.perf_counter() - self.began, total, left))
            self.stop_at.wait(self.every)


def slope(points: list[tuple[float, int]]) -> float:
    """Least-squares slope of y over x (per second)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def run(args: argparse.Namespace, database_url: str, engine: str) -> dict[str, Any]:
    out = OUT_DIR / engine.lower()
    out.mkdir(parents=True)
    # Items enough that the clients never run out (a client that finds none stops).
    n_items = args.items or max(3000, int(args.duration * 100 / 3))
    key, study_id = prepare(database_url, n_items)
    flush_redis(args.redis_url)
    crowd_env = {
        "CROWD_DATA_DIR": str(out / "data"),
        "CROWD_DATABASE_URL": database_url,
        "CROWD_REDIS_URL": args.redis_url,
        "CROWD_SECRET_KEY": secrets.token_urlsafe(48),
    }
    env = server_env(args.workers, crowd_env)
    crowd = Path(sys.executable).with_name("crowd")
    context = multiprocessing.get_context("spawn")
    web = gunicorn("crowd.wsgi:app", env, out / "gunicorn.log", "/healthz")
    with ProcessPoolExecutor(args.client_processes, mp_context=context) as pool, web as server:
        tokens = join_workers(server.port, key, study_id, args.clients)
        with open(out / "worker.log", "wb") as log:
            worker = subprocess.Popen([str(crowd), "worker", "--queue", "crowd-events",
                                       "--queue", "crowd-reports"], env=env, stdout=log,
                                      stderr=subprocess.STDOUT)  # fmt: skip
            try:
                # The worker imports before it takes jobs: start the load once it listens.
                ready = time.perf_counter() + args.worker_boot
                while b"Listening on" not in (out / "worker.log").read_bytes():
                    if time.perf_counter() > ready or worker.poll() is not None:
                        raise RuntimeError(f"crowd worker did not start: see {out}/worker.log")
                    time.sleep(0.2)
                sampler = Sampler(database_url)
                sampler.start()
                print(f"[{engine}] answering for {args.duration:.0f} s ...", flush=True)
                result = drive(pool, args.client_processes, server.port, "submit", study_id,
                               tokens, args.duration, 10**9)  # fmt: skip
                load_end = time.perf_counter() - sampler.began
                print(f"[{engine}] draining (at most {args.drain:.0f} s) ...", flush=True)
                deadline = time.perf_counter() + args.drain
                while time.perf_counter() < deadline:
                    if sampler.samples and sampler.samples[-1][0] > load_end and \
                            sampler.samples[-1][2] == 0:  # fmt: skip
                        break
                    time.sleep(0.5)
                sampler.stop_at.set()
                sampler.join()
                cpu = cpu_seconds(worker.pid)
            finally:
                worker.terminate()
                worker.wait(timeout=60)
    samples = sampler.samples
    during = [(t, left) for t, _, left in samples if t <= load_end]
    second_half = [(t, left) for t, left in during if t >= load_end / 2]
    drained = next((t for t, _, left in samples if t > load_end and left == 0), None)
    # Both rates from the same samples over the same window: answers stored (one outbox
    # event each) and events processed, each the slope of its count during the load.
    stored = [(t, total) for t, total, _ in samples if t <= load_end]
    processed = [(t, total - left) for t, total, left in samples if t <= load_end]
    return {
        "engine": engine,
        "answers_per_s": slope(stored),
        "events_per_s": slope(processed),
        "backlog_end": during[-1][1] if during else None,
        "backlog_peak": max((left for _, left in during), default=None),
        "growth_per_min": slope(second_half) * 60,
        "drain_s": None if drained is None else drained - load_end,
        "answers": result.answers,
        "errors": result.errors,
        **worker_log(out / "worker.log"),
        # The worker's CPU over the load and the drain (its pacing waits cost none).
        "worker_cpu": None if cpu is None else cpu / samples[-1][0],
    }


def worker_log(path: Path) -> dict[str, Any]:
    """From the worker's log (the jobs' own lines): the batches of answer events and their
    median size."""
    import re
    import statistics

    sizes = [
        1 + int(found[1] or 0)
        for found in re.finditer(r"\] processed outbox event \d+(?: and (\d+) more)?$",
                                 path.read_text(errors="replace"), re.M)
    ]  # fmt: skip
    return {"batches": len(sizes), "batch_median": statistics.median(sizes) if sizes else None}


def cpu_seconds(pid: int) -> float | None:
    """The process's CPU time so far, user and system (Linux's /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def block(rows: list[dict[str, Any]], args: argparse.Namespace, facts: dict[str, str]) -> str:
    lines = [
        START,
        f"Measured {facts['date']} with `.venv/bin/python benchmarks/queue_rps.py "
        f"--duration {args.duration:.0f}` on {facts['cores']} cores, Python "
        f"{facts['python']}; load average at the start {facts['load']}. One gunicorn box "
        f"({args.workers} workers), {args.clients} client threads at full speed, one `crowd "
        "worker` on the events and reports queues, all on this machine.",
        "",
        "| store | web answers/s | queue events/s | backlog at the end of the load | peak "
        "| growth per minute (second half) | drained after the load in | batches of answer "
        "events (median size) | worker CPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        drain = "not within the limit" if r["drain_s"] is None else f"{r['drain_s']:.0f} s"
        lines.append(
            f"| {r['engine']} | {r['answers_per_s']:.1f} | {r['events_per_s']:.1f} | "
            f"{r['backlog_end']} | {r['backlog_peak']} | {r['growth_per_min']:+.0f} | {drain} | "
            f"{r['batches']} ({r['batch_median']}) | "
            + ("-" if r["worker_cpu"] is None else f"{r['worker_cpu']:.0%} of a core") + " |"
        )
    lines += ["", "Each stored answer is one outbox event (its QC refresh and report request).",
              END]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    parser.add_argument("--drain", type=float, default=300.0, help="most seconds to drain")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--items", type=int, default=None,
                        help="passages (default: enough for 100 answers/s, 3 an item)")  # fmt: skip
    parser.add_argument(
        "--worker-boot",
        type=float,
        default=120.0,
        help="most seconds to wait for the worker to listen",
    )
    parser.add_argument("--postgres", action="store_true", help="also on PostgreSQL `bench`")
    parser.add_argument("--skip-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/bench")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not args.redis_url.startswith(("redis://127.0.0.1", "redis://localhost")):
        parser.error("--redis-url must point at 127.0.0.1: this script flushes it")
    shutil.rmtree(OUT_DIR, ignore_errors=True)
    facts = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "load": " / ".join(f"{v:.1f}" for v in os.getloadavg()),
    }
    rows = [] if args.skip_sqlite else [run(args, f"sqlite:///{OUT_DIR / 'crowd.db'}", "SQLite")]
    if args.postgres or args.skip_sqlite:
        reset_postgres(args.pg_url)
        rows.append(run(args, args.pg_url, "PostgreSQL"))
    flush_redis(args.redis_url)
    text = block(rows, args, facts)
    print(text)
    if not args.no_write:
        write_block(START, END, text, INTRO)
    return 0


if __name__ == "__main__":
    sys.exit(main())
