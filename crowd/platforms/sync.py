"""Studies on crowd platforms (MTurk, Prolific): publishing, workers arriving on our page,
handing finished work back, syncing with the platform, and the platform calls we owe.

The providers (crowd/providers/) speak to the platforms; this module keeps our records of
it: publications and their remote tasks (HITs, Prolific studies), platform sessions (an
MTurk assignment or a Prolific submission, covering a run of our assignments), and the
calls decided by reviewers, which a job makes after the commit (PlatformAction rows).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import redis
from rq import get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import JobStatus
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from crowd.exceptions import (
    AuthenticationError,
    InvalidAction,
    NotFound,
    PermissionDenied,
    StudyNotOpen,
    ValidationError,
)
from crowd.platforms.providers import PROVIDERS, Provider
from crowd.platforms.providers.base import ActionTarget, Binding, RemoteSubmission, StudyRef
from crowd.queue import EVENTS, fetch_job, job_queue
from crowd.queue.hooks import Event, SweepContext, every_sweep, own_transaction
from crowd.queue.jobs import context
from crowd.security import WorkerSigner
from crowd.settings import Settings
from crowd.storage import (
    ActionStatus,
    Assignment,
    AssignmentState,
    Database,
    Item,
    ItemKind,
    OutboxEvent,
    PlatformAction,
    PlatformSession,
    Publication,
    RemoteTask,
    RemoteTaskStatus,
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

PLATFORM_ACTION = "platform.action"
# Form field of the MTurk page that carries the session's answers, signed by us, so an
# answer can be recovered from MTurk's Answer XML if our own record of it is lost.
ANSWERS_FIELD = "crowd_answers"
CODE_FIELD = "crowd_code"
# A call that failed this many times is given up (and shown as failed to the reviewer).
MAX_ACTION_ATTEMPTS = 8


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


# --------------------------------------------------------------------------- publishing


def work_slots(session: Session, study: Study) -> int:
    """Answers the study still needs: open places of real items."""
    target = int(study.config.get("annotations_per_item", 1))
    rows = session.execute(
        select(func.coalesce(Item.target, target), Item.holders).where(
            Item.study_id == study.id, Item.kind == ItemKind.REAL
        )
    ).all()
    return sum(max(0, int(want) - int(held)) for want, held in rows)


def study_ref(session: Session, study: Study) -> StudyRef:
    hit = get_hit_type(study.hit_type)
    return StudyRef(
        id=study.id,
        name=study.name,
        hit_type=study.hit_type,
        config=study.config,
        work_slots=work_slots(session, study),
        title=hit.title,
    )


def open_study(session: Session, study: Study, providers: Iterable[str]) -> Study:
    """Open a study to workers of the given providers (e.g. local, sim); `publish` also
    creates what a remote platform needs."""
    names = sorted(set(providers))
    if not names:
        raise ValidationError("name at least one provider to publish to", "providers")
    for name in names:
        PROVIDERS.get(name)  # raises with the list of known providers
    n_items = session.scalar(
        select(func.count(Item.id)).where(
            Item.study_id == study.id, Item.kind.in_((ItemKind.REAL, ItemKind.GOLD))
        )
    )
    if not n_items:
        raise StudyNotOpen(f"study {study.id} has no items yet: import some first")
    study.providers = sorted(set(study.providers) | set(names))
    if study.status != StudyStatus.PUBLISHED:
        study.status = StudyStatus.PUBLISHED
        study.published_at = utcnow()
    return study


def publish(
    session: Session,
    settings: Settings,
    study: Study,
    providers: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, str]]:
    """Open the study to each provider's workers; returns the links per provider.

    For a platform, the options are checked before anything is sent, a Publication with
    the platform's ids is kept, and a retried publish sends the same request tokens.
    """
    options = dict(options or {})
    unknown = sorted(set(options) - set(providers))
    if unknown:
        raise ValidationError(f"options given for providers not published to: {unknown}")
    checked = {
        name: PROVIDERS.get(name).validate_options(options.get(name) or {}) for name in providers
    }
    open_study(session, study, providers)
    ref = study_ref(session, study)
    links: dict[str, dict[str, str]] = {}
    for name in sorted(set(providers)):
        provider = PROVIDERS.get(name)
        if not provider.remote:
            links[name] = provider.publish(settings, ref, settings.base_url, {}, "").urls
            continue
        earlier = session.scalar(
            select(func.count(Publication.id)).where(
                Publication.study_id == study.id, Publication.provider == name
            )
        )
        # The same token for the same (study, provider, n-th publication): a publish retried
        # after a lost answer or a failed commit finds what the first try created.
        token = f"crowd-{study.id}-{name}-{(earlier or 0) + 1}"
        made = provider.publish(settings, ref, settings.base_url, checked[name], token)
        publication = Publication(
            study_id=study.id, provider=name, options=checked[name], remote=made.remote
        )
        session.add(publication)
        session.flush()
        for task in made.tasks:
            session.add(
                RemoteTask(
                    publication_id=publication.id,
                    study_id=study.id,
                    provider=name,
                    remote_id=task.remote_id,
                    places=task.places,
                    expires_at=task.expires_at,
                )
            )
        links[name] = made.urls
    session.flush()
    return links


def publications(session: Session, study: Study) -> list[dict[str, Any]]:
    rows = session.scalars(
        select(Publication).where(Publication.study_id == study.id).order_by(Publication.id)
    ).all()
    out = []
    for row in rows:
        tasks = session.scalars(
            select(RemoteTask).where(RemoteTask.publication_id == row.id).order_by(RemoteTask.id)
        ).all()
        out.append(
            {
                "id": row.id,
                "provider": row.provider,
                "options": row.options,
                "remote": row.remote,
                "created_at": row.created_at.isoformat(),
                "tasks": [
                    {
                        "remote_id": task.remote_id,
                        "places": task.places,
                        "status": str(task.status),
                        "expires_at": task.expires_at.isoformat() if task.expires_at else None,
                        "synced_at": task.synced_at.isoformat() if task.synced_at else None,
                    }
                    for task in tasks
                ],
            }
        )
    return out


# --------------------------------------------------------------------------- the page


@dataclass(frozen=True)
class PageBinding:
    """A platform worker on our page: the worker token the page sends, or a preview."""

    preview: bool
    worker_id: int | None = None
    session_id: int | None = None
    token: str | None = None


def bind_page(
    session: Session,
    settings: Settings,
    signer: WorkerSigner,
    study: Study,
    provider_name: str,
    args: Mapping[str, str],
) -> PageBinding:
    """Tie the platform's query parameters to a worker and a platform session of ours."""
    provider = PROVIDERS.get(provider_name)
    if not provider.external_page or provider_name not in study.providers:
        raise NotFound(f"study {study.id} is not published to {provider_name}")
    binding = provider.bind(args, settings)
    if binding is None:
        return PageBinding(preview=True)
    task = session.scalar(
        select(RemoteTask).where(
            RemoteTask.provider == provider_name, RemoteTask.remote_id == binding.task_remote_id
        )
    )
    if task is None or task.study_id != study.id:
        raise NotFound(f"{binding.task_remote_id} is not one of study {study.id}'s tasks")
    from crowd.work.assignments import get_or_create_worker

    worker = get_or_create_worker(session, provider_name, binding.worker_external_id)
    row = session.scalar(
        select(PlatformSession)
        .where(
            PlatformSession.provider == provider_name,
            PlatformSession.remote_id == binding.session_remote_id,
        )
        .with_for_update()
    )
    if row is None:
        # The platform limits how many workers hold a task at once; a page opened with
        # made-up assignment ids beyond that (with some slack for returned places that a
        # sync has not seen yet) is refused, so forged sessions cannot fill the study.
        holding = session.scalar(
            select(func.count(PlatformSession.id)).where(
                PlatformSession.remote_task_id == task.id,
                PlatformSession.state == SessionState.OPEN,
            )
        )
        if (holding or 0) >= 2 * task.places + 2:
            raise PermissionDenied(
                "this task has no open place: accept it on the platform, or try again later"
            )
        row = PlatformSession(
            study_id=study.id,
            worker_id=worker.id,
            remote_task_id=task.id,
            provider=provider_name,
            remote_id=binding.session_remote_id,
            submit_to=binding.submit_to,
        )
        session.add(row)
        try:
            with session.begin_nested():
                session.flush()
        except IntegrityError:
            # The same page loaded twice at once (PostgreSQL): the other request made it.
            row = session.scalar(
                select(PlatformSession).where(
                    PlatformSession.provider == provider_name,
                    PlatformSession.remote_id == binding.session_remote_id,
                )
            )
            if row is None:
                raise
    if row.worker_id != worker.id or row.remote_task_id != task.id:
        # Someone else's assignment id in the address: refuse rather than mix their work.
        raise PermissionDenied("this assignment belongs to another worker or task")
    return PageBinding(
        preview=False,
        worker_id=worker.id,
        session_id=row.id,
        token=signer.sign(worker.id, row.id),
    )


