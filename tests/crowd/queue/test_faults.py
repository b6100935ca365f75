"""Faults the queue heals from without a human, with servers and processes the tests own: a
Redis killed mid-job, a `crowd worker` SIGKILLed mid-job, a Redis frozen while a crowd
answers. Every event is processed, once, and answers are stored at their usual pace."""

from __future__ import annotations

import re
import signal
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from rq import Worker
from rq.job import JobStatus
from sqlalchemy import func, select

from crowd.app import create_app
from crowd.delivery.signed import DELIVERY_HEADER
from crowd.queue import EVENTS, fetch_job, job_queue
from crowd.queue.embedded import EmbeddedRedis
from crowd.queue.runner import pending_events
from crowd.settings import Settings
from crowd.storage import Database, OutboxEvent, Report, Response
from tests.conftest import free_port, join, passage
from tests.crowd.delivery.test_signed import Receiver
from tests.crowd.delivery.test_webhooks import subscribe
from tests.crowd.queue.workers import Workers
from tests.crowd.test_processes import children
from tests.crowd.work.test_assignments import play


@dataclass
class Crowd:
    settings: Settings
    db: Database
    redis: EmbeddedRedis
    app: Flask
    client: FlaskClient
    study_id: int
    who: dict[str, str]
    workers: Workers
    receiver: Receiver

    def answer(self, count: int) -> None:
        for _ in range(count):
            assert "feedback" in play(self.client, self.who, self.study_id, guess=2)

    def answer_for_the_sweep(self, count: int) -> None:
        """Answers whose events only the workers' sweep enqueues (after its grace of a few
        seconds): the web's Redis is a closed port. Time to lock the outbox before they run."""
        app = create_app(replace(self.settings, redis_url=f"redis://127.0.0.1:{free_port()}"))
        client = app.test_client()
        for _ in range(count):
            assert "feedback" in play(client, self.who, self.study_id, guess=2)
        app.extensions["crowd"].db.dispose()

    def start_workers(self, count: int) -> list[subprocess.Popen[bytes]]:
        """Start `count` workers and wait until they listen (their start writes the schema)."""
        connection = redis.Redis.from_url(self.redis.url)
        started = self.workers.start(count)
        expected = len(self.workers.processes) - sum(
            process.poll() is not None for process in self.workers.processes
        )
        self.wait_until(lambda: Worker.count(connection=connection) >= expected, 30,
                        f"{count} workers listening")  # fmt: skip
        return started

    def wait_until(self, done: Callable[[], bool], seconds: float, what: str) -> float:
        """Seconds until `done()`; fails naming `what` (with the workers' logs) after `seconds`."""
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            if done():
                return time.monotonic() - start
            time.sleep(0.25)
        pytest.fail(f"{what} within {seconds:.0f} s\n{self.workers.log_tail()}")

    def all_processed(self) -> bool:
        return pending_events(self.db) == 0

    def check_every_effect_once(self, answers: int) -> None:
        """Each answer: its event processed, its webhook sent once, and the report counts it."""
        with self.db.session() as session:
            events = session.scalar(select(func.count(OutboxEvent.id))) or 0
            unhandled = session.scalar(
                select(func.count(OutboxEvent.id)).where(OutboxEvent.handled_at.is_(None))
            )
            responses = session.scalar(select(func.count(Response.id)))
        assert (responses, unhandled, pending_events(self.db)) == (answers, 0, 0)
        assert events >= answers
        self.wait_until(lambda: self._webhooks() >= answers, 60, "every webhook sent")
        with self.receiver.lock:
            deliveries = Counter(got.headers[DELIVERY_HEADER] for got in self.receiver.received)
            refs = Counter(got.json()["data"]["response_id"] for got in self.receiver.received)
        assert len(refs) == answers and set(refs.values()) == {1}, refs
        assert set(deliveries.values()) == {1}

        def reported() -> bool:
            with self.db.session() as session:
                report = session.scalars(select(Report)).one_or_none()
            return report is not None and report.data["full"]["n_annotations"] == answers

        self.wait_until(reported, 60, f"a report of all {answers} answers")

    def _webhooks(self) -> int:
        with self.receiver.lock:
            return len(self.receiver.received)


