"""What we keep of each experimenter's account on a platform, one PlatformAccount row per
workspace of it, set up once by the provider's prepare_account: on Prolific, the participant
group of the workers the experimenter blocked, one per workspace they publish in (a group
belongs to a workspace, as a study does), which every study published there excludes.

It is set up outside any other transaction, before the publish or block that needs it, and
committed in a transaction of its own: a publish that then fails, or whose commit fails,
leaves it kept, so a retry uses the same group rather than making another. Two calls that
set it up at once both ask the platform; the first to commit is kept and used by both.
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


def _row(session: Session, experimenter_id: int, provider: str, workspace: str) -> PlatformAccount:
    query = (
        select(PlatformAccount)
        .where(
            PlatformAccount.experimenter_id == experimenter_id,
            PlatformAccount.provider == provider,
            PlatformAccount.workspace == workspace,
        )
        .with_for_update()
    )
    row = session.scalar(query)
    if row is not None:
        return row
    try:
        with session.begin_nested():
            row = PlatformAccount(
                experimenter_id=experimenter_id, provider=provider, workspace=workspace, settings={}
            )
            session.add(row)
    except IntegrityError:
        # Another transaction made it meanwhile: use theirs.
        row = session.scalar(query)
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


def kept_accounts(
    session: Session, experimenter_id: int, provider: str
) -> dict[str, dict[str, Any]]:
    """What we keep of the account now, by workspace ({} when nothing was set up)."""
    rows = session.scalars(
        select(PlatformAccount)
        .where(
            PlatformAccount.experimenter_id == experimenter_id,
            PlatformAccount.provider == provider,
        )
        .order_by(PlatformAccount.id)
    ).all()
    return {row.workspace: dict(row.settings) for row in rows if row.settings}


def ensure_account(
    db: Database,
    settings: Settings,
    provider: str,
    experimenter_id: int,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """The account in the workspace of a publication with these options, set up and
    committed (call it outside any transaction: the platform is asked with what we have,
    and what it made is kept unless another call kept its own first, in which case that one
    is used and ours is left unused on the platform)."""
    platform = PROVIDERS.get(provider)
    workspace = platform.account_workspace(settings, options)
    with db.read_session() as session:
        current = kept_accounts(session, experimenter_id, provider).get(workspace, {})
        owner, blocked = _owner_and_blocked(session, experimenter_id, provider)
    made = platform.prepare_account(settings, current, workspace, owner, blocked)
    if made == current:
        return current
    with db.session() as session:
        row = _row(session, experimenter_id, provider, workspace)
        if dict(row.settings) != current:
            log.warning(
                "%s account of experimenter %s in workspace %r was set up meanwhile by another "
                "call: using %s; %s is left unused on the platform",
                provider, experimenter_id, workspace, row.settings, made,
            )  # fmt: skip
            return dict(row.settings)
        row.settings = made
    return made


def accounts_to_block_in(
    db: Database,
    settings: Settings,
    provider: str,
    experimenter_id: int,
    options: Mapping[str, Any],
) -> dict[str, dict[str, Any]]:
    """Every workspace's account of the experimenter, which a block reaches; with none yet,
    the one of the publication's workspace is set up first (with everyone blocked so far)."""
    with db.read_session() as session:
        kept = kept_accounts(session, experimenter_id, provider)
    if kept:
        return kept
    ensure_account(db, settings, provider, experimenter_id, options)
    with db.read_session() as session:
        return kept_accounts(session, experimenter_id, provider)
