"""What reviewers look at: the workers table, one worker's answers and standing, the audit log,
and who an action would touch before it is taken."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from crowd.exceptions import NotFound, ValidationError
from crowd.quality.exclusion import blocked_in_study
from crowd.storage import (
    Assignment,
    AssignmentState,
    AuditEntry,
    Bonus,
    Item,
    ItemKind,
    Response,
    Serving,
    Study,
    StudyWorker,
    Worker,
)


def worker_in_study(session: Session, study: Study, worker_id: int) -> Worker:
    worker = session.get(Worker, worker_id)
    has_work = session.scalar(
        select(func.count(Assignment.id)).where(
            Assignment.study_id == study.id, Assignment.worker_id == worker_id
        )
    ) or session.scalar(  # imported raters have answers but no assignments; QC judges them too
        select(func.count(Response.id)).where(
            Response.study_id == study.id, Response.worker_id == worker_id
        )
    )
    if worker is None or not has_work:
        raise NotFound(f"worker {worker_id} has done no work in study {study.id}")
    return worker


def rule_targets(session: Session, study: Study, rule: str) -> list[int]:
    """The workers of the study on whom `rule` fires now, less those a person overruled it for."""
    rows = session.scalars(
        select(StudyWorker).where(StudyWorker.study_id == study.id).order_by(StudyWorker.worker_id)
    ).all()
    return [
        row.worker_id
        for row in rows
        if rule in (row.rule_hits or []) and rule not in (row.cleared_rules or [])
    ]


def submitted_assignments(session: Session, study: Study, worker_ids: list[int]) -> int:
    """How many submitted (not yet approved or rejected) assignments the workers have."""
    return (
        session.scalar(
            select(func.count(Assignment.id)).where(
                Assignment.study_id == study.id,
                Assignment.worker_id.in_(worker_ids),
                Assignment.state == AssignmentState.SUBMITTED,
            )
        )
        or 0
    )


def worker_names(session: Session, worker_ids: list[int]) -> dict[int, str]:
    """provider:external id of each worker."""
    found = session.execute(
        select(Worker.id, Worker.provider, Worker.external_id).where(Worker.id.in_(worker_ids))
    ).all()
    return {worker_id: f"{provider}:{external}" for worker_id, provider, external in found}


SORT_KEYS = (
    "worker", "responses", "gold_accuracy", "gold_mean", "agreement", "stopped_reading_prob",
    "attention_failed", "too_fast_share", "constant_share", "longest_run", "flags", "status",
)  # fmt: skip


def worker_table(session: Session, study: Study, sort: str = "worker") -> list[dict[str, Any]]:
    """One row per worker of the study with their QC evidence, standing and decision."""
    if sort.lstrip("-") not in SORT_KEYS:
        raise ValidationError(f"sort by one of {', '.join(SORT_KEYS)}", "sort")
    counts = dict(
        session.execute(
            select(Response.worker_id, func.count(Response.id))
            .join(Item, Item.id == Response.item_id)
            .where(Response.study_id == study.id, Item.kind != ItemKind.TRAINING)
            .group_by(Response.worker_id)
        ).all()
    )
    result = session.execute(
        select(StudyWorker, Worker)
        .join(Worker, Worker.id == StudyWorker.worker_id)
        .where(StudyWorker.study_id == study.id)
    ).all()
    blocked = blocked_in_study(session, study)
    table: list[dict[str, Any]] = []
    for row, worker in result:
        evidence = row.evidence or {}
        table.append(
            {
                "worker_id": worker.id,
                "worker": f"{worker.provider}:{worker.external_id}",
                "provider": worker.provider,
                "responses": counts.get(worker.id, 0),
                "gold_n": evidence.get("gold_n"),
                "gold_accuracy": evidence.get("gold_accuracy"),
                "gold_mean": evidence.get("gold_mean"),
                "agreement": evidence.get("agreement"),
                "agreement_threshold": evidence.get("agreement_threshold"),
                "agreement_n": evidence.get("agreement_n"),
                "collusion_partners": evidence.get("collusion_partners"),
                "stopped_reading_prob": evidence.get("stopped_reading_prob"),
                "attention_checks": evidence.get("attention_checks"),
                "attention_failed": evidence.get("attention_failed"),
                "too_fast_share": evidence.get("too_fast_share"),
                "constant_share": evidence.get("constant_share"),
                "longest_run": evidence.get("longest_run"),
                "repeated_explanations": evidence.get("repeated_explanations"),
                "pasted_n": evidence.get("pasted_n"),
                "typed_too_fast_n": evidence.get("typed_too_fast_n"),
                "rule_hits": list(row.rule_hits or []),
                "flags": list(row.flags or []),
                "serving": str(row.serving),
                "excluded_by": row.excluded_by,
                "qualification": None if row.qualification is None else str(row.qualification),
                "decision": None if row.decision is None else str(row.decision),
                "blocked": worker.id in blocked,
                "status": _status(row, worker.id in blocked),
            }
        )
    key = sort.lstrip("-")
    reverse = sort.startswith("-")

    def order(entry: dict[str, Any]) -> tuple[bool, Any]:
        value = entry[key]
        if isinstance(value, list):
            value = len(value)
        # Missing values go last whichever way the table is sorted.
        return (value is None) != reverse, value if value is not None else 0

    return sorted(sorted(table, key=lambda e: str(e["worker"])), key=order, reverse=reverse)


def _status(row: StudyWorker, blocked: bool) -> str:
    if blocked:
        return "blocked"
    if row.decision is not None:
        return str(row.decision)
    if row.excluded_by is not None:
        return "excluded"
    if row.serving == Serving.STOPPED:
        return "stopped"
    if row.flags:
        return "flagged"
    return "active"


def worker_history(session: Session, study: Study, worker_id: int) -> dict[str, Any]:
    """A worker's answers in the study, oldest first, with QC facts, and their audit trail."""
    worker = worker_in_study(session, study, worker_id)
    responses = session.execute(
        select(Response, Item)
        .join(Item, Item.id == Response.item_id)
        .where(Response.study_id == study.id, Response.worker_id == worker_id)
        .order_by(Response.created_at, Response.id)
    ).all()
    answers = [
        {
            "response_id": response.id,
            "item": item.external_id,
            "kind": str(item.kind),
            "answer": response.answer,
            "surface": response.qc_flags.get("surface"),
            "seconds": response.qc_flags.get("seconds"),
            "gold_accuracy": response.qc_flags.get("gold_accuracy"),
            "attention_passed": response.qc_flags.get("attention_passed"),
            "signals": sorted((response.qc_flags.get("signals") or {}).keys()),
            "explanation": response.explanation,
            "created_at": response.created_at.isoformat(),
        }
        for response, item in responses
    ]
    # Read-only: a worker the QC job has not seen yet has a blank standing.
    row = session.scalar(
        select(StudyWorker).where(
            StudyWorker.study_id == study.id, StudyWorker.worker_id == worker_id
        )
    ) or StudyWorker(study_id=study.id, worker_id=worker_id, evidence={}, rule_hits=[],
                     flags=[], cleared_rules=[])  # fmt: skip
    return {
        "worker_id": worker.id,
        "worker": f"{worker.provider}:{worker.external_id}",
        "status": _status(row, worker.id in blocked_in_study(session, study)),
        "evidence": row.evidence,
        "rule_hits": row.rule_hits,
        "answers": answers,
        "audit": [audit_row(entry) for entry in audit_log(session, study.id, worker_id)],
        "bonuses": [
            {
                "amount": b.amount,
                "reason": b.reason,
                "actor": b.actor,
                "at": b.created_at.isoformat(),
            }
            for b in session.scalars(
                select(Bonus).where(Bonus.study_id == study.id, Bonus.worker_id == worker_id)
            ).all()
        ],
    }


def audit_log(
    session: Session, study_id: int, worker_id: int | None = None, limit: int = 500
) -> list[AuditEntry]:
    query = select(AuditEntry).where(AuditEntry.study_id == study_id)
    if worker_id is not None:
        query = query.where(AuditEntry.worker_id == worker_id)
    return list(session.scalars(query.order_by(AuditEntry.id.desc()).limit(limit)).all())


def audit_row(entry: AuditEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "at": entry.at.isoformat(),
        "actor": entry.actor,
        "action": entry.action,
        "worker_id": entry.worker_id,
        "reason": entry.reason,
        "details": entry.details,
    }


def answered_items(
    session: Session, study: Study, worker_id: int
) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
    """The content and expected answer of the item behind each of the worker's responses, by
    response id: what a reviewer needs to read an answer in the HIT type's terms."""
    found = session.execute(
        select(Response.id, Item.content, Item.expected)
        .join(Item, Item.id == Response.item_id)
        .where(Response.study_id == study.id, Response.worker_id == worker_id)
    ).all()
    return {
        response_id: (dict(content or {}), dict(expected or {}))
        for response_id, content, expected in found
    }
