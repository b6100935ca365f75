"""Study lifecycle: create, import items, progress (crowd.platforms opens studies to workers)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from crowd.exceptions import InvalidItem, NotFound, StudyNotOpen, ValidationError
from crowd.storage import (
    Assignment,
    AssignmentState,
    Experimenter,
    Item,
    ItemKind,
    Response,
    ResponseSource,
    Study,
    StudyStatus,
    utcnow,
)
from crowd.studies.frame import StudyFrame
from tasks import ItemSpec, get_hit_type

MAX_ITEMS_PER_IMPORT = 100_000


def create_study(
    session: Session,
    experimenter: Experimenter,
    name: str,
    hit_type: str,
    config: Mapping[str, Any] | None = None,
) -> Study:
    hit = get_hit_type(hit_type)
    if not name.strip() or len(name) > 200:
        raise ValidationError("a study name is 1 to 200 characters", "name")
    options = hit.validate_config(config)
    study = Study(
        experimenter_id=experimenter.id,
        name=name.strip(),
        hit_type=hit.name,
        config=options.to_config(),
    )
    session.add(study)
    session.flush()
    return study


def studies_of(session: Session, experimenter: Experimenter, archived: bool = False) -> list[Study]:
    """An experimenter's studies, oldest first: the listed ones, or the archived ones."""
    shown = Study.archived_at.is_not(None) if archived else Study.archived_at.is_(None)
    return list(
        session.scalars(
            select(Study).where(Study.experimenter_id == experimenter.id, shown).order_by(Study.id)
        )
    )


def get_study(session: Session, study_id: int, experimenter: Experimenter | None = None) -> Study:
    """A study by id; with `experimenter`, only one of theirs."""
    study = session.get(Study, study_id)
    if study is None or (experimenter is not None and study.experimenter_id != experimenter.id):
        raise NotFound(f"no study {study_id}: list yours with GET /api/studies")
    return study


# What each change of state needs the study to be in, and the state it leaves it in.
CHANGES: dict[str, tuple[tuple[StudyStatus, ...], StudyStatus]] = {
    "pause": ((StudyStatus.PUBLISHED,), StudyStatus.PAUSED),
    "resume": ((StudyStatus.PAUSED,), StudyStatus.PUBLISHED),
    "close": (
        (StudyStatus.DRAFT, StudyStatus.PUBLISHED, StudyStatus.PAUSED),
        StudyStatus.COMPLETED,
    ),
}


def change_status(session: Session, study: Study, change: str) -> Study:
    """Pause (no new assignments; open ones may still be finished), resume, or close a study
    (for good: no new work, no new items). Doing it twice is harmless."""
    if change not in CHANGES:
        raise ValidationError(f"one of {sorted(CHANGES)}", "action")
    allowed, after = CHANGES[change]
    if study.status == after:
        return study
    if study.status not in allowed:
        raise StudyNotOpen(f"study {study.id} is {study.status}: it cannot {change}")
    study.status = after
    return study


# What may change once workers see a study: how it is judged and what its page says. The
# rest (the type's own settings, redundancy) shapes what was already served.
LIVE_SETTINGS = ("qc", "worker_page")


def update_config(session: Session, study: Study, config: Mapping[str, Any]) -> Study:
    """Replace a study's settings, checked by its HIT type (missing ones get defaults). A
    draft takes any change; a published or paused study only changes in LIVE_SETTINGS."""
    if study.status == StudyStatus.COMPLETED:
        raise StudyNotOpen(f"study {study.id} is closed: its settings stay as they were")
    checked = get_hit_type(study.hit_type).validate_config(config).to_config()
    if study.status != StudyStatus.DRAFT:
        for key in sorted(set(checked) | set(study.config)):
            if key not in LIVE_SETTINGS and checked.get(key) != study.config.get(key):
                raise ValidationError(
                    f"cannot change once the study is published (only {', '.join(LIVE_SETTINGS)} "
                    "can): create a new study for other settings",
                    key,
                )
    study.config = checked
    return study


def archive(session: Session, study: Study, archived: bool = True) -> Study:
    """Archive a study (closed first, so nothing is served from a study nobody watches) or
    bring it back to the lists."""
    if archived:
        if study.status != StudyStatus.COMPLETED:
            change_status(session, study, "close")
        if study.archived_at is None:
            study.archived_at = utcnow()
    else:
        study.archived_at = None
    return study


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def strict_json(text: str) -> Any:
    """A JSON text as Python, with NaN and Infinity refused (no JSON column stores them)."""
    return json.loads(text, parse_constant=_no_constant)


def parse_jsonl(
    lines: Iterable[str], source: str = "line", loads: Callable[[str], Any] = strict_json
) -> list[dict[str, Any]]:
    """Parse JSON lines, naming the line of the first bad one; blank lines are skipped.

    `loads` may check more (the web passes crowd.web.bodies.loads: depth, 64-bit integers,
    NUL, lone surrogates); whatever it refuses is named by its line.
    """
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = loads(line)
        except json.JSONDecodeError as error:
            raise InvalidItem(f"not valid JSON ({error.msg})", f"{source} {number}") from None
        except ValidationError as error:
            where = f"{source} {number}" + (f", {error.where}" if error.where else "")
            raise InvalidItem(error.message, where) from None
        except (ValueError, RecursionError) as error:
            # Integers beyond Python's digit limit, NaN, nesting past the recursion limit.
            message = "nested too deeply" if isinstance(error, RecursionError) else str(error)
            raise InvalidItem(f"not valid JSON ({message})", f"{source} {number}") from None
        if not isinstance(record, dict):
            raise InvalidItem("each line must be a JSON object", f"{source} {number}")
        records.append(record)
    return records


