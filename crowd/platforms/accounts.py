"""What we keep of each experimenter's account on a platform (a PlatformAccount row), set up
once by the provider's prepare_account: on Prolific, the participant group of the workers
the experimenter blocked, which every study published for them excludes.

Publishing sets it up inside its own transaction, with the row locked while the platform is
asked; a queued block sets it up outside any transaction and keeps what it made only if no
one kept theirs first, so every caller ends up with the same group.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from crowd.platforms.providers import PROVIDERS
from crowd.settings import Settings
from crowd.storage import Database, Experimenter, PlatformAccount, Worker, WorkerBlock

log = logging.getLogger(__name__)


def _row(session: Session, experimenter_id: int, provider: str, lock: bool) -> PlatformAccount:
    query = select(PlatformAccount).where(
        PlatformAccount.experimenter_id == experimenter_id, PlatformAccount.provider == provider
    )
    row = session.scalar(query.with_for_update() if lock else query)
    if row is not None:
        return row
    try:
        with session.begin_nested():
            row = PlatformAccount(experimenter_id=experimenter_id, provider=provider, settings={})
            session.add(row)
    except IntegrityError:
        # Another transaction made it meanwhile: use theirs.
        row = session.scalar(query.with_for_update() if lock else query)
        if row is None:
            raise
    return row


def _owner_and_blocked(
    session: Session, experimenter_id: int, provider: str
) -> tuple[str, list[str]]:
    owner = session.get(Experimenter, experimenter_id)
    blocked = session.scalars(
        select(Worker.external_id)
        .join(WorkerBlock, WorkerBlock.worker_id == Worker.id)
        .where(WorkerBlock.experimenter_id == experimenter_id, Worker.provider == provider)
        .order_by(Worker.id)
    ).all()
    return (owner.name if owner else f"experimenter {experimenter_id}"), list(blocked)


def account(session: Session, experimenter_id: int, provider: str) -> dict[str, Any]:
    """What we keep of the account now ({} when nothing was set up)."""
    row = session.scalar(
        select(PlatformAccount).where(
            PlatformAccount.experimenter_id == experimenter_id,
            PlatformAccount.provider == provider,
        )
    )
    return dict(row.settings) if row is not None else {}


def prepared_account(
    session: Session,
    settings: Settings,
    provider: str,
    experimenter_id: int,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """The account set up for publishing, inside the caller's transaction (the row is locked
    while the platform is asked, so two publishes set it up once)."""
    row = _row(session, experimenter_id, provider, lock=True)
    owner, blocked = _owner_and_blocked(session, experimenter_id, provider)
    made = PROVIDERS.get(provider).prepare_account(settings, row.settings, options, owner, blocked)
    if made != row.settings:
        row.settings = made
        session.flush()
    return dict(made)


def ensure_account(
    db: Database,
    settings: Settings,
    provider: str,
    experimenter_id: int,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """The account set up for a queued platform call, outside any transaction: the platform
    is asked with what we have, and what it made is kept unless another call kept its own
    first, in which case that one is used (and ours is left unused on the platform)."""
    with db.read_session() as session:
        current = account(session, experimenter_id, provider)
        owner, blocked = _owner_and_blocked(session, experimenter_id, provider)
    made = PROVIDERS.get(provider).prepare_account(settings, current, options, owner, blocked)
    if made == current:
        return current
    with db.session() as session:
        row = _row(session, experimenter_id, provider, lock=True)
        if dict(row.settings) != current:
            log.warning(
                "%s account of experimenter %s was set up meanwhile by another call: using "
                "%s; %s is left unused on the platform",
                provider, experimenter_id, row.settings, made,
            )  # fmt: skip
            return dict(row.settings)
        row.settings = made
    return made
