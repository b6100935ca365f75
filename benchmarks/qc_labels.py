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

import statistics
from typing import Any

from sqlalchemy import delete, func, select

from crowd.quality import labels
from crowd.storage import Database, Item, ItemKind, Response, StudyWorker
from crowd.studies.lifecycle import get_study
from qc.aggregation import label_accuracy
from qc.rules import Action
from tasks import get_hit_type


def control_config(config: dict[str, Any]) -> dict[str, Any]:
    """The study config of the control: the same, with every QC rule off and neither gold
    items nor attention checks served."""
    qc = config.get("qc", {})
    gold = {**qc.get("gold", {}), "min_rate": 0.0, "max_rate": 0.0}
    return {**config, "attention_rate": 0.0, "qc": {**qc, "rules": [], "gold": gold}}


def flag_only_config(hit_type: str, config: dict[str, Any]) -> dict[str, Any]:
    """The study config with the type's default rules (as the study's QC settings make them)
    turned into flags: nobody is stopped, so every worker's whole record is there for
    `benchmarks/qc_policies.py` to replay rules on (`qc_bench.py --flag-only`)."""
    qc = get_hit_type(hit_type).validate_qc_config(config.get("qc"))
    rules = [{**rule, "action": Action.FLAG.value} for rule in qc["rules"]]
    return {**config, "qc": {**config.get("qc", {}), "rules": rules}}


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
) -> dict[str, Any]:
    """Per method, the accuracy of the control's and of QC's labels against the truth, on
    the labels (keys "item/question") of the items both label with their full redundancy; how
    many items that is; and per method the labels QC's made right that the control's had
    wrong and the other way round ("label_changes": [gained, lost]), so that a cell a point
    below shows whether that is one label in thirty."""
    both = kept_full & control_full

    def shared(method: str) -> list[str]:
        ours, theirs = kept.get(method, {}), control.get(method, {})
        return [t for t in ours if t in theirs and t in truth and t.rsplit("/", 1)[0] in both]

    on = {method: shared(method) for method in {*kept, *control}}
    changes: dict[str, list[int]] = {}
    for method in kept:
        right = [(kept[method][t] == truth[t], control[method][t] == truth[t])
                 for t in on[method]]  # fmt: skip
        changes[method] = [sum(k and not c for k, c in right), sum(c and not k for k, c in right)]
    return {
        "accuracy_all": {m: label_accuracy({t: got[t] for t in on[m]}, truth)
                         for m, got in control.items()},
        "accuracy_filtered": {m: label_accuracy({t: got[t] for t in on[m]}, truth)
                              for m, got in kept.items()},
        "label_changes": changes,
        "labels_compared": {m: len(on[m]) for m in kept},
        "labelled_items": len(both),
    }  # fmt: skip


def combine_labels(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The label figures of runs of one scenario (seeds): accuracies pooled over the labels
    compared (every label counts once, whichever run it is in: a run that compares 20 labels
    weighs less than one that compares 30, as in the summed changes), summed changes.

    Until 2026-11-29 the runs' accuracies were averaged, so two runs whose QC labels got one
    more label right and one fewer than the control's (+1 -1, equal in all) could read as a
    loss of a point: 0.884 -> 0.882 where both got 45 of 51. Runs written before the labels
    compared were counted are averaged as then; runs before the changes were counted have no
    changes.

    >>> runs = [{"accuracy_all": {"mv": 24 / 25}, "accuracy_filtered": {"mv": 22 / 25},
    ...          "labels_compared": {"mv": 25}, "label_changes": {"mv": [0, 2]}},
    ...         {"accuracy_all": {"mv": 21 / 26}, "accuracy_filtered": {"mv": 23 / 26},
    ...          "labels_compared": {"mv": 26}, "label_changes": {"mv": [2, 0]}}]
    >>> out = combine_labels(runs)
    >>> round(out["accuracy_all"]["mv"] * 51), round(out["accuracy_filtered"]["mv"] * 51)
    (45, 45)
    >>> out["label_changes"], out["labels_compared"]
    ({'mv': [2, 2]}, {'mv': 51})
    """
    out: dict[str, Any] = {}
    for key in ("accuracy_all", "accuracy_filtered"):
        methods = sorted({m for run in runs for m in run[key]})
        out[key] = {}
        for m in methods:
            found = [run for run in runs if run[key].get(m) is not None]
            if not found:
                continue
            weights = [run.get("labels_compared", {}).get(m) for run in found]
            if all(weights) and sum(weights):
                pooled = sum(run[key][m] * w for run, w in zip(found, weights, strict=True))
                out[key][m] = pooled / sum(weights)
            else:
                out[key][m] = statistics.mean(run[key][m] for run in found)
    counted = [run["label_changes"] for run in runs if "label_changes" in run]
    if len(counted) == len(runs):
        methods = sorted({m for changes in counted for m in changes})
        out["label_changes"] = {
            m: [sum(c.get(m, [0, 0])[i] for c in counted) for i in (0, 1)] for m in methods
        }
    sizes = [run["labels_compared"] for run in runs if "labels_compared" in run]
    if len(sizes) == len(runs):
        out["labels_compared"] = {m: sum(s.get(m, 0) for s in sizes) for m in sizes[0]}
    return out


METHOD_NAMES = {
    "majority_vote": "majority vote", "dawid_skene": "Dawid-Skene", "mace": "MACE",
    "ordinal_mean": "ordinal mean", "first_change": "first change",
    "bradley_terry": "Bradley-Terry",
}  # fmt: skip


def label_table(results: list[dict[str, Any]]) -> list[str]:
    """The label accuracy table of benchmarks/RESULTS.md's QC block."""
    lines = [
        "",
        "Accuracy of aggregated labels on real items against the truth, without QC (a "
        "control study: the same crowd, seed and items with every rule off and no gold or "
        "attention checks served, so nobody is stopped; a worker answers an item alike in both "
        "studies, `qc_crowd.py`'s draws being the worker's and the item's; each item's first "
        "answers up to the "
        "redundancy, everyone's) and after the arrow with QC (the answers of the workers QC "
        "kept, excluded workers' answers asked for again), at equal redundancy: on the items "
        "both label with that many answers (an item the crowd ran out of work before answering "
        "again is unfinished; the exclusions list below counts the items compared per row; "
        "`benchmarks/qc_labels.py`), pooled over the runs (each label compared counts "
        "once). In brackets, summed over the runs: labels QC's answers got right that the "
        "control's got wrong, and the other way round.",
        "",
        "| HIT type | mix | answers per item | " + " | ".join(METHOD_NAMES.values()) + " |",
        "|---|---|---|" + "---|" * len(METHOD_NAMES),
    ]
    for r in results:
        cells = []
        for method in METHOD_NAMES:
            full = r["accuracy_all"].get(method)
            kept = r["accuracy_filtered"].get(method)
            changes = r.get("label_changes", {}).get(method)
            moved = "" if changes is None else f" (+{changes[0]} −{changes[1]})"
            cells.append("-" if full is None else f"{full:.3f} → {_fmt3(kept)}{moved}")
        lines.append(f"| {r['hit_type']} | {r['mix']} | {r['redundancy']} | " + " | ".join(cells)
                     + " |")  # fmt: skip
    return lines


def _fmt3(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"
