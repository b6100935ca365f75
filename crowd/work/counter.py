"""Which item of how many a worker is on: the worker page's "item i of n"."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, literal, or_, select
from sqlalchemy.orm import Session

from crowd.storage import Assignment, AssignmentState, Item, ItemKind, PlatformSession, Response
from crowd.work.assignments import _open_items, platform_items


def item_counter(
    session: Session, assignment: Assignment, category: str | None = None
) -> dict[str, int]:
    """Which item of how many the worker is on: the page's "item i of n".

    i counts the items the worker answered (in the crowd platform's session, or in the study
    on the open web) and this one. n is i plus every item still open to the worker: real items
    under their target, and the practice, gold and attention items they have not seen (in
    their category), capped by the platform session's items. Gold and attention items are
    served at a rate, so n is an upper bound: the worker may be done before it.

    n must not tell what kind of item this one is: serving any item takes one from what is
    open and adds one to i, so n stays the same whichever kind it was (a count of the real
    items left alone would grow by one on a gold item). Only other workers filling items
    change it.
    """
    study = assignment.item.study
    worker_id = assignment.worker_id
    platform_session = (
        session.get(PlatformSession, assignment.platform_session_id)
        if assignment.platform_session_id is not None
        else None
    )
    seen = select(Assignment.item_id).where(Assignment.worker_id == worker_id)
    real = select(func.count()).select_from(_open_items(study, seen, category).subquery())
    extra = select(func.count(Item.id)).where(
        Item.study_id == study.id,
        Item.kind.in_((ItemKind.TRAINING, ItemKind.GOLD, ItemKind.ATTENTION)),
        Item.id.not_in(seen),
    )
    if category is not None:  # as next_assignment serves them: of the category, or of none
        extra = extra.where(
            or_(
                Item.kind == ItemKind.TRAINING,
                Item.category == category,
                Item.category.is_(None),
            )
        )
    # Done: in the platform's session, or answered in the study on the open web.
    done: Any = (
        literal(platform_session.items_done)
        if platform_session is not None
        else select(func.count(Response.id))
        .where(Response.worker_id == worker_id, Response.study_id == study.id)
        .scalar_subquery()
    )
    # One statement for the counts.
    done, open_real, open_extra = session.execute(
        select(done, real.scalar_subquery(), extra.scalar_subquery())
    ).one()
    number = int(done or 0) + (1 if assignment.state == AssignmentState.ASSIGNED else 0)
    total = number + int(open_real or 0) + int(open_extra or 0)
    if platform_session is not None:
        total = min(total, platform_items(session, platform_session))
    number = max(number, 1)
    return {"item_number": number, "items_total": max(total, number)}
