"""RQ jobs. Each takes ids, opens its own session, and is safe to run twice."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import redis
from rq import get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from crowd.queue import EVENTS, REPORTS, fetch_job, job_queue
from crowd.settings import Settings
from crowd.storage import Database, OutboxEvent, utcnow

log = logging.getLogger(__name__)

REPORT_TIMEOUT = 600


@dataclass
class JobContext:
    settings: Settings
    db: Database


_context: JobContext | None = None
_lock = threading.Lock()


def configure(settings: Settings) -> JobContext:
    """Set the settings jobs run with in this process (`crowd worker` and tests call it)."""
    global _context
    # Outcome hooks of deliveries (crowd.delivery) register themselves on import.
    import crowd.scale_completion  # noqa: F401

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
    """Handle one outbox event: worker statistics and QC standing, then a report refresh."""
    from crowd import scale_completion, stats, webhooks
    from crowd.annotations import RESPONSES_IMPORTED
    from crowd.review import WORKER_BLOCKED
    from crowd.taboo import TABOO_MOVE
    from crowd.work import RESPONSE_EXPLAINED, RESPONSE_STORED

    done = _platform_action(event_id)
    if done is not None:
        return done
    db = context().db
    with db.session() as session:
        row = session.get(OutboxEvent, event_id)
        if row is None:
            return f"outbox event {event_id} does not exist"
        if row.processed_at is not None:
            return f"outbox event {event_id} was already processed"
        study_id = row.payload.get("study_id")
        topic = row.topic
        moved: dict[str, object] | None = None
        if row.topic in (RESPONSE_STORED, RESPONSE_EXPLAINED):
            stats.refresh_after_response(session, int(row.payload["response_id"]))
            # After the QC refresh, so blocks its rules just made go out too.
            webhooks.after_response(session, int(row.payload["response_id"]),
                                    stored=row.topic == RESPONSE_STORED)  # fmt: skip
            scale_completion.after_response(session, int(row.payload["response_id"]))
        elif row.topic == RESPONSES_IMPORTED:
            for worker_id in row.payload.get("worker_ids", []):
                stats.refresh_worker(session, int(worker_id), int(row.payload["study_id"]))
        elif row.topic == TABOO_MOVE:
            moved = dict(row.payload)
        elif row.topic == WORKER_BLOCKED:
            webhooks.after_block(session, int(row.payload["study_id"]),
                                 int(row.payload["worker_id"]))  # fmt: skip
            scale_completion.after_block(session, int(row.payload["study_id"]),
                                         int(row.payload["worker_id"]))  # fmt: skip
        else:
            log.warning("%s unknown outbox topic %r, marked processed", _job_tag(), row.topic)
        row.processed_at = utcnow()
    job = get_current_job()
    if moved is not None and job is not None:
        from crowd.taboo_jobs import after_move

        after_move(job.connection, event_id, moved)
    if study_id is not None and job is not None:
        request_report(job.connection, int(study_id))
        if topic in (RESPONSE_STORED, RESPONSES_IMPORTED):
            from crowd.training import maybe_retrain

            maybe_retrain(db, job.connection, int(study_id))
    log.info("%s processed outbox event %s", _job_tag(), event_id)
    return f"processed outbox event {event_id}"


def _platform_action(event_id: int) -> str | None:
    """A queued call to a crowd platform: made outside any transaction (it may take
    seconds), then the event is marked processed; None for other events."""
    from crowd.platforms import PLATFORM_ACTION, perform_action

    ctx = context()
    with ctx.db.read_session() as session:
        row = session.get(OutboxEvent, event_id)
        if row is None or row.topic != PLATFORM_ACTION or row.processed_at is not None:
            return None
        action_id = int(row.payload["action_id"])
    # Raises when the platform call fails: RQ retries the job, the sweep re-enqueues it.
    outcome = perform_action(ctx.db, ctx.settings, action_id)
    with ctx.db.session() as session:
        row = session.get(OutboxEvent, event_id)
        if row is not None:
            row.processed_at = utcnow()
    log.info("%s %s", _job_tag(), outcome)
    return outcome


def sync_platforms(study_id: int) -> str:
    """Sync a published study with its crowd platforms (MTurk, Prolific)."""
    from crowd import platforms
    from crowd.security import WorkerSigner
    from crowd.storage import Study

    ctx = context()
    with ctx.db.read_session() as session:
        if session.get(Study, study_id) is None:
            return f"study {study_id} does not exist"
    signer = WorkerSigner(ctx.settings.secret_key)
    report = platforms.sync_study(ctx.db, ctx.settings, signer, study_id)
    log.info("%s synced study %s with its platforms: %s", _job_tag(), study_id, report.to_json())
    return f"synced study {study_id}: {report.to_json()}"


def request_platform_syncs(connection: redis.Redis, db: Database) -> int:
    """Enqueue a sync for every published study with platform publications (coalesced)."""
    from sqlalchemy import select

    from crowd.storage import Publication, Study, StudyStatus

    with db.read_session() as session:
        study_ids = session.scalars(
            select(Study.id)
            .join(Publication, Publication.study_id == Study.id)
            .where(Study.status == StudyStatus.PUBLISHED)
            .distinct()
        ).all()
    queued = 0
    for study_id in study_ids:
        job_id = f"platform-sync-{study_id}"
        try:
            existing = fetch_job(job_id, connection)
            if existing.get_status(refresh=False) in (JobStatus.QUEUED, JobStatus.STARTED):
                continue
        except NoSuchJobError:
            pass
        job_queue(EVENTS, connection).enqueue(
            sync_platforms, study_id, job_id=job_id, job_timeout=600, result_ttl=600
        )
        queued += 1
    return queued


def report_job_id(study_id: int) -> str:
    return f"report-{study_id}"


def request_report(connection: redis.Redis, study_id: int) -> Job | None:
    """Enqueue a report refresh unless one is already waiting (refreshes coalesce)."""
    try:
        existing = fetch_job(report_job_id(study_id), connection)
        if existing.get_status(refresh=False) in (JobStatus.QUEUED, JobStatus.DEFERRED):
            return None
    except NoSuchJobError:
        pass
    return job_queue(REPORTS, connection).enqueue(
        refresh_report,
        study_id,
        job_id=report_job_id(study_id),
        job_timeout=REPORT_TIMEOUT,
        result_ttl=3600,
    )


def refresh_report(study_id: int) -> str:
    """Recompute the study's analysis and write its JSON and HTML report.

    The analysis runs in a read-only session, so on SQLite it holds no lock while answers
    keep coming; only storing the result writes. The workers' QC standing it reads was
    refreshed by the job of each response (process_event).
    """
    from crowd.reports import compute_report, store_report

    ctx = context()
    with ctx.db.read_session() as session:
        computed = compute_report(session, ctx.settings, study_id, refresh=False)
    with ctx.db.session() as session:
        n = store_report(session, computed).responses_seen
    log.info("%s refreshed the report of study %s (%d responses)", _job_tag(), study_id, n)
    return f"report of study {study_id}: {n} responses"
