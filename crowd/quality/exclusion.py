"""Whose answers count in a study: the workers QC or a reviewer excluded and the blocked ones
are left out of its filtered set, and their real answers are asked for again."""

from __future__ import annotations

import functools
import json
from collections.abc import Collection

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from crowd.storage import (
    Item,
    ItemKind,
    Response,
    ResponseSource,
    ScaleTask,
    Study,
    StudyWorker,
    Worker,
    WorkerBlock,
    WorkerStatus,
)
from qc.config import QcConfig, parse_qc_config
from tasks import get_hit_type


def study_qc(study: Study) -> QcConfig:
    """The study's QC settings (a study created before QC settings existed gets defaults; one
    created before gold knew its chance level gets its HIT type's)."""
    raw = study.config.get("qc")
    hit = get_hit_type(study.hit_type)
    if not raw:
        raw = hit.validate_qc_config(None)
    gold = raw.get("gold")
    if isinstance(gold, dict) and "chance" not in gold:
        raw = {**raw, "gold": {**gold, "chance": hit.gold_chance}}
    return _parsed_qc(json.dumps(raw, sort_keys=True))


# Every answer reads its study's QC settings; parsing them (a dozen rules) cost more than the
# answer's SQL. Parsed settings are immutable (frozen dataclasses and tuples), so they are
# kept per process by their text; an edited study has another text.
@functools.lru_cache(maxsize=256)
def _parsed_qc(text: str) -> QcConfig:
    return parse_qc_config(json.loads(text))


def blocked_by(session: Session, experimenter_id: int, worker_id: int) -> bool:
    """Whether the experimenter blocked the worker (from all of their studies)."""
    return (
        session.scalar(
            select(WorkerBlock.id).where(
                WorkerBlock.experimenter_id == experimenter_id, WorkerBlock.worker_id == worker_id
            )
        )
        is not None
    )


def blocked_in_study(session: Session, study: Study) -> set[int]:
    """Ids of the study's workers blocked by its experimenter or platform-wide."""
    answered = select(Response.worker_id).where(Response.study_id == study.id)
    by_experimenter = session.scalars(
        select(WorkerBlock.worker_id).where(
            WorkerBlock.experimenter_id == study.experimenter_id,
            WorkerBlock.worker_id.in_(answered),
        )
    ).all()
    platform_wide = session.scalars(
        select(Worker.id).where(Worker.status == WorkerStatus.BLOCKED, Worker.id.in_(answered))
    ).all()
    return {*by_experimenter, *platform_wide}


def left_out_workers(session: Session, study: Study) -> set[int]:
    """Workers whose answers do not count: excluded by QC or a reviewer, or blocked."""
    excluded: set[int] = set().union(*excluded_by(session, study.id).values())
    return excluded | blocked_in_study(session, study)


def excluded_by(session: Session, study_id: int) -> dict[str, set[int]]:
    """Worker ids left out of the study's filtered set, by who left them out."""
    out: dict[str, set[int]] = {}
    for worker_id, reason in session.execute(  # excluded_by IS NOT NULL below
        select(StudyWorker.worker_id, StudyWorker.excluded_by).where(
            StudyWorker.study_id == study_id, StudyWorker.excluded_by.is_not(None)
        )
    ).all():
        out.setdefault(_rule_name(str(reason)), set()).add(worker_id)
    return out


def _rule_name(excluded_by: str) -> str:
    """'rule:attention_failed' -> 'attention_failed'; people's exclusions group as 'reviewer'."""
    kind, _, name = excluded_by.partition(":")
    return name if kind == "rule" else "reviewer"


def replace_excluded(session: Session, study: Study, worker_ids: Collection[int]) -> int:
    """Ask again for the real answers these workers gave live, where they are left out of
    the study's data (excluded or blocked): each such item's target rises by the answers of
    left-out workers it has not been raised for yet (`Item.replaced`), so every item still
    gets its target of answers that count, and an exclusion judged again, lifted and made
    again, raises it once. Off with the study's qc.crowd.replace_excluded. Returns the
    number of items whose target rose.
    """
    if not worker_ids or not study_qc(study).crowd.replace_excluded:
        return 0
    everyone_left_out = left_out_workers(session, study)
    left_out = everyone_left_out & set(worker_ids)
    if not left_out:
        return 0
    answered = (
        select(Response.item_id)
        .join(Item, Item.id == Response.item_id)
        .where(
            Response.study_id == study.id,
            Response.worker_id.in_(sorted(left_out)),
            Response.source == ResponseSource.LIVE,
            Item.kind == ItemKind.REAL,
            # A Scale task's item is reopened by its own completion (crowd.scale.completion),
            # which counts the answers that do not count against the task's target.
            Item.id.not_in(select(ScaleTask.item_id)),
        )
    )
    counts = session.execute(
        select(Response.item_id, func.count(func.distinct(Response.worker_id)))
        .where(
            Response.item_id.in_(answered),
            Response.worker_id.in_(sorted(everyone_left_out)),
            Response.source == ResponseSource.LIVE,
        )
        .group_by(Response.item_id)
    ).all()
    default = int(study.config.get("annotations_per_item", 1))
    raised = 0
    for item_id, n in counts:
        # Atomic in SQL, and only while the count is ahead of what was asked for already:
        # two refreshes judging the same exclusion raise the target once.
        done = session.execute(
            update(Item)
            .where(Item.id == item_id, Item.replaced < n)
            .values(target=func.coalesce(Item.target, default) + n - Item.replaced, replaced=n)
            .execution_options(synchronize_session=False)
        )
        raised += done.rowcount  # type: ignore[attr-defined]
    return raised
