"""Label accuracy for the QC benchmark: QC's labels against a control study without QC.

The control is the same crowd (same seed, same items) playing a copy of the study whose rules
are off (`"qc": {"rules": []}`), that serves no gold items and no attention checks (a gold
rate of 0, an attention rate of 0), and with no `crowd worker` running (and a Redis of its
own, so its unrun QC jobs reach no other study): nobody is stopped, so the bad workers answer
all their items, all of them real, as they would in a study without QC. Its labels are each
real item's first `redundancy` answers, everyone's. QC's are the answers of the workers QC
kept (excluded workers' answers asked for again). Both are compared on the items each labels
with `redundancy` answers (an item whose excluded workers' answers were not all asked again
before the crowd ran out of work is unfinished, not a QC label).

Until 2026-11-29 the control served gold and checks as the QC study does; with no QC refresh
its gold rate stayed a newcomer's (about 0.6) for the whole study, so few of its items reached
15 answers (19 to 27 compared in a comparison study), and one item's luck moved a cell by
0.04. Until 2026-11-28 the arm without QC was the QC study's own first answers: it held the bad
workers' answers only up to their stop (about 10 answers, mostly gold and checks), so it
measured little of what QC saves a study (benchmarks/RESULTS.md, ninth look).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select

from crowd.quality import labels
from crowd.storage import Database, Item, ItemKind, Response, StudyWorker
from crowd.studies.lifecycle import get_study
from qc.aggregation import label_accuracy


def control_config(config: dict[str, Any]) -> dict[str, Any]:
    """The study config of the control: the same, with every QC rule off and neither gold
    items nor attention checks served."""
    qc = config.get("qc", {})
    gold = {**qc.get("gold", {}), "min_rate": 0.0, "max_rate": 0.0}
    return {**config, "attention_rate": 0.0, "qc": {**qc, "rules": [], "gold": gold}}


def full_items(session: Any, study_id: int, redundancy: int) -> set[str]:
    """Real items with at least `redundancy` answers from workers QC kept."""
    excluded = select(StudyWorker.worker_id).where(
        StudyWorker.study_id == study_id, StudyWorker.excluded_by.is_not(None)
    )
    rows = session.execute(
        select(Item.external_id)
        .join(Response, Response.item_id == Item.id)
        .where(
            Item.study_id == study_id,
            Item.kind == ItemKind.REAL,
            Response.worker_id.not_in(excluded),
        )
        .group_by(Item.external_id)
        .having(func.count(Response.id) >= redundancy)
    )
    return {str(external_id) for (external_id,) in rows}


def study_labels(
    db: Database, study_id: int, redundancy: int, filtered: bool
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Every method's labels of the study (`filtered`: from the workers QC kept), and the
    real items with `redundancy` answers from them (`full_items`)."""
    with db.session() as session:
        study = get_study(session, study_id)
        labels.aggregate_study(session, study, filtered=filtered, methods=labels.METHODS)
        found = {m: data["labels"] for m, data in labels.stored(session, study_id).items()}
        return found, full_items(session, study_id, redundancy)


def first_answers_labels(
    db: Database, study_id: int, redundancy: int
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The control's `study_labels` from each real item's first `redundancy` answers (later
    ones are deleted: the control's database is the benchmark's own)."""
    with db.session() as session:
        ranked = (
            select(
                Response.id,
                func.row_number()
                .over(partition_by=Response.item_id, order_by=(Response.created_at, Response.id))
                .label("n"),
            )
            .join(Item, Item.id == Response.item_id)
            .where(Response.study_id == study_id, Item.kind == ItemKind.REAL)
            .subquery()
        )
        late = select(ranked.c.id).where(ranked.c.n > redundancy)
        session.execute(delete(Response).where(Response.id.in_(late)))
    return study_labels(db, study_id, redundancy, filtered=False)


def compare(
    kept: dict[str, dict[str, Any]],
    kept_full: set[str],
    control: dict[str, dict[str, Any]],
    control_full: set[str],
    truth: dict[str, Any],
) -> dict[str, dict[str, float | None]]:
    """Per method, the accuracy of the control's and of QC's labels against the truth, on
    the items (label keys are "item/question") both label with their full redundancy; and
    how many items that is."""
    both = kept_full & control_full

    def accuracy(got: dict[str, Any], method: str) -> float | None:
        return label_accuracy({t: v for t, v in got.items() if t in kept.get(method, {})
                               and t in control.get(method, {})
                               and t.rsplit("/", 1)[0] in both}, truth)  # fmt: skip

    return {
        "accuracy_all": {m: accuracy(got, m) for m, got in control.items()},
        "accuracy_filtered": {m: accuracy(got, m) for m, got in kept.items()},
        "labelled_items": len(both),
    }
