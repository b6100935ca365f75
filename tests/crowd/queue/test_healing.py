"""The parts that heal the queue, each on its own with a real Redis: orphaned jobs are
re-queued once however many sweeps find them, and failed for good after MAX_REQUEUES; the
heartbeat outlives a failing scheduler; the CLI's wait re-queues a dead worker's job;
SIGHUP stops `crowd worker`, also while RQ is starting."""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from rq import Worker
from rq.job import Job, JobStatus

from crowd.queue import EVENTS, fetch_job, healing, job_queue, runner
from crowd.queue.healing import MAX_REQUEUES, REQUEUES_META, Heartbeat, alive_key
from crowd.queue.jobs import process_event
from crowd.queue.runner import see_through
from crowd.settings import Settings
from crowd.storage import Database
from tests.crowd.queue.workers import Workers


def started_by_a_dead_worker(connection: redis.Redis, requeues: int = 0) -> Job:
    """A job as a worker SIGKILLed a minute ago leaves it: started, in the started registry
    under an execution, its worker's heartbeat key long expired."""
    queue = job_queue(EVENTS, connection)
    job = queue.enqueue(process_event, 10**6, job_id="orphan")  # an event that does not exist
    connection.lrem(queue.key, 0, job.id)  # a worker took it off the queue
    job.worker_name = "dead-worker"
    job.started_at = datetime.now(UTC) - timedelta(minutes=1)
    job.meta[REQUEUES_META] = requeues
    job.save()
    job.set_status(JobStatus.STARTED)
    connection.zadd(queue.started_job_registry.key, {f"{job.id}:execution-1": time.time() + 600})
    return job


def test_many_sweeps_that_find_one_orphan_requeue_it_once(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = redis.Redis.from_url(redis_url)
    started_by_a_dead_worker(connection)
    sweeps = 6
    # Every sweep has listed the orphan before any of them claims it.
    everyone_listed = threading.Barrier(sweeps)
    fetch = healing.fetch_job

    def listed_then_fetch(job_id: str, conn: redis.Redis) -> Job:
        everyone_listed.wait(10)
        return fetch(job_id, conn)

    monkeypatch.setattr(healing, "fetch_job", listed_then_fetch)
    counts: list[int] = []
    threads = [
        threading.Thread(target=lambda: counts.append(healing.requeue_orphans(connection)))
        for _ in range(sweeps)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    queue = job_queue(EVENTS, connection)
    assert sorted(counts) == [0] * (sweeps - 1) + [1]
    assert queue.job_ids == ["orphan"]
    job = fetch_job("orphan", connection)
    assert job.get_status() == JobStatus.QUEUED and job.meta[REQUEUES_META] == 1


def test_a_live_worker_keeps_its_job_and_a_job_that_kills_workers_fails(redis_url: str) -> None:
    connection = redis.Redis.from_url(redis_url)
    started_by_a_dead_worker(connection, requeues=MAX_REQUEUES)
    connection.set(alive_key("dead-worker"), "1")  # beating after all
    assert healing.requeue_orphans(connection) == 0
    connection.delete(alive_key("dead-worker"))

    assert healing.requeue_orphans(connection) == 0  # its last chance was used: failed
    queue = job_queue(EVENTS, connection)
    job = fetch_job("orphan", connection)
    assert job.get_status() == JobStatus.FAILED
    assert queue.job_ids == [] and "orphan" in queue.failed_job_registry.get_job_ids()


def test_the_heartbeat_outlives_a_failing_scheduler(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = redis.Redis.from_url(redis_url)
    monkeypatch.setattr(healing, "HEARTBEAT_EVERY", 0.05)
    heartbeat = Heartbeat(connection, (EVENTS,))
    heartbeat.worker_name = "w"
    failures = []

    def broken() -> None:
        failures.append(1)
        raise ValueError("a scheduled job that cannot be read")

    monkeypatch.setattr(heartbeat.scheduler, "enqueue_scheduled_jobs", broken)
    heartbeat.start()
    try:
        deadline = time.monotonic() + 10
        while len(failures) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        connection.delete(alive_key("w"))
        time.sleep(0.3)
        assert len(failures) >= 3 and connection.exists(alive_key("w"))  # still beating
    finally:
        heartbeat.stop()
    assert not connection.exists(alive_key("w"))


def test_waiting_on_a_job_whose_worker_died_runs_it_again(settings: Settings, db: Database) -> None:
    connection = redis.Redis.from_url(settings.redis_url or "")
    job = started_by_a_dead_worker(connection)
    assert see_through(settings, job, EVENTS, poll=0.05) == "finished"
    assert job.return_value() == "outbox event 1000000 does not exist"


def test_sighup_stops_crowd_worker(settings: Settings, db: Database, tmp_path: Path) -> None:
    connection = redis.Redis.from_url(settings.redis_url or "")
    (tmp_path / "logs").mkdir()
    workers = Workers(settings, tmp_path / "logs")
    try:
        (process,) = workers.start(1)
        deadline = time.monotonic() + 60
        while not Worker.count(connection=connection) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert Worker.count(connection=connection) == 1, workers.log_tail()
        process.send_signal(signal.SIGHUP)
        assert process.wait(20) == 0, workers.log_tail()
    finally:
        workers.stop()
    assert Worker.count(connection=connection) == 0


def test_a_stop_signal_while_rq_starts_ends_the_worker_before_any_job(
    settings: Settings, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window CI once hit: SIGHUP after RQ registered the worker, before RQ put its
    # handlers in. The signal is real, sent to this process from inside RQ's bootstrap.
    connection = redis.Redis.from_url(settings.redis_url or "")
    job = job_queue(EVENTS, connection).enqueue(process_event, 10**6)
    bootstrap = runner._Worker.bootstrap

    def signalled_bootstrap(worker: runner._Worker, *args: Any, **kwargs: Any) -> None:
        bootstrap(worker, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGHUP)

    monkeypatch.setattr(runner._Worker, "bootstrap", signalled_bootstrap)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        assert runner.run_worker(settings) == 0
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert job.get_status(refresh=True) == JobStatus.QUEUED  # stopped before taking it
    assert Worker.count(connection=connection) == 0
