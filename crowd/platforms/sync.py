"""Syncing our platform sessions with what each platform says about them: submitted,
returned and abandoned work, answers recovered from the platform's copy, another worker id
or a wrong completion code flagged, places reclaimed; the sync job and its periodic sweep."""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import redis
from rq import get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import JobStatus
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from crowd.exceptions import AuthenticationError
from crowd.platforms.actions import queue_action
from crowd.platforms.providers import PROVIDERS, Provider
from crowd.platforms.providers.base import RemoteSubmission
from crowd.platforms.sessions import ANSWERS_FIELD, CODE_FIELD, provider_code
from crowd.quality.exclusion import study_qc
from crowd.quality.standing import explanation_facts, response_facts
from crowd.queue import EVENTS, fetch_job, job_queue
from crowd.queue.hooks import SweepContext, every_sweep
from crowd.queue.jobs import context
from crowd.security import WorkerSigner
from crowd.settings import Settings
from crowd.storage import (
    Assignment,
    AssignmentState,
    Database,
    Item,
    OutboxEvent,
    PlatformSession,
    Publication,
    RemoteTask,
    Response,
    SessionState,
    Study,
    StudyStatus,
    StudyWorker,
    Worker,
    utcnow,
)
from crowd.storage.outbox import RESPONSE_STORED
from crowd.storage.qc import Decision
from crowd.studies import lifecycle as studies
from tasks import get_hit_type

log = logging.getLogger(__name__)


@dataclass
class SyncReport:
    """What one sync with the platforms changed."""

    seen: int = 0
    submitted: int = 0
    approved: int = 0
    rejected: int = 0
    returned: int = 0
    abandoned: int = 0
    recovered: int = 0
    reclaimed: int = 0
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def sync_study(db: Database, settings: Settings, signer: WorkerSigner, study_id: int) -> SyncReport:
    """Bring our platform sessions in line with what each platform says about them.

    The platforms are read outside any transaction (paging through every HIT can take a
    while, and SQLite's write lock would stall every worker meanwhile); what they said is
    then applied in one short transaction, and places are reclaimed after it commits.
    """
    report = SyncReport()
    with db.read_session() as session:
        study = studies.get_study(session, study_id)
        plans = [
            (publication.id, publication.provider, dict(publication.remote), task_ids)
            for publication in session.scalars(
                select(Publication).where(Publication.study_id == study.id).order_by(Publication.id)
            ).all()
            if (
                task_ids := list(
                    session.scalars(
                        select(RemoteTask.remote_id).where(
                            RemoteTask.publication_id == publication.id
                        )
                    ).all()
                )
            )
        ]
    seen: list[tuple[int, list[RemoteSubmission], set[str]]] = []
    for publication_id, name, remote, task_ids in plans:
        provider = PROVIDERS.get(name)
        found: list[RemoteSubmission] = []
        failed: set[str] = set()
        for task_id in task_ids:
            # One task the platform lost (MTurk deletes old HITs) must not stop the rest.
            try:
                found.extend(provider.sync(settings, remote, [task_id]))
            except Exception as error:  # noqa: BLE001 - reported, the sync goes on
                failed.add(task_id)
                report.problems.append(f"{name} task {task_id}: {type(error).__name__}: {error}")
        seen.append((publication_id, found, failed))
    ended: list[tuple[str, dict[str, Any], str, int]] = []
    now = utcnow()
    with db.session() as session:
        study = studies.get_study(session, study_id)
        for publication_id, found, failed in seen:
            publication = session.get(Publication, publication_id)
            if publication is None:
                continue
            provider = PROVIDERS.get(publication.provider)
            tasks = session.scalars(
                select(RemoteTask).where(RemoteTask.publication_id == publication.id)
            ).all()
            by_remote = {task.remote_id: task for task in tasks}
            counts: dict[str, int] = {}
            for submission in found:
                report.seen += 1
                task = by_remote.get(submission.task_remote_id)
                if task is None:
                    continue
                before = report.returned + report.abandoned
                _sync_one(session, settings, signer, study, provider, task, submission, report)
                if report.returned + report.abandoned > before:
                    counts[task.remote_id] = counts.get(task.remote_id, 0) + 1
            for task in tasks:
                if task.remote_id not in failed:
                    task.synced_at = now
            listed = {submission.remote_id for submission in found}
            _abandon_unlisted(session, study, publication, listed, report)
            ended.extend(
                (publication.provider, dict(publication.remote), task_id, count)
                for task_id, count in counts.items()
            )
    for name, remote, task_id, count in ended:
        # Places of work that ended undone go back to the crowd (where the platform does
        # not reopen them itself); recorded after the call, in a transaction of its own.
        try:
            added = PROVIDERS.get(name).reclaim(settings, remote, task_id, count)
        except Exception as error:  # noqa: BLE001 - the next sync tries again
            report.problems.append(f"{name} task {task_id}: reclaiming places: {error}")
            continue
        if added:
            with db.session() as session:
                task = session.scalar(
                    select(RemoteTask).where(
                        RemoteTask.provider == name, RemoteTask.remote_id == task_id
                    )
                )
                if task is not None:
                    task.places += added
            report.reclaimed += added
    return report


