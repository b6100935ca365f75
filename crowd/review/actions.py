"""Reviewers' actions on workers: approve, reject, soft-reject, block, bonus, notes, bulk.

Every action is audited with who, when and why. Actions that reach a crowd platform
(approve, reject, bonus, block) are queued with the decision (crowd.platforms.actions) and made
by a job after the commit, so they get to MTurk or Prolific where the worker came from
there, and a decision that rolls back never reaches the platform.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.exceptions import PermissionDenied, ValidationError
from crowd.platforms.actions import request_action
from crowd.quality.exclusion import replace_excluded, study_qc
from crowd.quality.standing import audit, standing
from crowd.review.workers import rule_targets, worker_in_study
from crowd.storage import (
    Assignment,
    AssignmentState,
    Bonus,
    Decision,
    OutboxEvent,
    Role,
    Serving,
    Study,
    StudyWorker,
    Worker,
    WorkerBlock,
)
from crowd.storage.outbox import WORKER_BLOCKED

ACTIONS = (
    "approve", "reject", "soft_reject", "block", "unblock", "bonus", "note", "notify", "qualify",
)  # fmt: skip
BULK_ACTIONS = ("approve", "reject", "soft_reject", "block", "note")
# Actions a person cannot take back for the worker: their pay, their data or their access. The
# reviewer's pages ask before taking them.
DESTRUCTIVE = frozenset({"reject", "soft_reject", "block"})
# Reviewers judge work; paying extra and barring people from every study is the
# experimenter's call.
ALLOWED: dict[Role, frozenset[str]] = {
    Role.EXPERIMENTER: frozenset(ACTIONS),
    Role.REVIEWER: frozenset({"approve", "reject", "soft_reject", "note"}),
}
MAX_BONUS = Decimal("100.00")
QUALIFICATION_ID = re.compile(r"^[A-Z0-9]{1,64}$")
MAX_TEXT = 2000


@dataclass(frozen=True)
class Reviewer:
    """Who acts: their name (for the audit log) and role."""

    name: str
    role: Role

    @property
    def actor(self) -> str:
        return f"{self.role.value}:{self.name}"


@dataclass(frozen=True)
class Outcome:
    action: str
    worker_id: int
    message: str
    changed: bool = True


def check_allowed(reviewer: Reviewer, action: str) -> None:
    if action not in ACTIONS:
        raise ValidationError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}", "action")
    if action not in ALLOWED[reviewer.role]:
        raise PermissionDenied(
            f"a {reviewer.role.value} may not {action.replace('_', '-')}: ask the experimenter"
        )


def check_decision(reviewer: Reviewer, action: str, params: Mapping[str, Any]) -> None:
    """What `act` would refuse before touching anything: the action, who may take it, and the
    reason a destructive action must give (so a confirmation is only asked for a valid one)."""
    check_allowed(reviewer, action)
    if action in DESTRUCTIVE:
        _text(params.get("reason"), "reason", required=True)


def _text(value: Any, field: str, required: bool) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ValidationError(f"must be text of at most {MAX_TEXT} characters", field)
    value = value.strip()
    if required and not value:
        raise ValidationError("say why: the worker and the audit log are told", field)
    return value


def _assignments(session: Session, study: Study, worker_id: int, state: str) -> list[Assignment]:
    return list(
        session.scalars(
            select(Assignment)
            .where(
                Assignment.study_id == study.id,
                Assignment.worker_id == worker_id,
                Assignment.state == state,
            )
            .order_by(Assignment.id)
            .with_for_update()
        ).all()
    )


def act(
    session: Session,
    study: Study,
    worker_id: int,
    action: str,
    reviewer: Reviewer,
    params: Mapping[str, Any] | None = None,
) -> Outcome:
    """Apply one reviewer action to one worker of the study; audited, safe to repeat."""
    check_allowed(reviewer, action)
    params = dict(params or {})
    worker = worker_in_study(session, study, worker_id)
    row = standing(session, study.id, worker_id)
    handler = _HANDLERS[action]
    return handler(session, study, worker, row, reviewer, params)


def _settle(
    session: Session, study: Study, worker: Worker, pay: bool, feedback: str = ""
) -> tuple[int, int]:
    """Approve (pay) or reject every submitted assignment of the worker, on the platform too
    (`feedback` is what the worker reads there: MTurk's RequesterFeedback).

    The platform calls are queued in this transaction and made by a job after the commit;
    returns how many assignments were decided here and how many platform calls are queued.
    """
    done = 0
    for assignment in _assignments(session, study, worker.id, AssignmentState.SUBMITTED):
        assignment.transition(AssignmentState.APPROVED if pay else AssignmentState.REJECTED)
        done += 1
    queued = request_action(
        session, study, worker, "approve" if pay else "reject", {"feedback": feedback}
    )
    return done, queued


def _queued(count: int, worker: Worker, what: str) -> str:
    """Says that the platform calls are only queued: a job makes them after the commit."""
    return f"; {count} {what} queued to {worker.provider}" if count else ""


def _approve(
    session: Session, study: Study, worker: Worker, row: StudyWorker, reviewer: Reviewer,
    params: dict[str, Any],
) -> Outcome:  # fmt: skip
    reason = _text(params.get("reason"), "reason", required=False)
    paid, queued = _settle(session, study, worker, pay=True, feedback=reason)
    # Approving keeps the worker: the exclusion or stop of the rules firing now is
    # overturned, with the other rules on the same evidence (below_crowd_early's and
    # below_crowd_known's verdicts are below_crowd's, at other points: the approval would not
    # survive the tenth answer otherwise); a rule on other evidence that fires later still acts.
    row.decision = Decision.APPROVED
    rules = study_qc(study).rules
    read = {rule.metric for rule in rules if rule.name in (row.rule_hits or [])}
    same = {rule.name for rule in rules if rule.metric in read}
    row.cleared_rules = sorted({*(row.cleared_rules or []), *(row.rule_hits or []), *same})
    row.excluded_by = None
    row.serving = Serving.ACTIVE
    row.flags = []
    audit(session, reviewer.actor, "approve", reason, study_id=study.id, worker_id=worker.id,
          details={"assignments": paid})  # fmt: skip
    return Outcome("approve", worker.id, f"approved {paid} assignment(s); the worker is kept"
                   + _queued(queued, worker, "payment(s)"))  # fmt: skip


def _reject(
    session: Session, study: Study, worker: Worker, row: StudyWorker, reviewer: Reviewer,
    params: dict[str, Any],
) -> Outcome:  # fmt: skip
    feedback = _text(params.get("reason"), "reason", required=True)
    rejected, queued = _settle(session, study, worker, pay=False, feedback=feedback)
    _exclude(session, study, row, reviewer, Decision.REJECTED)
    audit(session, reviewer.actor, "reject", feedback, study_id=study.id, worker_id=worker.id,
          details={"assignments": rejected})  # fmt: skip
    return Outcome("reject", worker.id, f"rejected {rejected} assignment(s); worker excluded"
                   + _queued(queued, worker, "rejection(s)"))  # fmt: skip


def _soft_reject(
    session: Session, study: Study, worker: Worker, row: StudyWorker, reviewer: Reviewer,
    params: dict[str, Any],
) -> Outcome:  # fmt: skip
    reason = _text(params.get("reason"), "reason", required=True)
    paid, queued = _settle(session, study, worker, pay=True, feedback=reason)
    _exclude(session, study, row, reviewer, Decision.SOFT_REJECTED)
    audit(session, reviewer.actor, "soft_reject", reason, study_id=study.id,
          worker_id=worker.id, details={"assignments_paid": paid})  # fmt: skip
    return Outcome("soft_reject", worker.id, f"approved {paid} assignment(s); data excluded"
                   + _queued(queued, worker, "payment(s)"))  # fmt: skip


def _exclude(
    session: Session, study: Study, row: StudyWorker, reviewer: Reviewer, decision: Decision
) -> None:
    row.decision = decision
    row.excluded_by = reviewer.actor
    row.serving = Serving.STOPPED
    row.flags = []
    session.flush()
    replace_excluded(session, study, [row.worker_id])


def _block(
    session: Session, study: Study, worker: Worker, row: StudyWorker, reviewer: Reviewer,
    params: dict[str, Any],
) -> Outcome:  # fmt: skip
    reason = _text(params.get("reason"), "reason", required=True)
    if _block_row(session, study, worker) is not None:
        return Outcome("block", worker.id, "the worker was already blocked", changed=False)
    request_action(session, study, worker, "block", {"reason": reason})
    session.add(WorkerBlock(experimenter_id=study.experimenter_id, worker_id=worker.id,
                            reason=reason, actor=reviewer.actor))  # fmt: skip
    audit(session, reviewer.actor, "block", reason, study_id=study.id, worker_id=worker.id)
    session.flush()
    replace_excluded(session, study, [worker.id])
    session.add(OutboxEvent(topic=WORKER_BLOCKED,
                            payload={"study_id": study.id, "worker_id": worker.id}))  # fmt: skip
    return Outcome("block", worker.id, "blocked from every study of this experimenter")


def _unblock(
    session: Session, study: Study, worker: Worker, row: StudyWorker, reviewer: Reviewer,
    params: dict[str, Any],
) -> Outcome:  # fmt: skip
    reason = _text(params.get("reason"), "reason", required=False)
    block = _block_row(session, study, worker)
    if block is None:
        return Outcome("unblock", worker.id, "the worker was not blocked", changed=False)
    request_action(session, study, worker, "unblock", {"reason": reason})
    session.delete(block)
    audit(session, reviewer.actor, "unblock", reason, study_id=study.id, worker_id=worker.id)
    return Outcome("unblock", worker.id, "unblocked")


def _block_row(session: Session, study: Study, worker: Worker) -> WorkerBlock | None:
    return session.scalar(
        select(WorkerBlock).where(
            WorkerBlock.experimenter_id == study.experimenter_id,
            WorkerBlock.worker_id == worker.id,
        )
    )


def parse_amount(value: Any) -> Decimal:
    """A bonus in dollars: more than 0, at most MAX_BONUS, at most two decimals."""
    try:
        amount = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise ValidationError("must be an amount like 0.50", "amount") from None
    if not amount.is_finite() or amount <= 0 or amount > MAX_BONUS:
        raise ValidationError(f"must be more than 0 and at most {MAX_BONUS}", "amount")
    if amount != amount.quantize(Decimal("0.01")):
        raise ValidationError("at most two decimals (cents)", "amount")
    return amount.quantize(Decimal("0.01"))


def bonus_token(study_id: int, worker_id: int, amount: Decimal, reason: str) -> str:
    """The default idempotency token: the same bonus, asked for twice, is paid once."""
    text = f"{study_id}:{worker_id}:{amount}:{reason}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _bonus(
    session: Session, study: Study, worker: Worker, row: StudyWorker, reviewer: Reviewer,
    params: dict[str, Any],
) -> Outcome:  # fmt: skip
    amount = parse_amount(params.get("amount"))
    reason = _text(params.get("reason"), "reason", required=True)
    token = params.get("token") or bonus_token(study.id, worker.id, amount, reason)
    if not isinstance(token, str) or not 1 <= len(token) <= 64:
        raise ValidationError("must be 1 to 64 characters", "token")
    existing = session.scalar(select(Bonus).where(Bonus.token == token))
    if existing is not None:
        if existing.worker_id != worker.id or Decimal(existing.amount) != amount:
            raise ValidationError("this token was used for another bonus", "token")
        return Outcome("bonus", worker.id, f"bonus {amount} was already recorded", changed=False)
    # Recorded with the queued platform call in one transaction; the job makes the call
    # after the commit, and the token makes any retry of it pay once.
    session.add(
        Bonus(study_id=study.id, worker_id=worker.id, amount=str(amount), reason=reason,
              token=token, actor=reviewer.actor)
    )  # fmt: skip
    session.flush()
    queued = request_action(
        session, study, worker, "bonus", {"amount": str(amount), "reason": reason, "token": token}
    )
    audit(session, reviewer.actor, "bonus", reason, study_id=study.id, worker_id=worker.id,
          details={"amount": str(amount), "token": token})  # fmt: skip
    if not queued:
        return Outcome("bonus", worker.id, f"bonus of {amount} recorded; {worker.provider} "
                       "workers are not paid through crowd")  # fmt: skip
    # Paid only when the job's call goes through: say so, and where to see it.
    where = f"`crowd {worker.provider} actions {study.id}` shows when it is paid"
    return Outcome("bonus", worker.id, f"bonus of {amount} queued to {worker.provider}; {where}")


def _note(
    session: Session, study: Study, worker: Worker, row: StudyWorker, reviewer: Reviewer,
    params: dict[str, Any],
) -> Outcome:  # fmt: skip
    text = _text(params.get("reason") or params.get("note"), "note", required=True)
    audit(session, reviewer.actor, "note", text, study_id=study.id, worker_id=worker.id)
    return Outcome("note", worker.id, "note added")


def _notify(
    session: Session, study: Study, worker: Worker, row: StudyWorker, reviewer: Reviewer,
    params: dict[str, Any],
) -> Outcome:  # fmt: skip
    """Message the worker through their platform (MTurk e-mails them)."""
    message = _text(params.get("reason") or params.get("message"), "message", required=True)
    subject = params.get("subject") or f"About your work in {study.name}"
    subject = _text(subject, "subject", required=True)[:200]
    queued = request_action(
        session, study, worker, "notify", {"subject": subject, "message": message}
    )
    audit(session, reviewer.actor, "notify", message, study_id=study.id, worker_id=worker.id,
          details={"subject": subject, "sent": bool(queued)})  # fmt: skip
    if not queued:
        return Outcome("notify", worker.id, "this worker has no platform to message", False)
    return Outcome("notify", worker.id, "message queued to the worker's platform")


def _qualify(
    session: Session, study: Study, worker: Worker, row: StudyWorker, reviewer: Reviewer,
    params: dict[str, Any],
) -> Outcome:  # fmt: skip
    """Grant the worker a platform qualification (e.g. MTurk's, for follow-up studies)."""
    qualification = params.get("qualification")
    if not isinstance(qualification, str) or not QUALIFICATION_ID.match(qualification):
        raise ValidationError("must be a platform qualification id (A-Z, 0-9)", "qualification")
    try:
        value = int(params.get("value", 1))
    except (TypeError, ValueError):
        raise ValidationError("must be a whole number", "value") from None
    queued = request_action(
        session, study, worker, "grant_qualification",
        {"qualification_id": qualification, "value": value},
    )  # fmt: skip
    details = {"qualification": qualification, "value": value, "sent": bool(queued)}
    audit(session, reviewer.actor, "qualify", _text(params.get("reason"), "reason", False),
          study_id=study.id, worker_id=worker.id, details=details)  # fmt: skip
    if not queued:
        return Outcome("qualify", worker.id, "this worker has no platform to qualify on", False)
    return Outcome("qualify", worker.id, f"qualification {qualification} queued")


_HANDLERS = {
    "approve": _approve,
    "reject": _reject,
    "soft_reject": _soft_reject,
    "block": _block,
    "unblock": _unblock,
    "bonus": _bonus,
    "note": _note,
    "notify": _notify,
    "qualify": _qualify,
}


def bulk(
    session: Session,
    study: Study,
    rule: str,
    action: str,
    reviewer: Reviewer,
    params: Mapping[str, Any] | None = None,
) -> list[Outcome]:
    """Apply `action` to every worker of the study on whom `rule` fires now.

    Workers for whom a person overruled the rule are left alone, and bonuses are not paid
    in bulk (each needs its own amount, reason and idempotency token).
    """
    check_allowed(reviewer, action)
    if action not in BULK_ACTIONS:
        raise ValidationError(f"bulk actions are {', '.join(BULK_ACTIONS)}", "action")
    targets = rule_targets(session, study, rule)
    details = {"rule": rule, "workers": len(targets)}
    audit(session, reviewer.actor, f"bulk_{action}", f"every worker on whom {rule} fires",
          study_id=study.id, details=details)  # fmt: skip
    return [act(session, study, worker_id, action, reviewer, params) for worker_id in targets]
