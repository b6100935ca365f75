"""Running RQ workers, with the sweeps beside them, and finding a Redis to use.

The sweeps are registered by the features (crowd.queue.hooks.every_sweep); the outbox's
own is in crowd.queue.outbox.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import replace
from typing import Any

import redis
from rq import Queue, SimpleWorker
from rq import Worker as RQWorker
from rq.exceptions import StopRequested
from rq.job import Job, JobStatus
from sqlalchemy import func, select

from crowd.queue import ALL_QUEUES, SERIALIZER, job_queue, redis_connection
from crowd.queue.embedded import EmbeddedRedis
from crowd.queue.healing import Heartbeat, requeue_orphans, worker_gone
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


class _Worker(SimpleWorker):
    """RQ's in-process worker, telling `crowd worker` when a signal asked it to stop (RQ
    installs its own handlers for SIGINT and SIGTERM each time it starts working)."""

    stop_requested: threading.Event

    def _install_signal_handlers(self) -> None:
        super()._install_signal_handlers()
        # A closed terminal stops the worker after its job too (RQ itself ignores SIGHUP).
        signal.signal(signal.SIGHUP, self.request_stop)
        if self.stop_requested.is_set():
            # A signal came while RQ started (registering, subscribing), before its handlers
            # were in place: run_worker's own took it; the loop ends before its first job.
            self._stop_requested = True

    def request_stop(self, signum: Any, frame: Any) -> None:
        self.stop_requested.set()
        super().request_stop(signum, frame)
        signal.signal(signal.SIGHUP, self.request_force_stop)


# Backoff between restarts of the RQ worker after Redis went away (seconds).
FIRST_WAIT, LONGEST_WAIT = 1.0, 30.0
# A worker that ran this long before it quit was healthy: the next wait starts short again.
HEALTHY_RUN = 60.0


def _signal_handlers() -> dict[int, Any]:
    """The SIGINT and SIGTERM handlers now, where they can be put back (the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}


def run_worker(
    settings: Settings,
    burst: bool = False,
    max_rounds: int = 50,
    queues: tuple[str, ...] | None = None,
) -> int:
    """Run an RQ worker on the crowd queues (all unless `queues`); returns the jobs it ran.

    Without `burst` it runs until SIGINT or SIGTERM: when Redis goes away it waits (with
    backoff) and starts working again, never exits.
    """
    if not settings.redis_url:
        raise ValueError("run_worker needs settings with a redis_url (see ensure_redis)")
    ctx = configure(settings)
    connection = redis_connection(settings.redis_url)
    # What jobs commit gets its hooks too: deliveries scheduled by jobs (webhooks) get their
    # first attempt right after the job.
    install_commit_hooks(ctx.db, connection)
    names = queues or ALL_QUEUES
    listened = [job_queue(name, connection) for name in names]
    stop = threading.Event()
    heartbeat = Heartbeat(connection, tuple(names))
    if burst:
        worker = _new_worker(listened, connection, stop, heartbeat)
        # RQ puts its SIGINT and SIGTERM handlers in and leaves them: a burst inside a longer
        # program (a command that drains the queue, a test) gives the program's back, or a
        # later signal would raise RQ's StopRequested wherever the program then is.
        found = _signal_handlers()
        heartbeat.start()
        try:
            return _burst(settings, ctx.db, connection, worker, listened, max_rounds)
        finally:
            heartbeat.stop()
            for signum, handler in found.items():
                signal.signal(signum, handler)
    # The jobs' own lines (what each batch processed) beside RQ's, which RQ logs at INFO.
    jobs_log = logging.getLogger("crowd.queue")
    if jobs_log.getEffectiveLevel() > logging.INFO:
        jobs_log.setLevel(logging.INFO)
    sweep_context = SweepContext(settings, ctx.db, connection)
    for lane in sorted({registered.lane for registered in sweeps()}):
        threading.Thread(target=_sweeper, args=(sweep_context, lane, stop),
                         name=f"sweeps-{lane}", daemon=True).start()  # fmt: skip
    heartbeat.start()
    wait = FIRST_WAIT
    # Until RQ has put its handlers in (and between its runs) a stop signal sets `stop`.
    _stop_on_signals(stop)
    try:
        while not stop.is_set():
            started = time.monotonic()
            try:
                # A new RQ worker each time: its registration went with the Redis it had.
                worker = _new_worker(listened, connection, stop, heartbeat)
                # The scheduler runs in the heartbeat thread, not in a process RQ forks.
                worker.work(logging_level="INFO")
            except redis.RedisError as error:
                log.warning("the RQ worker lost Redis: %s", error)
            except StopRequested:
                # RQ's handler raises this outside its loop when the signal lands in the
                # moment it is putting its handlers in.
                stop.set()
            _stop_on_signals(stop)  # RQ's handlers would raise out of the wait below
            if stop.is_set():
                break
            # RQ's work() returns when Redis times out or fails it mid-job: start again.
            if time.monotonic() - started > HEALTHY_RUN:
                wait = FIRST_WAIT
            log.warning("the RQ worker stopped; starting a new one in %.0f s", wait)
            if stop.wait(wait):
                break
            wait = min(wait * 2, LONGEST_WAIT)
    finally:
        stop.set()
        heartbeat.stop()
    return 0


