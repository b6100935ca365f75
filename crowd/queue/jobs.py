"""The context jobs run in, and the job that processes outbox events.

Every job takes ids, opens its own session, and is safe to run twice; the features define
their jobs beside their code and register what an outbox event calls (crowd.queue.hooks).

Each stored answer enqueues one `process_event` job, but a job handles a batch: with its own
event it takes the other pending events of batched topics (up to BATCH_SIZE, for up to
BATCH_SECONDS) into its transaction, so a backlog costs a few write transactions, not one
or two per event. The follow-ups after the commit run once per event: a job runs those of
the events whose key (FOLLOW_UPS_KEY) it holds in Redis, and a job that finds its event
handled but not processed (the one that handled it was cut off, or is running them now)
runs those no live job holds. Once its events are processed, the job drops their jobs still
waiting in the queue (drop_queued_jobs), in one round trip; those a worker has already
taken run, find their events processed, and only read.

A worker begins a batch for a paced event (crowd.queue.hooks.paced: a study's answers) at
most once per `Settings.qc_refresh_interval` seconds for its key: a job that comes sooner
waits, outside any transaction, and its batch then takes what arrived meanwhile. So a study
whose QC refresh takes R seconds costs the worker R in every interval, not back to back,
and the answers wait at most the interval and a refresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass

import redis
from rq import get_current_job
from rq.job import Job
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from crowd.plugins import load_features
from crowd.queue import EVENTS, event_job_id, job_queue
from crowd.queue.hooks import (
    Event,
    OwnTransaction,
    after_commit_handlers,
    batched_topics,
    in_transaction_handlers,
    known_topic,
    own_transaction_handler,
    pace_key,
)
from crowd.settings import Settings
from crowd.storage import Database, OutboxEvent, utcnow

log = logging.getLogger(__name__)

# A batch is bounded so that its job never nears EVENT_TIMEOUT, and on SQLite never holds
# the write lock long while the web's answers wait for it: it takes no more events once its
# transaction has run BATCH_SECONDS beyond its costliest event (the job's own event is
# handled whatever the time). The costliest is the one whose handler refreshes QC standing
# for every worker with unread answers (crowd.quality.stats), which a study's size sets;
# the events after it are then read already and cost milliseconds each, and leaving them
# to the next batch would make it pay for another refresh.
BATCH_SIZE = 200
BATCH_SECONDS = 1.0
# Which job runs an event's follow-ups: set (never deleted) by the job that runs them, kept
# for the job's timeout (crowd.queue.outbox.EVENT_TIMEOUT), as long as that job can live; a
# job cut off holds its events' keys until then, or until it runs again (same job id) and
# runs them itself.
FOLLOW_UPS_KEY = "crowd:outbox-follow-ups:{}"
# For a job enqueued without a timeout (or with RQ's -1, none at all): RQ's default one.
DEFAULT_JOB_TIMEOUT = 180


@dataclass
class JobContext:
    settings: Settings
    db: Database


_context: JobContext | None = None
_lock = threading.Lock()
# When this process last began a batch for each pacing key (time.monotonic()), by database.
_paced_at: dict[tuple[str, Hashable], float] = {}


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
    """Handle an outbox event, and other pending ones with it, with the handlers their topics'
    features registered (crowd.queue.hooks): in one transaction, in id order and each
    event's handlers in their order, then each event's follow-ups after the commit.

    An event already processed (by another job's batch, say) costs a read, never a write
    transaction. Without an RQ job (called inline) the event is handled alone and its
    follow-ups are left out.
    """
    ctx = context()
    with ctx.db.read_session() as session:
        row = session.get(OutboxEvent, event_id)
        if row is None:
            return f"outbox event {event_id} does not exist"
        if row.processed_at is not None:
            return f"outbox event {event_id} was already processed"
        event, handled = _event(row), row.handled_at is not None
    own = own_transaction_handler(event.topic)
    if own is not None:
        return _run_own_transaction(ctx.db, own, event)
    job = get_current_job()
    if job is not None and handled:
        # A run cut off after its transaction committed (Redis or the worker gone before the
        # follow-ups) comes back here, as does the job of an event another job's batch
        # handled: the handlers' work is done, only follow-ups are left.
        return _follow_up_handled(ctx.db, job, event)
    if job is not None:
        _keep_pace(ctx.settings, event)
    return _handle_batch(ctx.db, job, event_id)


def _keep_pace(settings: Settings, event: Event) -> None:
    """Wait until this process began its last batch for the event's pacing key at least
    `settings.qc_refresh_interval` seconds ago (no wait for an event not paced)."""
    every, key = settings.qc_refresh_interval, pace_key(event)
    if key is None or every <= 0:
        return
    now = time.monotonic()
    if len(_paced_at) > 1000:  # keys of studies long quiet
        for stale in [k for k, began in _paced_at.items() if now - began > every]:
            del _paced_at[stale]
    slot = (settings.database_url, key)
    wait = _paced_at.get(slot, now - every) + every - now
    if wait > 0:
        time.sleep(wait)
    _paced_at[slot] = time.monotonic()


def _event(row: OutboxEvent) -> Event:
    return Event(row.id, row.topic, dict(row.payload))


def _run_own_transaction(db: Database, handler: OwnTransaction, event: Event) -> str:
    """An event whose topic's handler opens its own transactions (a call to a crowd
    platform may take seconds)."""
    # Raises when the work fails: RQ retries the job, the sweep re-enqueues it.
    outcome = handler(event)
    with db.session() as session:
        row = session.get(OutboxEvent, event.id)
        if row is not None:
            row.processed_at = utcnow()
    log.info("%s %s", _job_tag(), outcome)
    return outcome


def _handle_batch(db: Database, job: Job | None, event_id: int) -> str:
    """Run the in-transaction handlers of the event and of the pending events its job takes
    with it, in one transaction; then the follow-ups of those it handled."""
    failing: int | None = None
    handled: list[int] = []
    processed: list[int] = []  # in the transaction: events with no follow-ups
    follow_ups: list[Event] = []
    try:
        with db.session() as session:
            # Locked: a re-queued job and the one it replaced never both run the handlers,
            # nor does a job that takes this event into its batch (it skips locked rows).
            row = session.get(OutboxEvent, event_id, with_for_update=True)
            if row is None:
                return f"outbox event {event_id} does not exist"
            if row.processed_at is not None:
                return f"outbox event {event_id} was already processed"
            # From the lock on: on SQLite the wait for it is the web's, not the batch's.
            started = time.monotonic()
            if not known_topic(row.topic):
                log.warning("%s unknown outbox topic %r, marked processed", _job_tag(), row.topic)
            rows = [row]
            # An event whose handlers failed before runs alone, so that it fails no batch.
            if job is not None and row.last_error is None and row.topic in batched_topics():
                rows = sorted([row, *_take_pending(session, event_id)], key=lambda r: r.id)
            longest = 0.0  # the costliest event's handling: the batch's one QC refresh
            for each in rows:
                spent = time.monotonic() - started
                if each is not row and spent - longest >= BATCH_SECONDS:
                    continue  # left to its own job, or the next batch
                began = time.monotonic()
                event = _event(each)
                # Another job's batch handled this job's own event while it waited for the
                # lock: only its follow-ups are left (below).
                if each.handled_at is None:
                    failing = each.id
                    for handle in in_transaction_handlers(event.topic):
                        handle(session, event)
                    each.handled_at = utcnow()
                    handled.append(each.id)
                    longest = max(longest, time.monotonic() - began)
                if job is not None and after_commit_handlers(event.topic):
                    follow_ups.append(event)
                else:
                    each.processed_at = utcnow()
                    processed.append(each.id)
            failing = None
    except Exception as error:
        # The whole batch rolled back; the job fails and RQ retries it.
        if failing is not None:
            _note_failure(db, failing, error)
        raise
    if job is not None:
        done = _follow_up(db, job, follow_ups, event_id) if follow_ups else []
        _drop_jobs(job, [*processed, *done], event_id)
    if event_id not in handled:
        tail = f"; handled {len(handled)} more" if handled else ""
        log.info("%s outbox event %s was handled by another job%s", _job_tag(), event_id, tail)
        return f"outbox event {event_id} was handled by another job{tail}"
    more = f" and {len(handled) - 1} more" if len(handled) > 1 else ""
    log.info("%s processed outbox event %s%s", _job_tag(), event_id, more)
    return f"processed outbox event {event_id}{more}"


def _take_pending(session: Session, event_id: int) -> Sequence[OutboxEvent]:
    """Lock the other pending events the batch may handle, oldest first. Rows another job
    holds are skipped (PostgreSQL; SQLite's transactions hold the whole database)."""
    return session.scalars(
        select(OutboxEvent)
        .where(
            OutboxEvent.processed_at.is_(None),
            OutboxEvent.handled_at.is_(None),
            OutboxEvent.last_error.is_(None),
            OutboxEvent.topic.in_(batched_topics()),
            OutboxEvent.id != event_id,
        )
        .order_by(OutboxEvent.id)
        .limit(BATCH_SIZE - 1)
        .with_for_update(skip_locked=True)
    ).all()


def _note_failure(db: Database, event_id: int, error: BaseException) -> None:
    """Mark the event whose handlers raised: from now on it runs alone, in its own job (with
    its retries), and never fails another event's batch again."""
    try:
        with db.session() as session:
            row = session.get(OutboxEvent, event_id)
            if row is not None:
                row.last_error = f"{type(error).__name__}: {error}"[:2000]
    except Exception:
        log.exception("%s could not note the failure of outbox event %s", _job_tag(), event_id)


def _follow_up_handled(db: Database, job: Job, event: Event) -> str:
    """The job's event is handled but not processed: run the follow-ups of it and of the
    other such events that no live job holds (those a job cut off left), if any."""
    with db.read_session() as session:
        others = [
            _event(row)
            for row in session.scalars(
                select(OutboxEvent)
                .where(
                    OutboxEvent.handled_at.is_not(None),
                    OutboxEvent.processed_at.is_(None),
                    OutboxEvent.id != event.id,
                )
                .order_by(OutboxEvent.id)
                .limit(BATCH_SIZE - 1)
            )
        ]
    done = _follow_up(db, job, [*others, event], event.id)
    _drop_jobs(job, done, event.id)
    if event.id not in done:
        log.info("%s outbox event %s: another job runs its follow-ups", _job_tag(), event.id)
        return f"outbox event {event.id} was handled by another job, which runs its follow-ups"
    more = f" and {len(done) - 1} more" if len(done) > 1 else ""
    log.info("%s ran the follow-ups of outbox event %s%s", _job_tag(), event.id, more)
    return f"processed outbox event {event.id}{more}: follow-ups only"


def _follow_up(db: Database, job: Job, events: list[Event], own_id: int) -> list[int]:
    """Run the follow-ups of those of `events` this job holds, and mark them processed in one
    transaction; returns their ids."""
    held = _hold(job, [event.id for event in events])
    # The job's own event last: when a follow-up fails, those before it are marked processed
    # and the rest are left to the job's retry, which comes back for them (its event is
    # not processed yet, and it holds their keys).
    chosen = sorted((e for e in events if e.id in held), key=lambda e: (e.id == own_id, e.id))
    done: list[int] = []
    try:
        for event in chosen:
            for follow_up in after_commit_handlers(event.topic):
                follow_up(job.connection, event)
            done.append(event.id)
    except Exception:
        if done:
            try:
                _mark_processed(db, done)
            except Exception:
                log.exception("%s could not mark outbox events %s processed", _job_tag(), done)
        raise
    if done:
        _mark_processed(db, done)
    return done


def _hold(job: Job, event_ids: list[int]) -> set[int]:
    """The events whose follow-ups this job runs: those whose key it sets now, or set in an
    earlier run (it was cut off), not those another job holds. One round trip to Redis."""
    keys = [FOLLOW_UPS_KEY.format(event_id) for event_id in event_ids]
    hold_for = int(job.timeout) if job.timeout and job.timeout > 0 else DEFAULT_JOB_TIMEOUT
    pipe = job.connection.pipeline(transaction=False)
    for key in keys:
        pipe.set(key, job.id, nx=True, ex=hold_for)
    for key in keys:
        pipe.get(key)
    holders = pipe.execute()[len(keys) :]
    mine = {job.id, job.id.encode()}
    return {event_id for event_id, holder in zip(event_ids, holders, strict=True) if holder in mine}


# The jobs of events a batch processed, dropped in one round trip: KEYS[1] is the queue's
# list, KEYS[i + 1] the hash of job ARGV[i]. A job is deleted only when it was taken off the
# list here: one a worker has taken (or RQ holds for a retry) is not on it, keeps its hash,
# and runs, finding its event processed. A job is never on the list twice (the sweep
# re-enqueues only jobs Redis does not hold alive), so each is looked for once, from the
# head, where the oldest wait.
_DROP_QUEUED = """
local dropped = 0
for i, id in ipairs(ARGV) do
    if redis.call("LREM", KEYS[1], 1, id) > 0 then
        redis.call("DEL", KEYS[i + 1])
        dropped = dropped + 1
    end
end
return dropped
"""


def drop_queued_jobs(connection: redis.Redis, event_ids: Collection[int]) -> int:
    """Remove the still-queued jobs of `event_ids` (events already processed) from the events
    queue and delete their hashes; returns how many. One round trip to Redis."""
    if not event_ids:
        return 0
    queue = job_queue(EVENTS, connection)
    ids = [event_job_id(event_id) for event_id in event_ids]
    drop = connection.register_script(_DROP_QUEUED)
    keys = [queue.key, *(queue.job_class.key_for(each) for each in ids)]
    return int(drop(keys=keys, args=ids))


def _drop_jobs(job: Job, processed: list[int], own_id: int) -> None:
    """Drop the still-queued jobs of the processed events, not the job's own: each would only
    find its event processed (a read, and RQ's bookkeeping for a job). When Redis fails this,
    they run as they would have."""
    others = [event_id for event_id in processed if event_id != own_id]
    try:
        dropped = drop_queued_jobs(job.connection, others)
    except redis.RedisError as error:
        log.warning("%s could not drop the queued jobs of %d processed outbox events: %s",
                    _job_tag(), len(others), error)  # fmt: skip
        return
    if dropped:
        log.debug("%s dropped %d queued jobs of processed outbox events", _job_tag(), dropped)


def _mark_processed(db: Database, event_ids: list[int]) -> None:
    with db.session() as session:
        session.execute(
            update(OutboxEvent)
            .where(OutboxEvent.id.in_(event_ids), OutboxEvent.processed_at.is_(None))
            .values(processed_at=utcnow())
            .execution_options(synchronize_session=False)
        )
