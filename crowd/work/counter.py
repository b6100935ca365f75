"""Which item of how many a worker is on: the worker page's "item i of n"; and the items
still open to a worker, which serving reads too."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ScalarSelect, Select, func, or_, select
from sqlalchemy.orm import Session

from crowd.storage import (
    Assignment,
    AssignmentState,
    Item,
    ItemKind,
    PlatformSession,
    Publication,
    RemoteTask,
    Response,
    Study,
)

DEFAULT_ITEMS_PER_SESSION = 10


def default_target(study: Study) -> int:
    """How many answers an item without a target of its own gets."""
    return int(study.config.get("annotations_per_item", 1))


def open_items(study: Study, seen: Any, category: str | None) -> Select[Any]:
    """The ids of real items under their target that the worker has not seen.

    Gold items are not among them: they are served at each worker's gold rate, to any number
    of workers (see quality.gold_due).
    """
    return open_items_of(study.id, default_target(study), seen, category or None)


def open_items_of(study_id: Any, target: Any, seen: Any, category: Any) -> Select[Any]:
    """`open_items` from values or bound parameters (a statement built once and run with
    each request's values: crowd.work.serving); no category filter when it is None."""
    query = select(Item.id).where(
        Item.study_id == study_id,
        Item.kind == ItemKind.REAL,
        Item.holders < func.coalesce(Item.target, target),
        Item.id.not_in(seen),
    )
    if category is not None:
        query = query.where(Item.category == category)
    return query


def platform_items(session: Session, platform_session: PlatformSession) -> int:
    """How many items one platform session (an MTurk HIT, a Prolific place) covers."""
    task = session.get(RemoteTask, platform_session.remote_task_id)
    publication = session.get(Publication, task.publication_id) if task is not None else None
    value = publication.options.get("items_per_session") if publication is not None else None
    return int(value) if value else DEFAULT_ITEMS_PER_SESSION


def count_columns(
    study_id: Any, target: Any, worker_id: Any, seen: Any, category: Any
) -> tuple[ScalarSelect[Any], ScalarSelect[Any], ScalarSelect[Any]]:
    """The counts "item i of n" rests on, as columns for a statement that reads more: the
    worker's answers in the study, the real items open to them and the practice, gold and
    attention items they have not seen (in their category, unless it is None). Values or
    bound parameters, as `open_items_of`."""
    done = select(func.count(Response.id)).where(
        Response.worker_id == worker_id, Response.study_id == study_id
    )
    real = select(func.count()).select_from(
        open_items_of(study_id, target, seen, category).subquery()
    )
    extra = select(func.count(Item.id)).where(
        Item.study_id == study_id,
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
    return done.scalar_subquery(), real.scalar_subquery(), extra.scalar_subquery()


def item_counter(
    session: Session,
    assignment: Assignment,
    done: int,
    open_before: int,
    served_now: bool,
    platform_session: PlatformSession | None = None,
) -> dict[str, int]:
    """Which item of how many the worker is on: the page's "item i of n", from the counts
    `count_columns` read before serving (answers `done`, items open), `served_now` telling
    whether the assignment was served by this request or was open already.

    i counts the items the worker answered (in the crowd platform's session, or in the study
    on the open web) and this one. n is i plus every item still open to the worker: real items
    under their target, and the practice, gold and attention items they have not seen (in
    their category), capped by the platform session's items. Gold and attention items are
    served at a rate, so n is an upper bound: the worker may be done before it.

    n must not tell what kind of item this one is: serving any item takes one from what is
    open and adds one to i, so n stays the same whichever kind it was (a count of the real
    items left alone would grow by one on a gold item). Only other workers filling items
    change it. Counted before serving, the open items still hold a newly served one: n is
    then answers done + open, as counted after serving it would be done + 1 + (open - 1).
    """
    if platform_session is not None:
        done = platform_session.items_done
    number = done + (1 if assignment.state == AssignmentState.ASSIGNED else 0)
    total = done + open_before if served_now else number + open_before
    if platform_session is not None:
        total = min(total, platform_items(session, platform_session))
    number = max(number, 1)
    return {"item_number": number, "items_total": max(total, number)}
