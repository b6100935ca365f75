"""What keeps the queue going without a human: worker heartbeats, RQ's scheduler in a
thread, and the sweep that re-queues the jobs of workers that died.

RQ's own answers are too slow or leave things behind: a job whose worker was SIGKILLed stays
"started" until RQ's maintenance (every 10 minutes) finds its registry entry expired, and the
scheduler RQ forks (`work(with_scheduler=True)`) outlives a killed worker. So each `crowd
worker` process runs one `Heartbeat` thread that

- marks the RQ worker it runs now alive (`alive_key`, a Redis key with a short TTL), and
- runs RQ's scheduler in-process (retries with intervals, scheduled jobs): it dies with the
  worker, and its lock expires so another worker's scheduler takes over,

and the sweep `requeue_orphans` puts a started job whose worker's key is gone back on its
queue, within HEARTBEAT_TTL plus a sweep interval. Every job is safe to run twice.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

import redis
from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.scheduler import RQScheduler

from crowd.queue import ALL_QUEUES, SERIALIZER, fetch_job, job_queue
from crowd.queue.hooks import QUEUE_LANE, SweepContext, every_sweep

log = logging.getLogger(__name__)

HEARTBEAT_EVERY = 5.0
# A worker whose key is this old is gone: six missed beats, well past a Redis hiccup.
HEARTBEAT_TTL = 30
# A job whose worker died this many times is failed, not re-queued again: it may be what
# kills its workers (out of memory, say).
MAX_REQUEUES = 3
REQUEUES_META = "crowd_requeues"


def alive_key(worker_name: str) -> str:
    return f"crowd:worker-alive:{worker_name}"


class Heartbeat:
    """A daemon thread beating for the worker this process runs (set `worker_name` to each
    new RQ worker) and running RQ's scheduler for `queue_names`."""

    def __init__(self, connection: redis.Redis, queue_names: tuple[str, ...]) -> None:
        self.connection = connection
        self.worker_name: str | None = None
        self.scheduler = RQScheduler(
            list(queue_names), connection=connection, serializer=SERIALIZER,
            logging_level=logging.WARNING,
        )  # fmt: skip
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-heartbeat", daemon=True)
        self._failing = False

    def beat(self) -> None:
        """One beat: the alive key, then the scheduler's lock and its due jobs."""
        name = self.worker_name
        if name is not None:
            self.connection.set(alive_key(name), "1", ex=HEARTBEAT_TTL)
        self.scheduler.acquire_locks()
        if self.scheduler.acquired_locks:
            self.scheduler.enqueue_scheduled_jobs()

    def _run(self) -> None:
        while True:
            try:
                self.beat()
                if self._failing:
                    log.warning("Redis is back: the worker's heartbeat and scheduler resume")
                self._failing = False
            except redis.RedisError as error:
                if not self._failing:
                    log.warning("heartbeat: Redis is unavailable (%s); retrying", error)
                self._failing = True
            except Exception:  # a bad scheduled job, say: keep beating, or jobs look orphaned
                log.exception("heartbeat: the scheduler failed; beating on")
            if self._stop.wait(HEARTBEAT_EVERY):
                return

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=HEARTBEAT_EVERY + 5)
        try:
            self.scheduler.release_locks()
            if self.worker_name is not None:
                self.connection.delete(alive_key(self.worker_name))
        except redis.RedisError:
            pass  # the keys expire by themselves


def _started_at(job: Job) -> float:
    started = job.started_at or job.enqueued_at or datetime.now(UTC)
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return started.timestamp()


def requeue_orphans(connection: redis.Redis, ttl: float = HEARTBEAT_TTL) -> int:
    """Put every started job whose worker has not beaten for `ttl` seconds back on its
    queue (after MAX_REQUEUES times, fail it for good); returns how many were re-queued."""
    requeued = 0
    for name in ALL_QUEUES:
        queue = job_queue(name, connection)
        registry = queue.started_job_registry
        for job_id, execution_id in registry.get_job_and_execution_ids(cleanup=False):
            try:
                job = fetch_job(job_id, connection)
            except NoSuchJobError:
                connection.zrem(registry.key, f"{job_id}:{execution_id}")
                continue
            # A job just started may not have its worker's first beat yet: `ttl` covers it.
            if not worker_gone(connection, job, ttl):
                continue
            worker = job.worker_name
            composite = f"{job_id}:{execution_id}"
            # Claim it: of several workers' sweeps that found it, only one goes on.
            if not connection.zrem(registry.key, composite):
                continue
            times = int(job.meta.get(REQUEUES_META, 0))
            if times >= MAX_REQUEUES:
                _fail(queue, job, f"its worker died {times + 1} times while running it")
                continue
            job.meta[REQUEUES_META] = times + 1
            job.save_meta()
            queue.enqueue_job(job)
            requeued += 1
            log.warning("job %s: its worker %s is gone; re-queued on %s", job_id, worker, name)
    return requeued


def _fail(queue: Queue, job: Job, why: str) -> None:
    """Fail `job` for good (no RQ retry: it may be what kills its workers)."""
    log.error("job %s failed, not re-queued: %s", job.id, why)
    with queue.connection.pipeline() as pipeline:
        job.set_status(JobStatus.FAILED, pipeline=pipeline)
        queue.failed_job_registry.add(job, ttl=job.failure_ttl, exc_string=why,
                                      pipeline=pipeline)  # fmt: skip
        pipeline.execute()


def worker_gone(connection: redis.Redis, job: Job, ttl: float = HEARTBEAT_TTL) -> bool:
    """Whether `job` was started by a worker that has not beaten for `ttl` seconds."""
    worker = job.worker_name
    if not worker or connection.exists(alive_key(worker)):
        return False
    return time.time() - _started_at(job) >= ttl


@every_sweep("orphan-jobs", order=-20, lane=QUEUE_LANE)
def sweep_orphans(sweep_context: SweepContext) -> None:
    requeue_orphans(sweep_context.connection)
