"""The platform calls we owe: reviewers' decisions (approve, reject, bonus, block, ...)
are queued as PlatformAction rows with the decision, and a job makes each call after the
commit, outside any transaction, retried on failure (so a decision that rolls back never
reaches the platform, and a bonus is never paid twice)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.exceptions import InvalidAction, PaymentUnknown, ValidationError
from crowd.platforms.accounts import accounts_to_block_in, kept_accounts
from crowd.platforms.providers import PROVIDERS
from crowd.platforms.providers.base import ActionTarget
from crowd.queue.hooks import Event, SweepContext, every_sweep, own_transaction
from crowd.queue.jobs import context
from crowd.settings import Settings
from crowd.storage import (
    ActionStatus,
    Database,
    OutboxEvent,
    PlatformAction,
    PlatformSession,
    Publication,
    RemoteTask,
    SessionState,
    Study,
    Worker,
    utcnow,
)

log = logging.getLogger(__name__)

PLATFORM_ACTION = "platform.action"

# A call that failed this many times is given up (and shown as failed to the reviewer),
# unless whether it paid is unknown (PaymentUnknown): called failed, it would be paid again
# by hand; it is asked about again every CROWD_PLATFORM_SYNC_INTERVAL seconds instead
# (ask_again_about_payments).
MAX_ACTION_ATTEMPTS = 8


def queue_action(
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
                queue_action(
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
        queue_action(session, worker.provider, action, study.id, worker.id, paid_for[-1].id, params)
        return 1
    if action in ("block", "unblock", "notify", "grant_qualification"):
        latest = sessions[-1].id if sessions else None
        queue_action(session, worker.provider, action, study.id, worker.id, latest, params)
        return 1
    raise ValidationError(f"unknown platform action {action!r}", "action")


def _target(session: Session, row: PlatformAction, owner: int | None) -> ActionTarget:
    """Whom and what the call is about; `owner` is the study's experimenter (_experimenter)."""
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
        attempts=row.attempts,
        publication={
            **(publication.options if publication else {}),
            **(publication.remote if publication else {}),
        },
        accounts=kept_accounts(session, owner, row.provider) if owner is not None else {},
    )


def _experimenter(session: Session, row: PlatformAction) -> int | None:
    study = session.get(Study, row.study_id) if row.study_id is not None else None
    return study.experimenter_id if study is not None else None


def perform_action(db: Database, settings: Settings, action_id: int) -> str:
    """Make one queued platform call: read, call (outside any transaction), record.

    Raises on a failed call so the job is retried; after MAX_ACTION_ATTEMPTS failures the
    action is marked failed and no longer retried, except a payment whose outcome is
    unknown, which stays pending for ask_again_about_payments.
    """
    with db.read_session() as session:
        row = session.get(PlatformAction, action_id)
        if row is None:
            return f"platform action {action_id} does not exist"
        if row.status != ActionStatus.PENDING:
            return f"platform action {action_id} is already {row.status}"
        provider = PROVIDERS.get(row.provider)
        batched = row.action in provider.batched
        owner = _experimenter(session, row)
        target = _target(session, row, owner)
        action, params = row.action, dict(row.params)
    if batched:
        return perform_batch(db, settings, action_id)
    try:
        if action == "block" and provider.keeps_account and owner is not None:
            # Every workspace's exclusion (Prolific: a group) gets the worker; with none yet,
            # the publication's is made first.
            kept = accounts_to_block_in(db, settings, provider.name, owner, target.publication)
            target = replace(target, accounts=kept)
        result = provider.perform(settings, action, target, params, ActionLedger(db, action_id))
    except Exception as error:
        with db.session() as session:
            row = session.get(PlatformAction, action_id)
            if row is not None:
                row.attempts += 1
                row.last_error = f"{type(error).__name__}: {error}"[:2000]
                if row.attempts >= MAX_ACTION_ATTEMPTS and isinstance(error, PaymentUnknown):
                    log.warning("platform action %s: payment unknown, asked again by a later "
                                "sweep: %s", action_id, error)  # fmt: skip
                    return f"platform action {action_id}: payment unknown, asked again later"
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


