"""Worker statistics and QC flags, recomputed from stored responses (never incremented)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.quality import standing as quality
from crowd.queue.hooks import QC_REFRESH, Event, on_event
from crowd.storage import Item, ItemKind, Response, Study, Worker
from crowd.storage.outbox import RESPONSE_EXPLAINED, RESPONSE_STORED, RESPONSES_IMPORTED


def refresh_after_response(session: Session, response_id: int) -> None:
    response = session.get(Response, response_id)
    if response is None:
        return
    refresh_worker(session, response.worker_id, response.study_id)
    # QC rules act on the worker's evidence here, off the request path (SPEC 4).
    quality.refresh_standing(session, response.item.study, response.worker_id)


def refresh_worker(session: Session, worker_id: int, study_id: int) -> dict[str, Any]:
    """Recompute one worker's numbers in one study; running it twice gives the same result."""
    worker = session.get(Worker, worker_id)
    if worker is None:
        return {}
    rows = session.execute(
        select(Item.kind, Response.score, Response.qc_flags)
        .join(Item, Item.id == Response.item_id)
        .where(Response.worker_id == worker_id, Response.study_id == study_id)
    ).all()
    # Practice answers on training examples and attention checks earn no points.
    scored_kinds = (ItemKind.REAL, ItemKind.GOLD)
    real = [score for kind, score, _ in rows if kind in scored_kinds and score is not None]
    checks = [
        flags.get("attention_passed") for kind, _, flags in rows if kind == ItemKind.ATTENTION
    ]
    failed = sum(1 for passed in checks if passed is False)
    numbers = {
        "responses": len(rows),
        "real_responses": len(real),
        "points": sum(real),
        "mean_points": round(sum(real) / len(real), 4) if real else None,
        "attention_checks": len(checks),
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
    """An answer (or its explanation) was stored: the worker's numbers and QC standing."""
    refresh_after_response(session, int(event.payload["response_id"]))


@on_event(RESPONSES_IMPORTED, order=QC_REFRESH)
def refresh_after_import(session: Session, event: Event) -> None:
    """Answers were imported: the numbers and QC standing of every worker they came from.

    Imported raters are judged like live workers (the rules' exclusions shape the filtered
    set), so the report this event refreshes already leaves out those the rules exclude.
    """
    study = session.get(Study, int(event.payload["study_id"]))
    if study is None:
        return
    for worker_id in event.payload.get("worker_ids", []):
        refresh_worker(session, int(worker_id), study.id)
        quality.refresh_standing(session, study, int(worker_id))