def _sync_one(
    session: Session,
    settings: Settings,
    signer: WorkerSigner,
    study: Study,
    provider: Provider,
    task: RemoteTask,
    submission: RemoteSubmission,
    report: SyncReport,
) -> None:
    row = session.scalar(
        select(PlatformSession)
        .where(
            PlatformSession.provider == provider.name,
            PlatformSession.remote_id == submission.remote_id,
        )
        .with_for_update()
    )
    if row is None:
        if submission.state not in ("submitted", "approved", "rejected"):
            return  # a worker who has not reached our page yet
        row = _recover_session(session, study, provider, task, submission)
    worker = session.get(Worker, row.worker_id)
    if worker is not None and worker.external_id != submission.worker_external_id:
        _problem(row, report, f"the platform says worker {submission.worker_external_id}")
        return
    row.remote_state = submission.raw_state
    row.submission_id = submission.submission_id or row.submission_id
    handed_in = submission.state in ("submitted", "approved", "rejected")
    if handed_in:
        # Every sync, not only the first to see the hand-in: answers lost later (a restore
        # from an older backup) are still on the platform, signed by us.
        if _recover_answers(session, signer, study, row, submission, report):
            report.recovered += 1
        if row.state in (SessionState.OPEN, SessionState.ABANDONED):
            _check_handover(session, settings, row, submission, report)
    previous = SessionState(row.state)
    new = {
        "submitted": SessionState.SUBMITTED,
        "approved": SessionState.APPROVED,
        "rejected": SessionState.REJECTED,
        "returned": SessionState.RETURNED,
        "timed_out": SessionState.ABANDONED,
    }.get(submission.state)
    if new is None or new == previous:
        return
    if previous in (SessionState.APPROVED, SessionState.REJECTED) and new == SessionState.SUBMITTED:
        return  # our decision is on its way to the platform
    row.state = new
    if new == SessionState.SUBMITTED:
        row.submitted_at = row.submitted_at or utcnow()
        report.submitted += 1
        if not row.problems:
            _apply_decision(session, study, row)
    elif new == SessionState.APPROVED:
        report.approved += 1
    elif new == SessionState.REJECTED:
        report.rejected += 1
    else:
        freed = _free_open_assignments(session, row, new)
        _flag_unhanded(session, row, report)
        if new == SessionState.RETURNED:
            report.returned += 1
        else:
            report.abandoned += 1
        log.info("platform session %s %s: %d open item(s) freed", row.id, new, freed)


def _check_handover(
    session: Session,
    settings: Settings,
    row: PlatformSession,
    submission: RemoteSubmission,
    report: SyncReport,
) -> None:
    """Work handed in on the platform must be work we stored, with the code we issued
    for it: anything else (a form posted straight to MTurk, a guessed code) is flagged,
    and flagged sessions are never approved on their own."""
    stored = session.scalar(
        select(func.count(Response.id))
        .join(Assignment, Assignment.id == Response.assignment_id)
        .where(Assignment.platform_session_id == row.id)
    )
    if not stored:
        _problem(row, report, "handed in without any answer stored with us")
    entered = submission.code if submission.code is not None else submission.answers.get(CODE_FIELD)
    expected = provider_code(settings, row)
    if entered is None:
        _problem(row, report, "handed in without our completion code")
    elif not hmac.compare_digest(entered.strip().upper(), expected):
        _problem(row, report, f"completion code {entered[:40]!r} is not the one we issued")


def _flag_unhanded(session: Session, row: PlatformSession, report: SyncReport) -> None:
    """Answers stored in a session the platform never received (returned, abandoned, or
    opened with made-up ids): kept, but flagged for the reviewer."""
    stored = session.scalar(
        select(func.count(Response.id))
        .join(Assignment, Assignment.id == Response.assignment_id)
        .where(Assignment.platform_session_id == row.id)
    )
    if stored:
        _problem(row, report, f"{stored} answer(s) stored but never handed in on the platform")