def load_session(session: Session, session_id: int, worker_id: int) -> PlatformSession:
    row = session.get(PlatformSession, session_id)
    if row is None or row.worker_id != worker_id:
        raise AuthenticationError("this platform session is not yours: reload the task page")
    return row


def completion(
    session: Session, settings: Settings, signer: WorkerSigner, row: PlatformSession
) -> dict[str, Any] | None:
    """How the page hands the session's work to the platform, once answers are stored.

    None while the session has no stored answer: there is nothing to submit, and the
    worker should return the task on the platform.
    """
    stored = session.scalars(
        select(Response)
        .join(Assignment, Assignment.id == Response.assignment_id)
        .where(Assignment.platform_session_id == row.id)
        .order_by(Response.id)
    ).all()
    if not stored:
        return None
    provider = PROVIDERS.get(row.provider)
    if row.completion_code is None:
        row.completion_code = provider_code(settings, row)
    worker = session.get(Worker, row.worker_id)
    task = session.get(RemoteTask, row.remote_task_id)
    binding = Binding(
        worker_external_id=worker.external_id if worker else "",
        session_remote_id=row.remote_id,
        task_remote_id=task.remote_id if task else "",
        submit_to=row.submit_to,
    )
    handover = provider.completion(settings, binding, row.completion_code)
    if handover.get("kind") == "form":
        # Our own item ids: they mean nothing to the worker (external ids might).
        records = [
            {
                "item": response.item_id,
                "answer": response.answer,
                "explanation": response.explanation,
                "reasons": response.reasons,
            }
            for response in stored
        ]
        handover["fields"] = {
            **handover.get("fields", {}),
            CODE_FIELD: row.completion_code,
            ANSWERS_FIELD: signer.sign_record(
                {"study": row.study_id, "session": row.remote_id, "responses": records}
            ),
        }
    handover["items_done"] = len(stored)
    return handover


