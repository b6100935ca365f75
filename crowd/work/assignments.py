"""The worker's side: workers, assignment of items, steps, stored answers and the reveal.

Assignment is safe under concurrent requests: on SQLite every write transaction takes the
database's write lock up front (BEGIN IMMEDIATE, see storage.db); on PostgreSQL the worker
row is locked for the worker's own requests and each candidate item is locked (SKIP LOCKED)
and its holder counter checked and raised before an assignment is added.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Integer, bindparam, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, joinedload
from sqlalchemy.orm.attributes import set_committed_value

from crowd.exceptions import (
    InvalidAction,
    NotFound,
    NoWorkLeft,
    PermissionDenied,
    SessionComplete,
    StudyNotOpen,
    ValidationError,
)
from crowd.quality import exclusion
from crowd.quality import standing as quality
from crowd.quality.exclusion import study_qc
from crowd.queue.hooks import SweepContext, every_sweep
from crowd.storage import (
    Assignment,
    AssignmentState,
    Item,
    ItemKind,
    OutboxEvent,
    PlatformSession,
    Qualification,
    Response,
    Serving,
    SessionState,
    Study,
    StudyStatus,
    StudyWorker,
    Worker,
    WorkerStatus,
    utcnow,
)
from crowd.storage.outbox import RESPONSE_EXPLAINED, RESPONSE_STORED
from crowd.work import serving
from crowd.work.counter import (
    item_counter,
    platform_items,
)
from tasks import HitType, get_hit_type

# Extra attention checks for doubted workers are drawn from the OS's randomness, as gold is.
_CHECK_RANDOM = random.SystemRandom()
# The same words for "no items left" and "QC stopped you": a stopped worker learns no more.
SIM_PROVIDER = "sim"
NO_MORE_FOR_YOU = "you have seen every item available to you in this study: thank you!"
SESSION_DONE = "you have done every item of this task: submit it to finish"
# Where the stale-assignment sweep runs among the sweeps: sweeps that end assignments with
# an answer (a live game's clocks) run before it.
STALE_SWEEP_ORDER = 100


def get_or_create_worker(
    session: Session, provider: str, external_id: str, display_name: str | None = None
) -> Worker:
    if not external_id or len(external_id) > 200:
        raise ValidationError("a worker id is 1 to 200 characters", "external_id")
    worker = session.scalar(
        select(Worker).where(Worker.provider == provider, Worker.external_id == external_id)
    )
    if worker is None:
        worker = Worker(provider=provider, external_id=external_id, display_name=display_name)
        session.add(worker)
        session.flush()
    return worker


def attention_due(rate: float, served: int, attention_served: int, phase: float) -> bool:
    """True when the worker's next item should be an attention check.

    Over any run of 1/rate items a worker gets one check, at a position set by `phase`,
    so a worker who does a full session of ten items at rate 0.1 meets exactly one.
    """
    if rate <= 0:
        return False
    return attention_served < math.floor(rate * (served + 1) + phase)


def doubt_check_due(standing: StudyWorker) -> bool:
    """True, at the worker's extra check rate, when QC doubts they are reading: the rate their
    last QC refresh set (qc.attention.doubt_check_rate), drawn here so nobody can predict it.
    Only in studies that serve checks at all (attention_rate above 0)."""
    rate = float((standing.evidence or {}).get("check_rate") or 0.0)
    return rate > 0 and _CHECK_RANDOM.random() < rate


@dataclass
class Served:
    """What `next_assignment` gives: the assignment and the counts of "item i of n"
    (crowd.work.counter), read in the statement that decided what to serve."""

    assignment: Assignment
    done: int
    open_before: int
    served_now: bool
    platform_session: PlatformSession | None

    def counter(self, session: Session) -> dict[str, int]:
        return item_counter(session, self.assignment, self.done, self.open_before,
                            self.served_now, self.platform_session)  # fmt: skip


def next_assignment(
    session: Session,
    study: Study,
    worker_id: int,
    category: str | None = None,
    platform_session: PlatformSession | None = None,
) -> Served:
    """The worker's open assignment in this study, or a new one; raises NoWorkLeft.

    On a crowd platform's page the work is counted in the platform's session (an MTurk
    assignment), which ends after its number of items (SessionComplete).

    A new item costs three statements in the usual case: what serving decides on (with the
    worker's row locked), the item taken (its holder counter raised in the same statement)
    and the assignment.
    """
    if study.status != StudyStatus.PUBLISHED:
        raise StudyNotOpen(f"study {study.id} is {study.status}, not open for work")
    values = serving.serving_values(study, worker_id, category)
    ctx = serving.read_context(session, values)
    worker = ctx.worker
    if worker.status == WorkerStatus.BLOCKED:
        raise PermissionDenied("this worker account is blocked from our studies")
    if worker.provider not in study.providers:
        raise StudyNotOpen(f"study {study.id} is not published to {worker.provider} workers")

    def served(assignment: Assignment, now: bool) -> Served:
        return Served(assignment, ctx.done, ctx.open_before, now, platform_session)

    open_assignment = ctx.open_assignment
    if platform_session is not None:
        if platform_session.study_id != study.id or platform_session.worker_id != worker.id:
            raise PermissionDenied("this platform session belongs to another study or worker")
        if platform_session.state != SessionState.OPEN:
            raise SessionComplete(f"this session is {platform_session.state}: nothing more to do")
        if open_assignment is not None and open_assignment.platform_session_id in (
            None, platform_session.id,
        ):  # fmt: skip
            open_assignment.platform_session_id = platform_session.id
            return served(open_assignment, False)
        if platform_session.items_done >= platform_items(session, platform_session):
            raise SessionComplete(SESSION_DONE)
        if open_assignment is not None:
            # An item left open in another session of the worker (another HIT of the study)
            # goes on in this one: one open item per worker and study, counted once.
            open_assignment.platform_session_id = platform_session.id
            return served(open_assignment, False)
    elif open_assignment is not None:
        return served(open_assignment, False)
    if ctx.blocked:
        raise PermissionDenied("this worker account is blocked from these studies")
    standing = ctx.standing
    if standing is None or (
        standing.qualification is None and study_qc(study).qualification is not None
    ):
        # Created on first use; locked where the qualification gate may write to it.
        standing = quality.standing(session, study.id, worker.id)
    if standing.serving == Serving.STOPPED:
        raise NoWorkLeft(NO_MORE_FOR_YOU)

    # Training examples come first, all of them, in the experimenter's order; only while
    # there is real work left for the worker, since the practice is for that work. Where
    # the study gates on them (a qualification), only those who pass go on.
    if ctx.training_id is not None and ctx.real_left:
        # Every assignment counts, so a return balances.
        practice = serving.take(session, select(Item.id).where(Item.id == ctx.training_id))
        if practice is not None:
            return served(_assign(session, study, worker, practice, platform_session), True)
    if quality.qualification_due(session, study, standing) == Qualification.FAILED:
        raise NoWorkLeft(NO_MORE_FOR_YOU)
    item: Item | None = None
    rate = float(study.config.get("attention_rate", 0.0))
    if attention_due(rate, ctx.served, ctx.attention_served, standing.attention_phase) or (
        rate > 0 and doubt_check_due(standing)
    ):
        item = serving.take_kind(session, ItemKind.ATTENTION, values)
    # Gold checks the worker's real work: none, no gold.
    if item is None and ctx.real_left and quality.gold_due(session, study, standing):
        gold = study_qc(study).gold
        item = serving.take_gold(session, values, gold.shared_order, gold.easy_first)
    if item is None and ctx.real_left:
        item = serving.claim_real_item(session, study, values)
    if item is None:
        raise NoWorkLeft(NO_MORE_FOR_YOU)
    return served(_assign(session, study, worker, item, platform_session), True)


def _assign(
    session: Session,
    study: Study,
    worker: Worker,
    item: Item,
    platform_session: PlatformSession | None = None,
) -> Assignment:
    hit = get_hit_type(study.hit_type)
    first = hit.start(item.content, utcnow(), study.config)
    assignment = Assignment(
        study_id=study.id,
        item=item,
        worker_id=worker.id,
        provider=worker.provider,
        progress=first.progress,
        events=[first.event],
        platform_session_id=platform_session.id if platform_session is not None else None,
    )
    session.add(assignment)
    session.flush()
    return assignment


# One statement: the assignment (its row locked), its item and the item's study, which
# every step reads (built once, as serving's statements are).
_LOAD_ASSIGNMENT = (
    select(Assignment)
    .where(Assignment.id == bindparam("assignment_id", type_=Integer))
    .options(joinedload(Assignment.item, innerjoin=True).joinedload(Item.study, innerjoin=True))
    .with_for_update(of=Assignment)
)


def load_assignment(session: Session, assignment_id: int, worker_id: int) -> Assignment:
    """The worker's own assignment, locked for update; others' look like missing ones."""
    assignment = session.scalar(_LOAD_ASSIGNMENT, {"assignment_id": assignment_id})
    if assignment is None or assignment.worker_id != worker_id:
        raise NotFound(f"no assignment {assignment_id} for this worker")
    if assignment.state == AssignmentState.ASSIGNED:
        # No answer while assigned (one is stored with the move to submitted, under this
        # lock): say so, and storing one reads nothing back. Otherwise the answer is read on
        # use, in a statement of its own after the lock: joined into the locking statement,
        # PostgreSQL would show it as of before the wait, missing a concurrent request's.
        set_committed_value(assignment, "response", None)
    return assignment


def stored_response(session: Session, assignment: Assignment) -> Response | None:
    """The assignment's stored answer (read once per request)."""
    return assignment.response


def assignment_view(session: Session, assignment: Assignment) -> dict[str, Any]:
    """What the worker's page may see: revealed content while open, feedback once allowed."""
    study = assignment.item.study
    hit = get_hit_type(study.hit_type)
    view: dict[str, Any] = {
        "assignment_id": assignment.id,
        "study_id": assignment.study_id,
        "state": str(assignment.state),
    }
    content, config = assignment.item.content, study.config
    if assignment.state == AssignmentState.ASSIGNED:
        view["task"] = hit.view(content, assignment.progress, config)
        return view
    response = stored_response(session, assignment)
    if response is None:  # returned, abandoned or expired before an answer
        return view
    needs = _needs_followup(hit, study, response)
    view["answered"] = True
    view["needs_followup"] = needs
    if needs:
        view["task"] = hit.view(content, assignment.progress, config)
    else:
        item = assignment.item
        view["feedback"] = hit.feedback(
            content, item.expected, response.answer, str(item.kind), config
        )
    return view


def _needs_followup(hit: HitType, study: Study, response: Response) -> bool:
    return response.explained_at is None and hit.needs_followup(response.answer, study.config)


def _only_fields(hit: HitType, action: Mapping[str, Any], allowed: set[str]) -> None:
    """Refuse another HIT type's fields (the API's body declares every type's)."""
    for name in sorted(set(action) - allowed):
        takes = ", ".join(sorted(allowed))
        raise ValidationError(f"{hit.name} studies do not take it here (they take {takes})", name)


def act(
    session: Session, assignment_id: int, worker_id: int, action: Mapping[str, Any]
) -> Assignment:
    """Apply one step of the worker's flow; a replayed or repeated step changes nothing."""
    assignment = load_assignment(session, assignment_id, worker_id)
    if assignment.state != AssignmentState.ASSIGNED:
        if stored_response(session, assignment) is not None:
            return assignment  # a repeated submission gets the stored result
        raise InvalidAction(f"assignment {assignment.id} is {assignment.state}: ask for a new one")
    study = assignment.item.study
    hit = get_hit_type(study.hit_type)
    step = action.get("step")
    current = hit.current_step(assignment.progress)
    if not isinstance(step, int) or isinstance(step, bool):
        raise InvalidAction("'step' must be the step the page shows (task.step)")
    if step < current:
        return assignment  # a retried request: the step already happened
    if step > current:
        raise InvalidAction(f"step {step} is ahead of the server (at step {current}): reload")
    action = dict(action)
    sim_seconds = _sim_seconds(assignment, action.pop("sim_seconds", None))
    _only_fields(hit, action, {"step", *hit.step_fields})
    now = utcnow()
    result = hit.step(assignment.item.content, assignment.progress, action, now, study.config)
    assignment.progress = result.progress
    event = result.event if sim_seconds is None else {**result.event, "sim_seconds": sim_seconds}
    assignment.events = [*assignment.events, event]
    if result.answer is not None:
        store_response(session, hit, assignment, result.answer)
    return assignment


def _sim_seconds(assignment: Assignment, value: Any) -> float | None:
    """The time a simulated worker says a step took; people are timed by our clock only."""
    if value is None:
        return None
    if assignment.provider != SIM_PROVIDER:
        raise InvalidAction("'sim_seconds' is for simulated workers only")
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 86400:
        raise InvalidAction("'sim_seconds' must be a number of seconds from 0 to 86400")
    return float(value)


def _answer_seconds(assignment: Assignment, now: datetime) -> float:
    """How long the worker took over the item: simulated time for simulated workers."""
    simulated = [e["sim_seconds"] for e in assignment.events if "sim_seconds" in e]
    if assignment.provider == SIM_PROVIDER and simulated:
        return float(sum(simulated))
    return (now - assignment.created_at).total_seconds()


def store_response(
    session: Session, hit: HitType, assignment: Assignment, answer: dict[str, Any]
) -> Response:
    item = assignment.item
    now = utcnow()
    flags = quality.response_facts(
        hit, item, answer, _answer_seconds(assignment, now), exclusion.study_qc(item.study)
    )
    response = Response(
        assignment=assignment,
        study_id=assignment.study_id,
        item_id=item.id,
        worker_id=assignment.worker_id,
        answer=answer,
        events=list(assignment.events),
        score=hit.score(item.expected, answer),
        qc_flags=flags,
    )
    assignment.transition(AssignmentState.SUBMITTED)
    assignment.submitted_at = now
    session.add(response)
    try:
        session.flush()
    except IntegrityError:
        # The unique (item, worker) constraint: this worker answered the item already. The
        # request's transaction rolls back whole (no savepoint: it would cost two statements
        # on every answer for a case that serving, which never hands out a seen item, rules
        # out).
        raise InvalidAction("you have already answered this item") from None
    if assignment.platform_session_id is not None:
        session.execute(
            update(PlatformSession)
            .where(PlatformSession.id == assignment.platform_session_id)
            .values(items_done=PlatformSession.items_done + 1)
        )
    session.add(
        OutboxEvent(
            topic=RESPONSE_STORED,
            payload={"response_id": response.id, "study_id": response.study_id},
        )
    )
    return response


def explain(
    session: Session, assignment_id: int, worker_id: int, action: Mapping[str, Any]
) -> Assignment:
    """Store the explanation of an answer; a repeated one keeps the first."""
    assignment = load_assignment(session, assignment_id, worker_id)
    response = stored_response(session, assignment)
    if response is None:
        raise InvalidAction("answer first: the explanation follows the guess")
    study = assignment.item.study
    hit = get_hit_type(study.hit_type)
    if response.explained_at is not None or not hit.needs_followup(response.answer, study.config):
        return assignment
    _only_fields(hit, action, {"typing", *hit.followup_fields})
    text, reasons = hit.followup(response.answer, action, study.config)
    typing = quality.typing_report(action.get("typing"))
    now = utcnow()
    if typing is not None and assignment.provider != SIM_PROVIDER:
        # The box opened when the answer was stored: no typing can have taken longer.
        # (Simulated workers report simulated time, as with sim_seconds.)
        elapsed_ms = int((now - response.created_at).total_seconds() * 1000) + 1000
        typing["typing_ms"] = min(typing["typing_ms"], max(elapsed_ms, 0))
    response.qc_flags = quality.explanation_facts(
        response.qc_flags, text, typing, exclusion.study_qc(study)
    )
    response.explanation = text
    response.reasons = reasons
    response.explained_at = now
    response.events = [*response.events, {"type": "explanation", "at": now.isoformat()}]
    # The explanation brings its own QC signals (pasted or inhumanly fast text). A refresh
    # that read the answer before now did not read this: the worker's refresh mark goes back
    # to before it (crowd.quality.stats), so the event's refresh is not skipped.
    session.execute(
        update(StudyWorker)
        .where(
            StudyWorker.study_id == response.study_id,
            StudyWorker.worker_id == response.worker_id,
            StudyWorker.refreshed_through >= response.id,
        )
        .values(refreshed_through=response.id - 1)
    )
    session.add(
        OutboxEvent(
            topic=RESPONSE_EXPLAINED,
            payload={"response_id": response.id, "study_id": response.study_id},
        )
    )
    return assignment


def release(session: Session, assignment_id: int, worker_id: int) -> Assignment:
    """The worker gives an open assignment back; its item is free for others again."""
    assignment = load_assignment(session, assignment_id, worker_id)
    assignment.transition(AssignmentState.RETURNED)
    return assignment


def abandon_stale(session: Session, idle_for: timedelta) -> int:
    """Mark open assignments untouched for `idle_for` as abandoned, freeing their items."""
    cutoff = utcnow() - idle_for
    stale = session.scalars(
        select(Assignment)
        .where(Assignment.state == AssignmentState.ASSIGNED, Assignment.updated_at < cutoff)
        .with_for_update(skip_locked=True)
    ).all()
    for assignment in stale:
        assignment.transition(AssignmentState.ABANDONED)
    return len(stale)


@every_sweep("stale-assignments", order=STALE_SWEEP_ORDER)
def sweep_stale(sweep: SweepContext) -> None:
    """Each sweep round: assignments idle for CROWD_ASSIGNMENT_TIMEOUT are abandoned."""
    with sweep.db.session() as session:
        abandon_stale(session, timedelta(seconds=sweep.settings.assignment_timeout))
