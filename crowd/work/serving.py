"""Serving's statements: what serving decides on, read in one statement with the worker's row
locked, and the statements that take an item (its holder counter raised in the same
statement). They are built once per process with bound parameters: building a statement
(and an alias) cost SQLAlchemy more CPU than running it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Integer, Select, String, and_, bindparam, func, or_, select, true, update
from sqlalchemy.orm import Session, aliased, defer, joinedload

from crowd.exceptions import NotFound
from crowd.storage import (
    Assignment,
    AssignmentState,
    Item,
    ItemKind,
    Study,
    StudyWorker,
    Worker,
    WorkerBlock,
)
from crowd.work.counter import count_columns, default_target, open_items_of
from tasks import get_hit_type


@dataclass
class Context:
    """Everything serving decides on, read in one statement (the worker's row locked)."""

    worker: Worker
    standing: StudyWorker | None
    open_assignment: Assignment | None
    blocked: bool
    served: int
    attention_served: int
    training_id: int | None
    real_left: bool
    done: int
    open_before: int


# The open assignment is joined under an alias, so the subqueries of the context statement,
# which read the assignments table, are not correlated with it. Made once: an alias makes
# its columns anew.
_OPENED = aliased(Assignment, name="open_assignment")


@functools.cache
def _context_statement(by_category: bool) -> Select[Any]:
    """The statement `read_context` runs, with bound parameters for the request's values
    (`serving_values`): the study, its experimenter, the worker, the study's default answers
    per item and the category."""
    study_id = bindparam("p_study_id", type_=Integer)
    worker_id = bindparam("p_worker_id", type_=Integer)
    target = bindparam("p_target", type_=Integer)
    category = bindparam("p_category", type_=String) if by_category else None
    seen = select(Assignment.item_id).where(Assignment.worker_id == worker_id)
    opened = _OPENED
    served = (
        select(
            func.count(Assignment.id),
            func.count(Assignment.id).filter(Item.kind == ItemKind.ATTENTION),
        )
        .join(Item, Item.id == Assignment.item_id)
        .where(
            Assignment.worker_id == worker_id,
            Assignment.study_id == study_id,
            Item.kind != ItemKind.TRAINING,
        )
        .subquery()
    )
    training = (
        select(Item.id)
        .where(Item.study_id == study_id, Item.kind == ItemKind.TRAINING, Item.id.not_in(seen))
        .order_by(Item.rank, Item.id)
        .limit(1)
        .scalar_subquery()
    )
    blocked = (
        select(WorkerBlock.id)
        .where(WorkerBlock.experimenter_id == bindparam("p_experimenter_id", type_=Integer),
               WorkerBlock.worker_id == worker_id)
        .exists()
    )  # fmt: skip
    real_left = open_items_of(study_id, target, seen, category).exists()
    done, open_real, open_extra = count_columns(study_id, target, worker_id, seen, category)
    return (
        select(
            Worker, StudyWorker, opened, blocked, served.c[0], served.c[1], training, real_left,
            done, open_real, open_extra,
        )  # fmt: skip
        .select_from(Worker)
        .join(served, true())
        .outerjoin(StudyWorker,
                   and_(StudyWorker.study_id == study_id, StudyWorker.worker_id == Worker.id))
        .outerjoin(opened, and_(opened.worker_id == Worker.id, opened.study_id == study_id,
                                opened.state == AssignmentState.ASSIGNED))
        .where(Worker.id == worker_id)
        # The page shows the open item; serving never reads the worker's numbers and flags
        # (JSON that grows with every study they join), so they are left for a lazy load.
        .options(joinedload(opened.item), defer(Worker.stats), defer(Worker.qc_flags))
        .limit(1)
        .with_for_update(of=Worker)
    )  # fmt: skip


def serving_values(study: Study, worker_id: int, category: str | None) -> dict[str, Any]:
    """The values of the bound parameters of serving's statements (those built once)."""
    values: dict[str, Any] = {
        "p_study_id": study.id,
        "p_experimenter_id": study.experimenter_id,
        "p_worker_id": worker_id,
        "p_target": default_target(study),
    }
    if category is not None:
        values["p_category"] = category
    return values


def read_context(session: Session, values: dict[str, Any]) -> Context:
    """The worker (locked: their requests for work queue up), their QC standing, open
    assignment and block, how many items they were served (attention checks apart), the
    next practice item, whether real work is left, and the counts of "item i of n"; for
    the `serving_values` of the study, worker and category."""
    row = session.execute(_context_statement("p_category" in values), values).first()
    if row is None:
        raise NotFound("unknown worker: join again to get a new worker token")
    return Context(
        worker=row[0], standing=row[1], open_assignment=row[2], blocked=bool(row[3]),
        served=int(row[4] or 0), attention_served=int(row[5] or 0), training_id=row[6],
        real_left=bool(row[7]), done=int(row[8] or 0),
        open_before=int(row[9] or 0) + int(row[10] or 0),
    )  # fmt: skip


# Serving's statements take items with their holder counter raised and the item read back.
_TAKE_OPTIONS = {"synchronize_session": False, "populate_existing": True}


def take(session: Session, pick: Select[Any]) -> Item | None:
    """The item `pick` selects (one id), its holder counter raised: one statement."""
    return take_by(session, _take_statement(pick), {})


def _take_statement(pick: Select[Any]) -> Any:
    return (
        update(Item)
        .where(Item.id == pick.scalar_subquery())
        .values(holders=Item.holders + 1)
        .returning(Item)
    )


def take_by(session: Session, statement: Any, values: dict[str, Any]) -> Item | None:
    return session.scalars(statement, values, execution_options=_TAKE_OPTIONS).first()


# Readers' worth (a reader always right weighs 1: crowd.quality.tally) of the study's share of
# right gold answers that a gold item's own share starts from (easy gold first): an item few
# have answered is taken to be typical, so one lucky answer does not put it ahead of the gold
# that many readers got right.
EASY_PRIOR = 2.0


def _easiness(study_id: Any) -> Any:
    """A gold item's share of right answers (its tally, `Item.gold_right` of
    `Item.gold_weight`, each answer weighed by its reader's agreement with the crowd), shrunk
    towards the study's share over its gold by EASY_PRIOR readers (one half before any gold
    answer counts)."""
    every = aliased(Item, name="study_gold")
    study_share = (
        select(
            func.coalesce(
                func.sum(every.gold_right) / func.nullif(func.sum(every.gold_weight), 0), 0.5
            )
        )
        .where(every.study_id == study_id, every.kind == ItemKind.GOLD)
        .scalar_subquery()
    )
    return (Item.gold_right + EASY_PRIOR * study_share) / (Item.gold_weight + EASY_PRIOR)


@functools.cache
def claim_statement(
    kind: ItemKind,
    by_category: bool,
    shuffle: bool = True,
    skip_locked: bool | None = None,
    shared: bool = False,
    easy_first: bool = False,
) -> Any:
    """The statement that takes an item of `kind` the worker has not seen, with bound
    parameters study_id, worker_id, target and category (when `by_category`); built once
    per process, as the context statement is.

    Real items: one under its target (crowd.work.counter.open_items), of the category;
    lower ranks first (one group after another), within a rank items that have some
    annotations (so items get finished), then at random (`shuffle`) or by id; locked
    (`skip_locked` as asked). Gold and attention items: an unseen one of the category or
    of none (so gold never stands out by topic), at random; where `shared` (gold, the
    study's qc.gold.shared_order), the one most workers answered or hold first (its holder
    counter), then at random, locked as asked. So every worker meets the same gold, nearly
    in one order: a ring that shares its answers shares them on items whose truth is known,
    where qc.collusion can test it within a few items. At random, two workers who each see
    8 of 40 gold items would share one or two of them. With `easy_first` (qc.gold.easy_first)
    that order puts first the gold its readers got right most often (`_easiness`): which
    gold leads is then no longer chance, and a study whose first gold happened to be hard
    no longer judges its first careful workers by items that tell a reader from a guesser
    little. An item that turns out hard drops behind the unanswered ones, which are tried
    in turn.
    """
    study_id = bindparam("p_study_id", type_=Integer)
    seen = select(Assignment.item_id).where(
        Assignment.worker_id == bindparam("p_worker_id", type_=Integer)
    )
    category = bindparam("p_category", type_=String) if by_category else None
    if kind == ItemKind.REAL:
        target = bindparam("p_target", type_=Integer)
        pick = open_items_of(study_id, target, seen, category).order_by(
            Item.rank, Item.holders.desc(), func.random() if shuffle else Item.id
        )
    else:
        pick = select(Item.id).where(
            Item.study_id == study_id, Item.kind == kind, Item.id.not_in(seen)
        )
        if category is not None:
            pick = pick.where(or_(Item.category == category, Item.category.is_(None)))
        order = [Item.holders.desc()] if kind == ItemKind.GOLD and shared else []
        if order and easy_first:
            order.insert(0, _easiness(study_id).desc())
        pick = pick.order_by(*order, func.random())
    pick = pick.limit(1)
    if skip_locked is not None:
        pick = pick.with_for_update(skip_locked=skip_locked)
    return _take_statement(pick)


def take_kind(session: Session, kind: ItemKind, values: dict[str, Any]) -> Item | None:
    """Take an unseen gold or attention item at random (`claim_statement`), or None."""
    return take_by(session, claim_statement(kind, "p_category" in values), values)


def take_gold(
    session: Session, values: dict[str, Any], shared: bool, easy_first: bool = False
) -> Item | None:
    """Take an unseen gold item, or None: at random, or where `shared` (the study's
    qc.gold.shared_order) the one most workers answered or hold, or with `easy_first` the
    one its readers got right most often (`claim_statement`)."""
    if not shared:
        return take_kind(session, ItemKind.GOLD, values)
    by_category = "p_category" in values
    # Every request wants the item that leads: first pass over one another request holds
    # locked (PostgreSQL), so they do not queue on one row; then wait, as real items do.
    for skip_locked in (True, False):
        claim = claim_statement(ItemKind.GOLD, by_category, skip_locked=skip_locked, shared=True,
                                easy_first=easy_first)  # fmt: skip
        item = take_by(session, claim, values)
        if item is not None:
            return item
    return None


def claim_real_item(session: Session, study: Study, values: dict[str, Any]) -> Item | None:
    """Take a slot of a real item under its target: the item is picked, locked and its
    holder counter raised in one statement (`claim_statement`)."""
    shuffle = get_hit_type(study.hit_type).shuffle_items(study.config)
    by_category = "p_category" in values
    # First skip items other requests hold locked (PostgreSQL), so concurrent workers spread
    # out; then wait for them, so nobody hears "nothing left" while items are busy. The lock
    # re-reads a waited-for item, which is passed over if it filled up meanwhile.
    for skip_locked in (True, False):
        claim = claim_statement(ItemKind.REAL, by_category, shuffle, skip_locked)
        item = take_by(session, claim, values)
        if item is not None:
            return item
    return None