def provider_code(settings: Settings, row: PlatformSession) -> str:
    """The completion code of a session: derived from our secret, so it cannot be guessed."""
    digest = hmac.new(
        settings.secret_key.encode(), f"{row.provider}:{row.remote_id}".encode(), hashlib.sha256
    ).hexdigest()
    return "C" + digest[:11].upper()


# --------------------------------------------------------------------------- sync


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
    if handed_in and row.state in (SessionState.OPEN, SessionState.ABANDONED):
        if _recover_answers(session, signer, study, row, submission, report):
            report.recovered += 1
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
    if text not in (row.problems or []):
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
    hit = get_hit_type(study.hit_type)
    recovered = 0
    for entry in record.get("responses", []):
        item = session.get(Item, entry.get("item")) if isinstance(entry.get("item"), int) else None
        if item is None or item.study_id != study.id:
            continue
        exists = session.scalar(
            select(Response.id).where(
                Response.item_id == item.id, Response.worker_id == row.worker_id
            )
        )
        if exists is not None:
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
        elif assignment.state not in (AssignmentState.SUBMITTED, AssignmentState.APPROVED):
            # Abandoned or returned by our sweep while the platform kept the work: the
            # platform's record wins, but the item's place was freed and may be taken.
            assignment.state = AssignmentState.SUBMITTED
            session.execute(update(Item).where(Item.id == item.id).values(holders=Item.holders + 1))
        assignment.platform_session_id = row.id
        answer = entry.get("answer") or {}
        response = Response(
            assignment_id=assignment.id,
            study_id=study.id,
            item_id=item.id,
            worker_id=row.worker_id,
            answer=answer,
            explanation=entry.get("explanation"),
            reasons=entry.get("reasons") or [],
            score=hit.score(item.expected, answer),
            qc_flags={"recovered_from": row.provider},
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
        _queue_action(session, row.provider, "approve", study.id, row.worker_id, row.id, {})
    elif decision == Decision.REJECTED:
        feedback = _last_feedback(session, study.id, row.worker_id)
        _queue_action(
            session, row.provider, "reject", study.id, row.worker_id, row.id,
            {"feedback": feedback},
        )  # fmt: skip


def _last_feedback(session: Session, study_id: int, worker_id: int) -> str:
    from crowd.storage import AuditEntry

    entry = session.scalar(
        select(AuditEntry)
        .where(
            AuditEntry.study_id == study_id,
            AuditEntry.worker_id == worker_id,
            AuditEntry.action == "reject",
        )
        .order_by(AuditEntry.id.desc())
        .limit(1)
    )
    return entry.reason if entry is not None else "The work did not meet the task's standard."


# --------------------------------------------------------------------------- actions


def _queue_action(
    session: Session,
    provider: str,
    action: str,
    study_id: int | None,
    worker_id: int | None,
    session_id: int | None,
    params: dict[str, Any],
) -> PlatformAction:
    row = PlatformAction(
        provider=provider,
        action=action,
        study_id=study_id,
        worker_id=worker_id,
        session_id=session_id,
        params=params,
    )
    session.add(row)
    session.flush()
    session.add(OutboxEvent(topic=PLATFORM_ACTION, payload={"action_id": row.id}))
    return row


def request_action(
    session: Session,
    study: Study,
    worker: Worker,
    action: str,
    params: Mapping[str, Any] | None = None,
) -> int:
    """Queue the platform calls for a reviewer's decision; returns how many.

    Crowds without a platform (the open web, simulations, imports) have nothing to call.
    Approve and reject reach every session the platform has as submitted; sessions it has
    not seen yet are decided when a sync finds them submitted.
    """
    if worker.provider not in PROVIDERS or not PROVIDERS.get(worker.provider).remote:
        return 0
    params = dict(params or {})
    PROVIDERS.get(worker.provider).check_action(action, params)
    sessions = session.scalars(
        select(PlatformSession)
        .where(PlatformSession.study_id == study.id, PlatformSession.worker_id == worker.id)
        .order_by(PlatformSession.id)
    ).all()
    queued = 0
    if action in ("approve", "reject"):
        # Flagged sessions (no answer of ours, a wrong code) are not paid on a worker-level
        # decision; approving overturns an earlier rejection on the platform.
        decidable = (
            (SessionState.SUBMITTED, SessionState.REJECTED)
            if action == "approve"
            else (SessionState.SUBMITTED,)
        )
        for row in sessions:
            if row.state in decidable and not (action == "approve" and row.problems):
                overturn = {"override_rejection": row.state == SessionState.REJECTED}
                _queue_action(
                    session, worker.provider, action, study.id, worker.id, row.id,
                    {**params, **overturn},
                )  # fmt: skip
                queued += 1
        return queued
    if action == "bonus":
        paid_for = [
            row
            for row in sessions
            if row.state in (SessionState.SUBMITTED, SessionState.APPROVED, SessionState.REJECTED)
        ]
        if not paid_for:
            raise InvalidAction(
                f"worker {worker.id} has no submitted {worker.provider} work in study "
                f"{study.id} to pay a bonus on: sync the study first (crowd {worker.provider} "
                "sync STUDY)"
            )
        _queue_action(
            session, worker.provider, action, study.id, worker.id, paid_for[-1].id, params
        )
        return 1
    if action in ("block", "unblock", "notify", "grant_qualification"):
        latest = sessions[-1].id if sessions else None
        _queue_action(session, worker.provider, action, study.id, worker.id, latest, params)
        return 1
    raise ValidationError(f"unknown platform action {action!r}", "action")


def _target(session: Session, row: PlatformAction) -> ActionTarget:
    worker = session.get(Worker, row.worker_id) if row.worker_id else None
    platform_session = session.get(PlatformSession, row.session_id) if row.session_id else None
    task = session.get(RemoteTask, platform_session.remote_task_id) if platform_session else None
    publication = session.get(Publication, task.publication_id) if task else None
    if publication is None and row.study_id is not None:
        publication = session.scalar(
            select(Publication)
            .where(Publication.study_id == row.study_id, Publication.provider == row.provider)
            .order_by(Publication.id.desc())
            .limit(1)
        )
    return ActionTarget(
        worker_external_id=worker.external_id if worker else "",
        session_remote_id=platform_session.remote_id if platform_session else None,
        submission_id=platform_session.submission_id if platform_session else None,
        task_remote_id=task.remote_id if task else None,
        publication={
            **(publication.options if publication else {}),
            **(publication.remote if publication else {}),
        },
    )


def perform_action(db: Database, settings: Settings, action_id: int) -> str:
    """Make one queued platform call: read, call (outside any transaction), record.

    Raises on a failed call so the job is retried; after MAX_ACTION_ATTEMPTS failures the
    action is marked failed and no longer retried.
    """
    with db.read_session() as session:
        row = session.get(PlatformAction, action_id)
        if row is None:
            return f"platform action {action_id} does not exist"
        if row.status != ActionStatus.PENDING:
            return f"platform action {action_id} is already {row.status}"
        provider = PROVIDERS.get(row.provider)
        target = _target(session, row)
        action, params = row.action, dict(row.params)
    try:
        result = provider.perform(settings, action, target, params, ActionLedger(db, action_id))
    except Exception as error:
        with db.session() as session:
            row = session.get(PlatformAction, action_id)
            if row is not None:
                row.attempts += 1
                row.last_error = f"{type(error).__name__}: {error}"[:2000]
                if row.attempts >= MAX_ACTION_ATTEMPTS:
                    row.status = ActionStatus.FAILED
                    log.error("platform action %s failed for good: %s", action_id, error)
                    return f"platform action {action_id} failed: {error}"
        raise
    with db.session() as session:
        row = session.get(PlatformAction, action_id)
        if row is None:
            return f"platform action {action_id} vanished"
        row.attempts += 1
        row.status = ActionStatus.DONE
        row.done_at = utcnow()
        row.result = {**(row.result or {}), **result}
        if row.session_id is not None and action in ("approve", "reject"):
            platform_session = session.get(PlatformSession, row.session_id)
            if platform_session is not None:
                platform_session.state = (
                    SessionState.APPROVED if action == "approve" else SessionState.REJECTED
                )
    return f"platform action {action_id} ({action}) done"


class ActionLedger(MutableMapping[str, str]):
    """A platform call's own durable notes (in PlatformAction.result["ledger"]), each
    written in its own transaction before the provider's next request goes out."""

    def __init__(self, db: Database, action_id: int) -> None:
        self.db = db
        self.action_id = action_id

    def _entries(self) -> dict[str, str]:
        with self.db.read_session() as session:
            row = session.get(PlatformAction, self.action_id)
            return dict((row.result or {}).get("ledger", {})) if row is not None else {}

    def _write(self, entries: dict[str, str]) -> None:
        with self.db.session() as session:
            row = session.get(PlatformAction, self.action_id)
            if row is not None:
                row.result = {**(row.result or {}), "ledger": entries}

    def __getitem__(self, key: str) -> str:
        return self._entries()[key]

    def __setitem__(self, key: str, value: str) -> None:
        self._write({**self._entries(), key: value})

    def __delitem__(self, key: str) -> None:
        entries = self._entries()
        del entries[key]
        self._write(entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __len__(self) -> int:
        return len(self._entries())


def retry_failed(session: Session, study: Study) -> int:
    """Queue the study's failed platform calls once more (after an outage, a fixed key)."""
    failed = session.scalars(
        select(PlatformAction).where(
            PlatformAction.study_id == study.id, PlatformAction.status == ActionStatus.FAILED
        )
    ).all()
    for row in failed:
        row.status = ActionStatus.PENDING
        row.attempts = 0
        session.add(OutboxEvent(topic=PLATFORM_ACTION, payload={"action_id": row.id}))
    return len(failed)


def actions(session: Session, study: Study, limit: int = 200) -> list[dict[str, Any]]:
    rows = session.scalars(
        select(PlatformAction)
        .where(PlatformAction.study_id == study.id)
        .order_by(PlatformAction.id.desc())
        .limit(limit)
    ).all()
    return [
        {
            "id": row.id,
            "provider": row.provider,
            "action": row.action,
            "worker_id": row.worker_id,
            "status": str(row.status),
            "attempts": row.attempts,
            "last_error": row.last_error,
            "created_at": row.created_at.isoformat(),
            "done_at": row.done_at.isoformat() if row.done_at else None,
        }
        for row in rows
    ]


# --------------------------------------------------------------------------- expire, extend


def remote_tasks(
    session: Session, study: Study, provider: str, task_id: str | None = None
) -> list[RemoteTask]:
    query = select(RemoteTask).where(
        RemoteTask.study_id == study.id, RemoteTask.provider == provider
    )
    if task_id is not None:
        query = query.where(RemoteTask.remote_id == task_id)
    rows = list(session.scalars(query.order_by(RemoteTask.id)).all())
    if not rows:
        raise NotFound(
            f"study {study.id} has no {provider} task{' ' + task_id if task_id else 's'}: "
            f"publish it first (crowd study publish {study.id} --provider {provider})"
        )
    return rows


def expire(
    session: Session, settings: Settings, study: Study, provider_name: str, task_id: str | None
) -> int:
    """Close the study's tasks on the platform to new workers (work in progress goes on)."""
    provider = PROVIDERS.get(provider_name)
    done = 0
    for task in remote_tasks(session, study, provider_name, task_id):
        publication = session.get(Publication, task.publication_id)
        provider.expire(settings, publication.remote if publication else {}, task.remote_id)
        task.status = RemoteTaskStatus.EXPIRED
        task.expires_at = utcnow()
        done += 1
    return done


def extend(
    session: Session,
    settings: Settings,
    study: Study,
    provider_name: str,
    task_id: str | None,
    seconds: int,
    more_places: int,
) -> int:
    """Keep the tasks open longer and/or add places."""
    if seconds < 0 or more_places < 0 or (seconds == 0 and more_places == 0):
        raise ValidationError("give more time (seconds > 0) and/or more places (> 0)")
    provider = PROVIDERS.get(provider_name)
    done = 0
    for task in remote_tasks(session, study, provider_name, task_id):
        publication = session.get(Publication, task.publication_id)
        token = f"crowd-extend-{task.remote_id}-{task.places + more_places}"[:64]
        expires = provider.extend(
            settings,
            publication.remote if publication else {},
            task.remote_id,
            seconds,
            more_places,
            token,
        )
        task.places += more_places
        task.status = RemoteTaskStatus.OPEN
        if expires is not None:
            task.expires_at = expires
        done += 1
    return done


# --------------------------------------------------------------------------- jobs


def _job_tag() -> str:
    job = get_current_job()
    return f"[job {job.id}]" if job else "[inline]"


@own_transaction(PLATFORM_ACTION)
def perform_queued_action(event: Event) -> str:
    """A queued platform call, made outside any transaction (it may take seconds); raises
    when the call fails, so the job is retried."""
    ctx = context()
    return perform_action(ctx.db, ctx.settings, int(event.payload["action_id"]))


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


@every_sweep("platform-syncs", order=-10, every=lambda settings: settings.platform_sync_interval)
def sync_published_studies(sweep: SweepContext) -> None:
    """Every CROWD_PLATFORM_SYNC_INTERVAL seconds, a sync of each study on a platform."""
    request_platform_syncs(sweep.connection, sweep.db)
