"""Worker statistics and QC flags, recomputed from stored responses (never incremented)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import case, false, func, select
from sqlalchemy.orm import Session

from crowd.quality import standing as quality
from crowd.queue.hooks import QC_REFRESH, Event, on_event, paced
from crowd.storage import (
    Item,
    ItemKind,
    OutboxEvent,
    Response,
    ResponseSource,
    Serving,
    Study,
    StudyWorker,
    Worker,
)
from crowd.storage.outbox import RESPONSE_EXPLAINED, RESPONSE_STORED, RESPONSES_IMPORTED

# The imported raters one outbox event refreshes in its transaction (see refresh_after_import).
RATERS_PER_JOB = 500


def refresh_after_response(session: Session, response_id: int) -> None:
    """The numbers and QC standing of the answer's worker, of every other worker of the study
    with an answer no refresh has read yet (the queue is behind when there are any), and of
    those still served who answered the same real items (co_answerers): one pass refreshes
    them all, the crowd fitted once, so a backlog of answers from many workers costs about
    one refresh, not one each, and no decision waits in the queue for other workers'
    refreshes. Each worker's mark (refreshed_through) then says which of their answers were
    read, and their later events skip (refresh_after_answer).
    """
    response = session.get(Response, response_id)
    if response is None:
        return
    worker_id, study_id = response.worker_id, response.study_id
    # Read before the refresh: each worker's latest answer, and every answer of theirs before
    # it is committed too (a worker has one open assignment in a study at a time, so their
    # answers are stored one after another), so the refresh below reads them all (it may
    # read later ones too; those are refreshed again by their own events).
    pending = unread(session, study_id)
    # Then the others who answered the same real items: the new answers moved the consensus
    # their agreement is measured against, so a worker whose record firmed up through others'
    # answers is stopped now, not after an answer more of their own (a real item has a few
    # answers, so this adds a few workers, not the study's).
    moved = [w for w in co_answerers(session, study_id) if w != worker_id and w not in pending]
    others = [*sorted(w for w in pending if w != worker_id), *moved]
    ids = [worker_id, *others[: quality.WORKERS_PER_PASS - 1]]
    refresh_workers(session, ids, study_id)
    # QC rules act on the workers' evidence here, off the request path (SPEC 4).
    rows = quality.refresh_standings(session, response.item.study, ids)
    for refreshed in ids:
        if refreshed not in pending:
            continue  # nothing of theirs unread (an imported rater's answer): no mark to move
        row, (latest, mark) = rows[refreshed], pending[refreshed]
        # An explanation stored after the read moved the mark back (crowd.work's explain):
        # then its own event refreshes, and this one leaves the mark where it is.
        if row.refreshed_through == mark:
            row.refreshed_through = max(mark or 0, latest)


def co_answerers(session: Session, study_id: int) -> list[int]:
    """Live workers of the study still served who answered a real item that has an answer no
    refresh has read yet (see `unread`), by id."""
    moved = (
        select(Response.item_id)
        .join(Item, Item.id == Response.item_id)
        .where(
            Response.study_id == study_id,
            Response.source == ResponseSource.LIVE,
            Item.kind == ItemKind.REAL,
            Response.id > func.coalesce(_mark(study_id), 0),
        )
    )
    return [
        int(worker_id)
        for worker_id in session.scalars(
            select(Response.worker_id)
            .join(
                StudyWorker,
                (StudyWorker.study_id == study_id) & (StudyWorker.worker_id == Response.worker_id),
            )
            .where(
                Response.item_id.in_(moved),
                Response.source == ResponseSource.LIVE,
                StudyWorker.serving != Serving.STOPPED,
            )
            .distinct()
            .order_by(Response.worker_id)
        )
    ]


def _mark(study_id: int) -> Any:
    """The refresh mark of the worker of the Response row in the enclosing query."""
    return (
        select(StudyWorker.refreshed_through)
        .where(StudyWorker.study_id == study_id, StudyWorker.worker_id == Response.worker_id)
        .scalar_subquery()
    )


def unread(session: Session, study_id: int) -> dict[int, tuple[int, int | None]]:
    """Live workers of the study with an answer after their refresh mark: their latest answer
    and the mark (imported raters are refreshed by their import's events)."""
    mark = _mark(study_id)
    return {
        int(worker_id): (int(latest), None if seen is None else int(seen))
        for worker_id, latest, seen in session.execute(
            select(Response.worker_id, func.max(Response.id), mark)
            .where(Response.study_id == study_id, Response.source == ResponseSource.LIVE)
            .group_by(Response.worker_id)
            .having(func.max(Response.id) > func.coalesce(mark, 0))
        ).all()
    }


def refresh_worker(session: Session, worker_id: int, study_id: int) -> dict[str, Any]:
    """Recompute one worker's numbers in one study; running it twice gives the same result."""
    return refresh_workers(session, [worker_id], study_id).get(worker_id, {})


def refresh_workers(
    session: Session, worker_ids: Collection[int], study_id: int
) -> dict[int, dict[str, Any]]:
    """`refresh_worker` for several workers: their numbers counted in the database, in one
    statement (a refresh of a busy study's workers decoded every answer's QC flags for a
    yes or no on its attention checks)."""
    ids = sorted(set(worker_ids))
    workers = session.scalars(select(Worker).where(Worker.id.in_(ids)).order_by(Worker.id)).all()
    # Practice answers on training examples and attention checks earn no points.
    scored = Item.kind.in_((ItemKind.REAL, ItemKind.GOLD)) & Response.score.is_not(None)
    check = Item.kind == ItemKind.ATTENTION
    failed = check & (Response.qc_flags["attention_passed"].as_boolean() == false())
    counted = {
        worker_id: numbers
        for worker_id, *numbers in session.execute(
            select(
                Response.worker_id,
                func.count(Response.id),
                func.count(case((scored, 1))),
                func.sum(case((scored, Response.score))),
                func.count(case((check, 1))),
                func.count(case((failed, 1))),
            )
            .join(Item, Item.id == Response.item_id)
            .where(Response.study_id == study_id, Response.worker_id.in_(ids))
            .group_by(Response.worker_id)
        )
    }
    return {
        worker.id: _store(worker, study_id, *counted.get(worker.id, (0, 0, None, 0, 0)))
        for worker in workers
    }


def _store(
    worker: Worker,
    study_id: int,
    responses: int,
    real: int,
    points: float | None,
    checks: int,
    failed: int,
) -> dict[str, Any]:
    """Write the worker's numbers in the study: answers, scored answers (real and gold
    items) and their points, attention checks and those failed."""
    numbers = {
        "responses": responses,
        "real_responses": real,
        "points": float(points or 0),
        "mean_points": round(float(points or 0) / real, 4) if real else None,
        "attention_checks": checks,
        "attention_failed": failed,
    }
    key = str(study_id)
    worker.stats = {**worker.stats, key: numbers}
    failures = dict(worker.qc_flags.get("attention_failed", {}))
    if failed:
        failures[key] = failed
    else:
        failures.pop(key, None)
    worker.qc_flags = {**worker.qc_flags, "attention_failed": failures}
    return numbers


@on_event(RESPONSE_STORED, RESPONSE_EXPLAINED, order=QC_REFRESH)
def refresh_after_answer(session: Session, event: Event) -> None:
    """An answer (or its explanation) was stored: the worker's numbers and QC standing.

    An answer or explanation that an earlier event's refresh already read (the queue was
    behind: the worker, or others, answered again before it got to the first) is not
    refreshed again, so a burst of answers costs one refresh, and no decision waits for it.
    An explanation stored after its answer was read moves the mark back, so it is read.
    """
    response_id = int(event.payload["response_id"])
    if covered(session, response_id):
        return
    refresh_after_response(session, response_id)


@paced(RESPONSE_STORED, RESPONSE_EXPLAINED)
def study_of(event: Event) -> int | None:
    """Answer events are paced by their study: each batch refreshes the QC of the study's
    workers with unread answers, at a cost its size sets (crowd.queue.jobs)."""
    study_id = event.payload.get("study_id")
    return None if study_id is None else int(study_id)


def covered(session: Session, response_id: int) -> bool:
    """Whether a refresh after an answer already read this response."""
    through = session.scalar(
        select(StudyWorker.refreshed_through)
        .join(
            Response,
            (Response.worker_id == StudyWorker.worker_id)
            & (Response.study_id == StudyWorker.study_id),
        )
        .where(Response.id == response_id)
    )
    return through is not None and through >= response_id


@on_event(RESPONSES_IMPORTED, order=QC_REFRESH, batched=False)
def refresh_after_import(session: Session, event: Event) -> None:
    """Answers were imported: the numbers and QC standing of every worker they came from.

    Imported raters are judged like live workers (the rules' exclusions shape the filtered
    set), so the report this event refreshes already leaves out those the rules exclude.
    One event refreshes RATERS_PER_JOB raters in its transaction and passes the others on
    in an event of its own, so a large import (a RoFT release of 200,000 answers) never
    holds the write lock for long or outlives its job's timeout (so its events never join
    another event's batch, crowd.queue.jobs); each event, the last included, requests the
    report after its commit.
    """
    study = session.get(Study, int(event.payload["study_id"]))
    if study is None:
        return
    worker_ids = [int(worker_id) for worker_id in event.payload.get("worker_ids", [])]
    now, later = worker_ids[:RATERS_PER_JOB], worker_ids[RATERS_PER_JOB:]
    refresh_workers(session, now, study.id)
    quality.refresh_standings(session, study, now)
    if later:
        payload = {"study_id": study.id, "worker_ids": later, "continues": event.id}
        session.add(OutboxEvent(topic=RESPONSES_IMPORTED, payload=payload))


def refresh_goes_on(event: Event) -> bool:
    """Whether some of the import's raters are refreshed by a later event than this one
    (what reacts to the QC outcome of an import waits for that one)."""
    return len(event.payload.get("worker_ids", [])) > RATERS_PER_JOB