def _problem(row: PlatformSession, report: SyncReport, text: str) -> None:
    """Flag the session; a sync reports what it found new (every sync looks again)."""
    if text in (row.problems or []):
        return
    row.problems = [*(row.problems or []), text]
    report.problems.append(f"session {row.remote_id}: {text}")


def _abandon_unlisted(
    session: Session,
    study: Study,
    publication: Publication,
    listed: set[str],
    report: SyncReport,
) -> None:
    """Open sessions the platform no longer lists after their time ran out: the worker
    returned or abandoned them (MTurk lists only submitted work)."""
    duration = publication.options.get("duration_s")
    if not duration:
        return
    cutoff = utcnow() - timedelta(seconds=int(duration))
    stale = session.scalars(
        select(PlatformSession)
        .join(RemoteTask, RemoteTask.id == PlatformSession.remote_task_id)
        .where(
            RemoteTask.publication_id == publication.id,
            PlatformSession.state == SessionState.OPEN,
            PlatformSession.created_at < cutoff,
        )
    ).all()
    for row in stale:
        if row.remote_id in listed:
            continue
        row.state = SessionState.ABANDONED
        _free_open_assignments(session, row, SessionState.ABANDONED)
        _flag_unhanded(session, row, report)
        report.abandoned += 1


def _free_open_assignments(session: Session, row: PlatformSession, why: SessionState) -> int:
    state = AssignmentState.RETURNED if why == SessionState.RETURNED else AssignmentState.ABANDONED
    freed = 0
    for assignment in session.scalars(
        select(Assignment).where(
            Assignment.platform_session_id == row.id,
            Assignment.state == AssignmentState.ASSIGNED,
        )
    ).all():
        assignment.transition(state)
        freed += 1
    return freed


def _recover_session(
    session: Session,
    study: Study,
    provider: Provider,
    task: RemoteTask,
    submission: RemoteSubmission,
) -> PlatformSession:
    from crowd.work.assignments import get_or_create_worker

    worker = get_or_create_worker(session, provider.name, submission.worker_external_id)
    row = PlatformSession(
        study_id=study.id,
        worker_id=worker.id,
        remote_task_id=task.id,
        provider=provider.name,
        remote_id=submission.remote_id,
        submission_id=submission.submission_id,
        state=SessionState.OPEN,
    )
    session.add(row)
    session.flush()
    return row


def _recover_answers(
    session: Session,
    signer: WorkerSigner,
    study: Study,
    row: PlatformSession,
    submission: RemoteSubmission,
    report: SyncReport,
) -> bool:
    """Store answers that the platform holds (signed by us) and we lost; True if any."""
    blob = submission.answers.get(ANSWERS_FIELD)
    if not blob:
        return False
    try:
        record = signer.load_record(blob)
    except AuthenticationError:
        _problem(row, report, "the answers posted to the platform are not ours")
        return False
    if (
        not isinstance(record, dict)
        or record.get("study") != study.id
        or record.get("session") != row.remote_id
    ):
        _problem(row, report, "the answers posted belong to another session")
        return False
    entries = [
        entry
        for entry in record.get("responses", [])
        if isinstance(entry, dict) and isinstance(entry.get("item"), int)
    ]
    # One query for what we hold: every sync looks, and mostly nothing is missing.
    held = set(
        session.scalars(
            select(Response.item_id).where(
                Response.item_id.in_([entry["item"] for entry in entries]),
                Response.worker_id == row.worker_id,
            )
        ).all()
    )
    hit = get_hit_type(study.hit_type)
    config = study_qc(study)
    recovered = 0
    for entry in entries:
        if entry["item"] in held:
            continue
        item = session.get(Item, entry["item"])
        if item is None or item.study_id != study.id:
            continue
        assignment = session.scalar(
            select(Assignment).where(
                Assignment.item_id == item.id, Assignment.worker_id == row.worker_id
            )
        )
        now = utcnow()
        if assignment is None:
            assignment = Assignment(
                study_id=study.id,
                item_id=item.id,
                worker_id=row.worker_id,
                provider=row.provider,
                state=AssignmentState.SUBMITTED,
                platform_session_id=row.id,
                submitted_at=now,
            )
            session.add(assignment)
            session.execute(update(Item).where(Item.id == item.id).values(holders=Item.holders + 1))
            session.flush()
        elif assignment.state == AssignmentState.ASSIGNED:
            assignment.transition(AssignmentState.SUBMITTED)
            assignment.submitted_at = now
        elif assignment.state not in (
            AssignmentState.SUBMITTED, AssignmentState.APPROVED, AssignmentState.REJECTED
        ):  # fmt: skip
            # Abandoned or returned by our sweep while the platform kept the work: the
            # platform's record wins, but the item's place was freed and may be taken.
            assignment.state = AssignmentState.SUBMITTED
            session.execute(update(Item).where(Item.id == item.id).values(holders=Item.holders + 1))
        assignment.platform_session_id = row.id
        answer = entry.get("answer") or {}
        # The QC facts a live answer gets (gold scored, attention checked), but no time: the
        # platform's record does not say how long the worker took.
        flags = {**response_facts(hit, item, answer, None, config), "recovered_from": row.provider}
        if entry.get("explanation"):
            flags = explanation_facts(flags, entry["explanation"], None, config)
        response = Response(
            assignment=assignment,
            study_id=study.id,
            item_id=item.id,
            worker_id=row.worker_id,
            answer=answer,
            explanation=entry.get("explanation"),
            reasons=entry.get("reasons") or [],
            score=hit.score(item.expected, answer),
            qc_flags=flags,
            explained_at=now if entry.get("explanation") else None,
        )
        session.add(response)
        session.flush()
        session.add(
            OutboxEvent(
                topic=RESPONSE_STORED,
                payload={"response_id": response.id, "study_id": study.id},
            )
        )
        recovered += 1
    if recovered:
        row.items_done = max(row.items_done, len(record.get("responses", [])))
    return recovered > 0


