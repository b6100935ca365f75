"""Running RQ workers, with the sweeps beside them, and finding a Redis to use.

The sweeps are registered by the features (crowd.queue.hooks.every_sweep); the outbox's
own is in crowd.queue.outbox.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

import redis
from rq import Queue, SimpleWorker
from sqlalchemy import func, select

from crowd.queue import ALL_QUEUES, SERIALIZER, job_queue, redis_connection
from crowd.queue.embedded import EmbeddedRedis
from crowd.queue.hooks import SweepContext, install_commit_hooks, sweeps
from crowd.queue.jobs import configure
from crowd.queue.outbox import sweep_outbox  # noqa: F401 - registers the outbox sweep
from crowd.settings import Settings
from crowd.storage import Database, OutboxEvent

log = logging.getLogger(__name__)


def embedded_dir(settings: Settings) -> EmbeddedRedis:
    return EmbeddedRedis(settings.data_dir / "redis")


def ensure_redis(settings: Settings) -> tuple[Settings, EmbeddedRedis | None]:
    """Settings with a Redis URL: the configured one, a running embedded one, or a new one.

    The second value is the embedded server this call started (the caller stops it), or None.
    """
    if settings.redis_url:
        return settings, None
    embedded = embedded_dir(settings)
    if embedded.socket.exists():
        try:
            redis.Redis(unix_socket_path=str(embedded.socket)).ping()
            return replace(settings, redis_url=embedded.url), None  # another process's server
        except redis.ConnectionError:
            pass
    embedded.start()
    return replace(settings, redis_url=embedded.url), embedded


def pending_events(db: Database) -> int:
    with db.session() as session:
        return (
            session.scalar(
                select(func.count(OutboxEvent.id)).where(OutboxEvent.processed_at.is_(None))
            )
            or 0
        )


def _jobs_done(queues: list[Queue]) -> int:
    return sum(q.finished_job_registry.count + q.failed_job_registry.count for q in queues)


def run_worker(
    settings: Settings,
    burst: bool = False,
    max_rounds: int = 50,
    queues: tuple[str, ...] | None = None,
) -> int:
    """Run an RQ worker on the crowd queues (all unless `queues`); returns the jobs it ran."""
    if not settings.redis_url:
        raise ValueError("run_worker needs settings with a redis_url (see ensure_redis)")
    ctx = configure(settings)
    connection = redis_connection(settings.redis_url)
    # What jobs commit gets its hooks too: deliveries scheduled by jobs (webhooks) get their
    # first attempt right after the job.
    install_commit_hooks(ctx.db, connection)
    listened = [job_queue(name, connection) for name in (queues or ALL_QUEUES)]
    worker = SimpleWorker(listened, connection=connection, serializer=SERIALIZER)
    if burst:
        between_rounds = SweepContext(settings, ctx.db, connection, burst=True)
        before = _jobs_done(listened)
        for _ in range(max_rounds):
            for registered in sweeps():
                if registered.burst:
                    registered.run(between_rounds)
            worked = worker.work(burst=True, logging_level="WARNING")
            if not worked and pending_events(ctx.db) == 0:
                break
        return _jobs_done(listened) - before
    stop = threading.Event()
    sweep_context = SweepContext(settings, ctx.db, connection)

    def sweeper() -> None:
        last_run: dict[str, float] = {}
        while not stop.wait(settings.sweep_interval):
            try:
                for registered in sweeps():
                    if registered.every is not None:
                        if time.monotonic() - last_run.get(registered.name, 0.0) < (
                            registered.every(settings)
                        ):
                            continue
                        last_run[registered.name] = time.monotonic()
                    registered.run(sweep_context)
            except Exception:  # keep sweeping through transient database or Redis errors
                log.exception("outbox sweep failed")

    thread = threading.Thread(target=sweeper, name="outbox-sweep", daemon=True)
    thread.start()
    try:
        worker.work(with_scheduler=True)
    finally:
        stop.set()
    return 0
