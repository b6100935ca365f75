"""The experimenter's preview of a study's worker page: the worker's flow, storing nothing.

The page is the worker's own template and script; its calls go to the preview API, which
answers with the views the worker API would give (crowd.work.assignments.assignment_view),
computed by the same HIT type from the study's items. The flow's state lives in the
experimenter's signed session, not the database: a preview leaves no assignment, response,
outbox event or QC fact behind, and works on a draft study before anything is published.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from crowd.exceptions import InvalidAction, NoWorkLeft
from crowd.storage import Item, ItemKind, Study, utcnow
from tasks import get_hit_type

# Ids of the items already previewed, kept so that "next" walks through the study; capped so
# the session cookie stays small (the walk starts over after this many).
SEEN_KEPT = 40


def _next_item(session: Session, study: Study, seen: list[int]) -> Item | None:
    """The first item not yet previewed, in the order a worker meets them: training examples,
    then the rest by serving rank."""
    training_first = case((Item.kind == ItemKind.TRAINING, 0), else_=1)
    query = select(Item).where(Item.study_id == study.id).order_by(
        training_first, Item.rank, Item.id
    )  # fmt: skip
    if seen:
        query = query.where(Item.id.not_in(seen))
    return session.scalars(query.limit(1)).first()


def _view(study: Study, item: Item, state: Mapping[str, Any]) -> dict[str, Any]:
    hit = get_hit_type(study.hit_type)
    view: dict[str, Any] = {
        # The preview has one flow per study: the study's id stands for the assignment's.
        "assignment_id": study.id,
        "study_id": study.id,
        "preview": True,
        "item_kind": str(item.kind),
        "item_id": item.external_id,
        # "Item i of n" over the study's items, in the order the preview walks them.
        "item_number": state.get("number"),
        "items_total": state.get("total"),
    }
    answer = state.get("answer")
    if answer is None:
        view["state"] = "assigned"
        view["task"] = hit.view(item.content, state["progress"], study.config)
        return view
    view["state"] = "submitted"
    view["answered"] = True
    needs = not state.get("explained") and hit.needs_followup(answer, study.config)
    view["needs_followup"] = needs
    if needs:
        view["task"] = hit.view(item.content, state["progress"], study.config)
    else:
        view["feedback"] = hit.feedback(
            item.content, item.expected, answer, str(item.kind), study.config
        )
    return view


def _current(session: Session, study: Study, state: Mapping[str, Any]) -> Item:
    item = session.get(Item, state.get("item")) if state.get("item") is not None else None
    if item is None or item.study_id != study.id:
        raise InvalidAction("the preview has no item open: press Next or reload the page")
    return item


def next_view(
    session: Session, study: Study, state: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The open preview item's view, or the next item's once the open one is answered."""
    state = dict(state or {})
    if state.get("item") is not None and state.get("answer") is None:
        item = session.get(Item, state["item"])
        if item is not None and item.study_id == study.id:
            return _view(study, item, state), state
    seen = [int(i) for i in state.get("seen", [])][-SEEN_KEPT:]
    item = _next_item(session, study, seen)
    if item is None and seen:
        seen = []  # every item was previewed: start over
        item = _next_item(session, study, seen)
    if item is None:
        raise NoWorkLeft(f"study {study.id} has no items to preview yet: upload some first")
    first = get_hit_type(study.hit_type).start(item.content, utcnow(), study.config)
    total = session.scalar(select(func.count(Item.id)).where(Item.study_id == study.id))
    state = {
        "item": item.id,
        "progress": first.progress,
        "answer": None,
        "seen": [*seen, item.id],
        "number": len(seen) + 1,
        "total": total,
    }
    return _view(study, item, state), state


def step_view(
    session: Session, study: Study, state: Mapping[str, Any] | None, action: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Apply one worker action to the preview's item, as crowd.work.assignments.act does."""
    state = dict(state or {})
    item = _current(session, study, state)
    if state.get("answer") is not None:
        return _view(study, item, state), state
    hit = get_hit_type(study.hit_type)
    step = action.get("step")
    current = hit.current_step(state["progress"])
    if not isinstance(step, int) or isinstance(step, bool):
        raise InvalidAction("'step' must be the step the page shows (task.step)")
    if step < current:
        return _view(study, item, state), state
    if step > current:
        raise InvalidAction(f"step {step} is ahead of the preview (at step {current}): reload")
    fields = {key: value for key, value in action.items() if key != "sim_seconds"}
    result = hit.step(item.content, state["progress"], fields, utcnow(), study.config)
    state["progress"] = result.progress
    state["answer"] = result.answer
    return _view(study, item, state), state


def explain_view(
    session: Session, study: Study, state: Mapping[str, Any] | None, action: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check the explanation of the preview's answer, as the worker API would, and go on."""
    state = dict(state or {})
    item = _current(session, study, state)
    answer = state.get("answer")
    if answer is None:
        raise InvalidAction("answer first: the explanation follows the guess")
    get_hit_type(study.hit_type).followup(answer, action, study.config)
    state["explained"] = True
    return _view(study, item, state), state