def _apply_decision(session: Session, study: Study, row: PlatformSession) -> None:
    """A reviewer who decided about the worker before the platform had the work: act now."""
    standing = session.scalar(
        select(StudyWorker).where(
            StudyWorker.study_id == study.id, StudyWorker.worker_id == row.worker_id
        )
    )
    if standing is None or standing.decision is None:
        return
    decision = Decision(standing.decision)
    if decision in (Decision.APPROVED, Decision.SOFT_REJECTED):
        # The reviewer's reason goes with the payment, as when the work was there to decide.
        feedback = _last_reason(session, study.id, row.worker_id, ("approve", "soft_reject"))
        queue_action(
            session, row.provider, "approve", study.id, row.worker_id, row.id,
            {"feedback": feedback},
        )  # fmt: skip
    elif decision == Decision.REJECTED:
        feedback = _last_reason(session, study.id, row.worker_id, ("reject",))
        queue_action(
            session, row.provider, "reject", study.id, row.worker_id, row.id,
            {"feedback": feedback or "The work did not meet the task's standard."},
        )  # fmt: skip


def _last_reason(session: Session, study_id: int, worker_id: int, actions: tuple[str, ...]) -> str:
    """The reason of the reviewer's latest decision among `actions` ("" if none was given)."""
    from crowd.storage import AuditEntry

    entry = session.scalar(
        select(AuditEntry)
        .where(
            AuditEntry.study_id == study_id,
            AuditEntry.worker_id == worker_id,
            AuditEntry.action.in_(actions),
        )
        .order_by(AuditEntry.id.desc())
        .limit(1)
    )
    return entry.reason if entry is not None and entry.reason else ""


def _job_tag() -> str:
    job = get_current_job()
    return f"[job {job.id}]" if job else "[inline]"


def sync_platforms(study_id: int) -> str:
    """RQ job (queue EVENTS): sync a published study with its crowd platforms."""
    ctx = context()
    with ctx.db.read_session() as session:
        if session.get(Study, study_id) is None:
            return f"study {study_id} does not exist"
    signer = WorkerSigner(ctx.settings.secret_key)
    report = sync_study(ctx.db, ctx.settings, signer, study_id)
    log.info("%s synced study %s with its platforms: %s", _job_tag(), study_id, report.to_json())
    return f"synced study {study_id}: {report.to_json()}"


def request_platform_syncs(connection: redis.Redis, db: Database) -> int:
    """Enqueue a sync for every published study with platform publications (coalesced)."""
    with db.read_session() as session:
        study_ids = session.scalars(
            select(Study.id)
            .join(Publication, Publication.study_id == Study.id)
            # A paused study's platform workers may still hand in what they started.
            .where(Study.status.in_((StudyStatus.PUBLISHED, StudyStatus.PAUSED)))
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


@every_sweep("platform-syncs", order=-10, every=lambda settings: settings.platform_sync_interval)
def sync_published_studies(sweep: SweepContext) -> None:
    """Every CROWD_PLATFORM_SYNC_INTERVAL seconds, a sync of each study on a platform."""
    request_platform_syncs(sweep.connection, sweep.db)