FINAL_STATES = {JobStatus.FINISHED, JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED}
# A queued job no listed worker took in this long: run it here (the listed ones may be dead).
UNTAKEN = 30.0


def see_through(settings: Settings, job: Job, queue_name: str, poll: float = 0.5) -> str:
    """Wait for `job` (on `queue_name`) to end, and return how it ended: while a worker
    runs it, wait; while no worker listens to its queue, run the queue here in bursts; when
    the worker running it died, put it back on the queue (then it runs here or there)."""
    queue = job_queue(queue_name, job.connection)
    queued_since = time.monotonic()
    while True:
        status = job.get_status(refresh=True)
        if status is None:
            return "lost"  # Redis forgot it (restarted without its data)
        if status in FINAL_STATES:
            return str(status.value)
        if status == JobStatus.STARTED and worker_gone(job.connection, job):
            requeue_orphans(job.connection)
            continue
        if status != JobStatus.QUEUED:
            queued_since = time.monotonic()
        elif not RQWorker.all(queue=queue, serializer=SERIALIZER) or (
            time.monotonic() - queued_since > UNTAKEN
        ):
            run_worker(settings, burst=True, queues=(queue_name,))
            continue
        time.sleep(poll)


def _stop_on_signals(stop: threading.Event) -> None:
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, lambda _signum, _frame: stop.set())


def _new_worker(listened: list[Queue], connection: redis.Redis, stop: threading.Event,
                heartbeat: Heartbeat) -> _Worker:  # fmt: skip
    worker = _Worker(listened, connection=connection, serializer=SERIALIZER)
    worker.stop_requested = stop
    heartbeat.worker_name = worker.name
    return worker


def _burst(settings: Settings, db: Database, connection: redis.Redis, worker: _Worker,
           listened: list[Queue], max_rounds: int) -> int:  # fmt: skip
    between_rounds = SweepContext(settings, db, connection, burst=True)
    before = _jobs_done(listened)
    for _ in range(max_rounds):
        for registered in sweeps():
            if registered.burst:
                registered.run(between_rounds)
        worked = worker.work(burst=True, logging_level="WARNING")
        if not worked and pending_events(db) == 0:
            break
    return _jobs_done(listened) - before


def _sweeper(sweep_context: SweepContext, lane: str, stop: threading.Event) -> None:
    settings = sweep_context.settings
    last_run: dict[str, float] = {}
    while not stop.wait(settings.sweep_interval):
        for registered in sweeps(lane):
            if registered.every is not None:
                if time.monotonic() - last_run.get(registered.name, 0.0) < (
                    registered.every(settings)
                ):
                    continue
                last_run[registered.name] = time.monotonic()
            try:
                registered.run(sweep_context)
            except Exception:  # keep sweeping through transient database or Redis errors
                log.exception("sweep %r failed", registered.name)