def line_position(index: int) -> str:
    """Where the index-th record of a JSON lines file is: "line 3"."""
    return f"line {index + 1}"


def json_position(index: int) -> str:
    """Where the index-th item of a JSON body's `items` is: "items[2]"."""
    return f"items[{index}]"


def import_items(
    session: Session,
    study: Study,
    records: list[dict[str, Any]],
    where: Callable[[int], str] = line_position,
) -> int:
    """Validate every record first, then add them all or none; returns how many were added.

    `where` names a record in errors (by its index), as its source numbers them."""
    if study.status == StudyStatus.COMPLETED:
        raise StudyNotOpen(f"study {study.id} is completed: create a new study for more items")
    if len(records) > MAX_ITEMS_PER_IMPORT:
        raise ValidationError(f"at most {MAX_ITEMS_PER_IMPORT} items per import: split the file")
    hit = get_hit_type(study.hit_type)
    specs = [hit.validate_item(record, where(n)) for n, record in enumerate(records)]
    specs = hit.plan_items(specs, hit.validate_config(study.config))
    seen: set[str] = set()
    for spec in specs:
        if spec.external_id in seen:
            raise InvalidItem(f"id {spec.external_id!r} appears twice in this import")
        seen.add(spec.external_id)
    existing = set(
        session.scalars(
            select(Item.external_id).where(Item.study_id == study.id, Item.external_id.in_(seen))
        )
    )
    if existing:
        raise InvalidItem(f"ids already in study {study.id}: {sorted(existing)[:10]}")
    session.add_all(_item(study, spec) for spec in specs)
    session.flush()
    return len(specs)


def _item(study: Study, spec: ItemSpec) -> Item:
    return Item(
        study_id=study.id,
        external_id=spec.external_id,
        kind=ItemKind(spec.kind),
        content=spec.content,
        expected=spec.expected,
        meta=spec.meta,
        category=spec.category,
        rank=spec.rank,
        target=spec.target,
    )


def progress(session: Session, study: Study, frame: StudyFrame | None = None) -> dict[str, Any]:
    """Counts an experimenter follows: items, assignments by state, responses, completeness.

    A report that read the study as columns (`frame`) counts the responses from them rather
    than scanning them again."""
    items_by_kind = dict(
        session.execute(
            select(Item.kind, func.count(Item.id))
            .where(Item.study_id == study.id)
            .group_by(Item.kind)
        ).all()
    )
    by_state = dict(
        session.execute(
            select(Assignment.state, func.count(Assignment.id))
            .where(Assignment.study_id == study.id)
            .group_by(Assignment.state)
        ).all()
    )
    target = int(study.config.get("annotations_per_item", 1))
    # Gold items are served at each worker's gold rate with no target: progress is the real
    # items'.
    counted = (ItemKind.REAL,)
    if frame is not None:
        n_responses, n_workers, complete_items = _frame_counts(frame, target)
    else:
        n_responses, n_workers, complete_items = _counts(session, study, target, counted)
    n_real = sum(n for kind, n in items_by_kind.items() if kind in counted)
    return {
        "study_id": study.id,
        "name": study.name,
        "hit_type": study.hit_type,
        "status": study.status,
        "providers": study.providers,
        "items": {str(k): v for k, v in items_by_kind.items()},
        "assignments": {str(k): v for k, v in by_state.items()},
        "responses": n_responses or 0,
        "workers": n_workers or 0,
        "annotations_per_item": target,
        "items_complete": complete_items or 0,
        "fraction_complete": round((complete_items or 0) / n_real, 4) if n_real else 0.0,
        "open_assignments": by_state.get(AssignmentState.ASSIGNED, 0),
    }


def _counts(
    session: Session, study: Study, target: int, counted: tuple[ItemKind, ...]
) -> tuple[int, int, int]:
    """(responses, workers, real items with their target of live answers), by SQL."""
    n_responses = session.scalar(
        select(func.count(Response.id)).where(Response.study_id == study.id)
    )
    n_workers = session.scalar(
        select(func.count(func.distinct(Response.worker_id))).where(Response.study_id == study.id)
    )
    done_per_item = (
        select(
            Response.item_id,
            func.count(Response.id).label("n"),
            func.coalesce(Item.target, target).label("target"),
        )
        .join(Item, Item.id == Response.item_id)
        .where(
            Response.study_id == study.id,
            Item.kind.in_(counted),
            Response.source == ResponseSource.LIVE,
        )
        .group_by(Response.item_id, Item.target)
        .subquery()
    )
    complete_items = session.scalar(
        select(func.count())
        .select_from(done_per_item)
        .where(done_per_item.c.n >= done_per_item.c.target)
    )
    return n_responses or 0, n_workers or 0, complete_items or 0


def _frame_counts(frame: StudyFrame, target: int) -> tuple[int, int, int]:
    """`_counts` from a study frame."""
    real = np.asarray([kind == ItemKind.REAL for kind in frame.item_kind], dtype=bool)
    live = np.isin(
        frame.source, [i for i, s in enumerate(frame.sources) if s == ResponseSource.LIVE]
    )
    per_item = np.bincount(frame.item[live], minlength=len(frame.item_ids))
    targets = np.asarray([target if t is None else t for t in frame.item_target], dtype=np.int64)
    complete = real & (per_item > 0) & (per_item >= targets)
    n_workers = int(np.count_nonzero(np.bincount(frame.worker))) if len(frame) else 0
    return len(frame), n_workers, int(complete.sum())
