"""The context jobs run in, and the job that processes outbox events.

Every job takes ids, opens its own session, and is safe to run twice; the features define
their jobs beside their code and register what an outbox event calls (crowd.queue.hooks).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from rq import get_current_job

from crowd.plugins import load_features
from crowd.queue.hooks import (
    Event,
    OwnTransaction,
    after_commit_handlers,
    in_transaction_handlers,
    known_topic,
    own_transaction_handler,
)
from crowd.settings import Settings
from crowd.storage import Database, OutboxEvent, utcnow

log = logging.getLogger(__name__)


@dataclass
class JobContext:
    settings: Settings
    db: Database


_context: JobContext | None = None
_lock = threading.Lock()


def configure(settings: Settings) -> JobContext:
    """Set the settings jobs run with in this process (`crowd worker` and tests call it)."""
    global _context
    # The features' event handlers, sweeps and delivery hooks register themselves on import.
    load_features()
    with _lock:
        if _context is not None:
            _context.db.dispose()
        _context = JobContext(settings=settings, db=Database(settings.database_url))
    return _context


def context() -> JobContext:
    with _lock:
        ctx = _context
    return ctx if ctx is not None else configure(Settings.from_env())


def _job_tag() -> str:
    job = get_current_job()
    return f"[job {job.id}]" if job else "[inline]"


def process_event(event_id: int) -> str:
    """Handle one outbox event with the handlers its topic's features registered
    (crowd.queue.hooks): in its transaction, in their order, then after the commit."""
    ctx = context()
    own = _own_transaction_event(event_id)
    if own is not None:
        handler, event = own
        # Raises when the work fails: RQ retries the job, the sweep re-enqueues it.
        outcome = handler(event)
        with ctx.db.session() as session:
            row = session.get(OutboxEvent, event_id)
            if row is not None:
                row.processed_at = utcnow()
        log.info("%s %s", _job_tag(), outcome)
        return outcome
    job = get_current_job()
    with ctx.db.session() as session:
        # Locked: a re-queued job and the one it replaced never both run the handlers.
        row = session.get(OutboxEvent, event_id, with_for_update=True)
        if row is None:
            return f"outbox event {event_id} does not exist"
        if row.processed_at is not None:
            return f"outbox event {event_id} was already processed"
        event = Event(event_id, row.topic, dict(row.payload))
        if not known_topic(event.topic):
            log.warning("%s unknown outbox topic %r, marked processed", _job_tag(), event.topic)
        follow_ups = after_commit_handlers(event.topic) if job is not None else []
        # A run cut off after this transaction committed (Redis or the worker gone before
        # the follow-ups) comes back here: the handlers' work is done, only follow-ups are left.
        if row.handled_at is None:
            for handle in in_transaction_handlers(event.topic):
                handle(session, event)
            row.handled_at = utcnow()
        if not follow_ups:
            row.processed_at = utcnow()
    if job is not None and follow_ups:
        for follow_up in follow_ups:
            follow_up(job.connection, event)
        with ctx.db.session() as session:
            row = session.get(OutboxEvent, event_id)
            if row is not None:
                row.processed_at = utcnow()
    log.info("%s processed outbox event %s", _job_tag(), event_id)
    return f"processed outbox event {event_id}"


def _own_transaction_event(event_id: int) -> tuple[OwnTransaction, Event] | None:
    """The handler and event of an unprocessed event whose topic's handler opens its own
    transactions (a call to a crowd platform may take seconds); None for other events."""
    with context().db.read_session() as session:
        row = session.get(OutboxEvent, event_id)
        if row is None or row.processed_at is not None:
            return None
        handler = own_transaction_handler(row.topic)
        return None if handler is None else (handler, Event(event_id, row.topic, dict(row.payload)))