@pytest.fixture
def crowd(
    tmp_path: Path, settings: Settings, db: Database, api_key: str, make_study: Any
) -> Iterator[Crowd]:
    embedded = EmbeddedRedis(tmp_path / "r").start()
    settings = replace(settings, redis_url=embedded.url)
    app = create_app(settings)
    client = app.test_client()
    auth = {"Authorization": f"Bearer {api_key}"}
    study_id = make_study(
        [passage(f"p{i}", 2, n=3) for i in range(12)],
        {"annotations_per_item": 1, "attention_rate": 0.0},
    )
    receiver = Receiver().start()
    subscribe(client, auth, study_id, f"{receiver.url}/hook", ["response.stored"])
    logs = tmp_path / "logs"
    logs.mkdir()
    workers = Workers(settings, logs)
    try:
        yield Crowd(settings, db, embedded, app, client, study_id, join(client, auth), workers,
                    receiver)  # fmt: skip
    finally:
        workers.stop()
        receiver.stop()
        app.extensions["crowd"].db.dispose()
        embedded.stop()


@contextmanager
def outbox_locked(db: Database) -> Iterator[None]:
    """Hold the outbox rows (PostgreSQL) or the write lock (SQLite): an event job that
    starts now waits inside its transaction, mid-job, until the block ends."""
    with db.session() as session:
        session.execute(select(OutboxEvent.id).with_for_update()).all()
        yield


def started_jobs(connection: redis.Redis) -> list[str]:
    registry = job_queue(EVENTS, connection).started_job_registry
    return [job_id for job_id, _ in registry.get_job_and_execution_ids(cleanup=False)]


def test_workers_resume_by_themselves_when_redis_dies_mid_job(crowd: Crowd) -> None:
    connection = redis.Redis.from_url(crowd.redis.url)
    workers = crowd.start_workers(2)
    crowd.answer_for_the_sweep(3)
    with outbox_locked(crowd.db):
        crowd.wait_until(lambda: len(started_jobs(connection)) >= 1, 25, "a job started")
        crowd.redis.stop()  # Redis dies while the jobs wait on the database
    time.sleep(4)  # the jobs finish their transactions and find Redis gone
    assert [process.poll() for process in workers] == [None, None], crowd.workers.log_tail()

    crowd.redis.start()  # back, empty: it keeps nothing on disk
    crowd.answer(2)
    crowd.wait_until(crowd.all_processed, 60, "every event processed after Redis came back")
    assert [process.poll() for process in workers] == [None, None], crowd.workers.log_tail()
    crowd.check_every_effect_once(5)
    # The jobs' own lines are in the workers' logs, beside RQ's.
    logged = "".join(path.read_text(errors="replace") for path in crowd.workers.logs.glob("*"))
    assert re.search(r"INFO crowd\.queue\.jobs: \[job outbox-\d+\] processed outbox event", logged)


def test_a_job_whose_worker_was_killed_runs_again_within_a_minute(crowd: Crowd) -> None:
    connection = redis.Redis.from_url(crowd.redis.url)
    (first,) = crowd.start_workers(1)
    crowd.answer_for_the_sweep(2)
    with outbox_locked(crowd.db):
        crowd.wait_until(lambda: len(started_jobs(connection)) >= 1, 25, "a job started")
        # No scheduler process forked beside the worker: nothing is left behind by a kill.
        assert children(first.pid) == []
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed_at = time.monotonic()
    orphans = started_jobs(connection)
    assert orphans, "the killed worker's job should still look started"

    crowd.start_workers(1)
    crowd.wait_until(crowd.all_processed, 60, "every event processed")
    # Another job's batch may process the killed job's event first (crowd.queue.jobs); the
    # killed job is put back on its queue all the same, and runs again.
    crowd.wait_until(
        lambda: all(
            fetch_job(orphan, connection).get_status() == JobStatus.FINISHED for orphan in orphans
        ),
        60,
        "the killed worker's job ran again",
    )
    assert time.monotonic() - killed_at < 60
    assert started_jobs(connection) == []
    crowd.check_every_effect_once(2)


def test_answers_are_stored_at_their_usual_pace_while_redis_is_frozen(crowd: Crowd) -> None:
    def timed_answers(count: int) -> list[float]:
        times = []
        for _ in range(count):
            start = time.monotonic()
            crowd.answer(1)
            times.append(time.monotonic() - start)
        return times

    usual = timed_answers(3)
    process = crowd.redis.process
    assert process is not None
    process.send_signal(signal.SIGSTOP)
    try:
        frozen = timed_answers(6)
    finally:
        process.send_signal(signal.SIGCONT)
    # Redis's socket timeout is 5 s: an answer that waited on it would take that long. The
    # first answer after the freeze waits the request path's short timeout once; the others
    # do not wait at all.
    assert max(frozen) < 1.5, frozen
    assert statistics.median(frozen) < 3 * statistics.median(usual) + 0.2, (usual, frozen)
    with crowd.db.session() as session:
        assert session.scalar(select(func.count(Response.id))) == 9

    crowd.workers.start(1)  # the sweep sends the events the frozen Redis never took
    crowd.wait_until(crowd.all_processed, 60, "every event processed after the freeze")
    crowd.check_every_effect_once(9)
