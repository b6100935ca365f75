"""From the outbox table to RQ: enqueue after commit, and sweep what Redis never took."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import redis
from rq import Retry
from rq.exceptions import NoSuchJobError
from rq.job import JobStatus
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from crowd.queue import EVENTS, event_job_id, failed, fetch_job, job_queue, resting
from crowd.queue.hooks import QUEUE_LANE, SweepContext, every_sweep, install_commit_hooks
from crowd.storage import Database, OutboxEvent, utcnow

log = logging.getLogger(__name__)

# Give the after-commit enqueue a moment before the sweep second-guesses it.
SWEEP_GRACE = timedelta(seconds=5)
# A poison event stops being re-enqueued after this many sweeps of a failed job.
MAX_SWEEP_ATTEMPTS = 5
EVENT_RETRY = Retry(max=3, interval=[1, 5, 30])
EVENT_TIMEOUT = 120
ALIVE = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED}


def enqueue_events(connection: redis.Redis, event_ids: Iterable[int]) -> int:
    """Enqueue one job per event; returns how many reached Redis (0 when it is down)."""
    from crowd.queue.jobs import process_event

    if resting(connection):
        return 0  # it just failed: the sweep sends these events
    queue = job_queue(EVENTS, connection)
    done = 0
    for event_id in event_ids:
        try:
            queue.enqueue(
                process_event,
                event_id,
                job_id=event_job_id(event_id),
                retry=EVENT_RETRY,
                job_timeout=EVENT_TIMEOUT,
                result_ttl=3600,
                failure_ttl=7 * 24 * 3600,
            )
        except redis.RedisError as error:
            failed(connection)
            # The row stays in the outbox; the sweep enqueues it once Redis is back.
            log.warning(
                "Redis is unavailable, outbox event %s waits for the sweep: %s", event_id, error
            )
            return done
        done += 1
    return done


def _job_status(connection: redis.Redis, event_id: int) -> JobStatus | None:
    try:
        return fetch_job(event_job_id(event_id), connection).get_status(refresh=False)
    except NoSuchJobError:
        return None


def sweep(db: Database, connection: redis.Redis, grace_seconds: float | None = None) -> int:
    """Re-enqueue unprocessed events whose job Redis does not hold; returns how many."""
    grace = SWEEP_GRACE if grace_seconds is None else timedelta(seconds=grace_seconds)
    cutoff = utcnow() - grace
    with db.read_session() as session:
        pending = session.execute(
            select(OutboxEvent.id, OutboxEvent.attempts)
            .where(OutboxEvent.processed_at.is_(None), OutboxEvent.created_at < cutoff)
            .order_by(OutboxEvent.id)
        ).all()
    again = []
    for event_id, attempts in pending:
        status = _job_status(connection, event_id)
        if status in ALIVE:
            continue
        if status == JobStatus.FAILED and attempts >= MAX_SWEEP_ATTEMPTS:
            continue
        again.append(event_id)
    done = enqueue_events(connection, again)
    if done:
        with db.session() as session:
            for row in session.scalars(select(OutboxEvent).where(OutboxEvent.id.in_(again[:done]))):
                row.enqueued_at = utcnow()
                row.attempts += 1
        log.info("sweep re-enqueued %d outbox events", done)
    return done


@every_sweep("outbox", order=0, burst=True, lane=QUEUE_LANE)
def sweep_outbox(sweep_context: SweepContext) -> None:
    """Each sweep round; between burst rounds without the grace (nothing else enqueues)."""
    grace = 0 if sweep_context.burst else None
    sweep(sweep_context.db, sweep_context.connection, grace_seconds=grace)


def install_after_commit_enqueue(db: Database, connection: redis.Redis) -> None:
    """Enqueue the outbox events of every committed session of `db` right after the commit."""

    def collect(session: Session, _context: Any) -> None:
        new = [obj for obj in session.new if isinstance(obj, OutboxEvent)]
        if new:
            session.info.setdefault("outbox_ids", []).extend(obj.id for obj in new)

    def after_commit(session: Session) -> None:
        ids = session.info.pop("outbox_ids", [])
        if ids:
            enqueue_events(connection, ids)

    def after_rollback(session: Session) -> None:
        session.info.pop("outbox_ids", None)

    event.listen(db.sessions, "after_flush", collect)
    event.listen(db.sessions, "after_commit", after_commit)
    event.listen(db.sessions, "after_soft_rollback", lambda s, _t: after_rollback(s))
    # And the features' own hooks: e.g. deliveries (webhooks, callbacks) are outbox rows of
    # their own, with a first attempt right after the commit.
    install_commit_hooks(db, connection)