def perform_batch(db: Database, settings: Settings, action_id: int) -> str:
    """Make a batched platform call (Provider.batched: Prolific's bulk message) for this
    action and the study's other pending ones with the same params, up to the provider's most.

    They are claimed in one transaction (result["batch"] names the action whose job sends
    them; their own jobs then have nothing to do), sent outside any transaction, and marked
    done, or failed for good, together. A retry after a partial failure sends only what the
    ledger does not note as sent.
    """
    with db.session() as session:
        row = session.get(PlatformAction, action_id, with_for_update=True)
        if row is None:
            return f"platform action {action_id} does not exist"
        if row.status != ActionStatus.PENDING:
            return f"platform action {action_id} is already {row.status}"
        leader = (row.result or {}).get("batch", action_id)
        if leader != action_id:
            return f"platform action {action_id} is sent with platform action {leader}"
        provider = PROVIDERS.get(row.provider)
        batch = [row]
        if row.study_id is not None:
            pending = session.scalars(
                select(PlatformAction)
                .where(
                    PlatformAction.provider == row.provider,
                    PlatformAction.action == row.action,
                    PlatformAction.study_id == row.study_id,
                    PlatformAction.status == ActionStatus.PENDING,
                    PlatformAction.id != row.id,
                )
                .order_by(PlatformAction.id)
                .with_for_update()
            ).all()
            batch += [
                other
                for other in pending
                if other.params == row.params
                and (other.result or {}).get("batch", action_id) == action_id
            ]
        batch = batch[: provider.batched[row.action]]
        for member in batch:
            member.result = {**(member.result or {}), "batch": action_id}
        # The calls of one study, so of one experimenter.
        owner = _experimenter(session, row)
        targets = [_target(session, member, owner) for member in batch]
        ids = [member.id for member in batch]
        action, params = row.action, dict(row.params)
    try:
        result = provider.perform_many(
            settings, action, targets, params, ActionLedger(db, action_id)
        )
    except Exception as error:
        with db.session() as session:
            members = [m for m in (session.get(PlatformAction, i) for i in ids) if m is not None]
            for member in members:
                member.attempts += 1
                member.last_error = f"{type(error).__name__}: {error}"[:2000]
            # The call is the leader's (listed first): its attempts decide when to give up.
            if members and members[0].attempts >= MAX_ACTION_ATTEMPTS:
                for member in members:
                    member.status = ActionStatus.FAILED
                log.error("platform actions %s failed for good: %s", ids, error)
                return f"platform actions {ids} failed: {error}"
        raise
    with db.session() as session:
        for done in (session.get(PlatformAction, i) for i in ids):
            if done is not None:
                done.attempts += 1
                done.status = ActionStatus.DONE
                done.done_at = utcnow()
                done.result = {**(done.result or {}), **result}
    return f"platform action {action_id} ({action}) done for {len(ids)} worker(s): {ids}"


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


def ask_again_about_payments(db: Database) -> int:
    """Queue once more the calls that gave up with their payment unknown (the platform's
    records could not be read either); returns how many. Each gets one more try: it asks
    the records first, and pays only if they show it unpaid."""
    with db.session() as session:
        rows = session.scalars(
            select(PlatformAction)
            .where(
                PlatformAction.status == ActionStatus.PENDING,
                PlatformAction.attempts >= MAX_ACTION_ATTEMPTS,
                PlatformAction.last_error.startswith(f"{PaymentUnknown.__name__}:"),
            )
            .with_for_update()
        ).all()
        for row in rows:
            # Below the limit, so that a sweep of another worker does not queue it too.
            row.attempts = MAX_ACTION_ATTEMPTS - 1
            session.add(OutboxEvent(topic=PLATFORM_ACTION, payload={"action_id": row.id}))
    return len(rows)


@every_sweep("platform-payments-unknown", every=lambda settings: settings.platform_sync_interval)
def ask_again_about_unknown_payments(sweep: SweepContext) -> None:
    """Every CROWD_PLATFORM_SYNC_INTERVAL seconds, the payments whose outcome is unknown."""
    asked = ask_again_about_payments(sweep.db)
    if asked:
        log.info("asked the platforms again about %d payment(s) of unknown outcome", asked)


@own_transaction(PLATFORM_ACTION)
def perform_queued_action(event: Event) -> str:
    """A queued platform call, made outside any transaction (it may take seconds); raises
    when the call fails, so the job is retried."""
    ctx = context()
    return perform_action(ctx.db, ctx.settings, int(event.payload["action_id"]))
