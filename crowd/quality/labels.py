"""Aggregated labels per study (majority vote, Dawid-Skene, MACE, Bradley-Terry) and gold
promoted from the agreement of trusted workers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.quality.exclusion import left_out_workers, study_qc
from crowd.quality.standing import SYSTEM, audit
from crowd.storage import (
    AggregatedLabels,
    Item,
    ItemKind,
    Response,
    Study,
    StudyWorker,
    Worker,
    utcnow,
)
from qc.aggregation import Aggregation, aggregate, bradley_terry_best, label_accuracy
from qc.coded import Coded
from qc.gold import promote_gold
from tasks import HitType, get_hit_type

METHODS = (
    "majority_vote", "dawid_skene", "mace", "ordinal_mean", "first_change", "bradley_terry",
)  # fmt: skip
# Reports refresh after every batch of answers: MACE (seconds per fit, whatever the size)
# runs on request only (`crowd qc aggregate`, POST /api/studies/{id}/aggregations).
REPORT_METHODS = ("majority_vote", "dawid_skene", "ordinal_mean", "first_change", "bradley_terry")


def _answers(session: Session, study: Study, filtered: bool) -> list[tuple[Item, str, Any, str]]:
    """(item, worker key, answer, rater group) of the answers to real and gold items, live
    and imported: every rater group counts (`answer_groups` names them)."""
    left_out: set[int] = set()
    if filtered:
        left_out = left_out_workers(session, study)
    result = session.execute(
        select(Item, Worker, Response.answer, Response.rater_group)
        .join(Item, Item.id == Response.item_id)
        .join(Worker, Worker.id == Response.worker_id)
        .where(
            Response.study_id == study.id,
            Item.kind.in_((ItemKind.REAL, ItemKind.GOLD)),
        )
        .order_by(Response.id)
    ).all()
    return [
        (item, f"{worker.provider}:{worker.external_id}", answer, group)
        for item, worker, answer, group in result
        if worker.id not in left_out
    ]


def aggregate_study(
    session: Session,
    study: Study,
    filtered: bool = True,
    methods: tuple[str, ...] = METHODS,
) -> dict[str, Any]:
    """Aggregate the study's labels (see compute_aggregations) and store them."""
    summary, results = compute_aggregations(session, study, filtered, methods)
    store_aggregations(session, study.id, results)
    return summary


def compute_aggregations(
    session: Session,
    study: Study,
    filtered: bool = True,
    methods: tuple[str, ...] = METHODS,
    frame: Any = None,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Aggregate the study's labels by every method that fits its HIT type, and store them.

    Tasks are (item, question) pairs, e.g. "story-3/fluency"; on gold items the aggregated
    labels are scored against the gold answers. A type that aggregates per question (a form,
    whose fields differ in kind) fits each method to each question on its own
    (`aggregate_per_question`); its stored result adds `skills_by_question` and the
    `question_errors` of questions the method could not fit. Every rater group's answers
    count, live and imported (`answer_groups` names them). Returns a summary per method.
    """
    hit = get_hit_type(study.hit_type)
    summary: dict[str, Any] = {}
    stored: dict[str, dict[str, Any]] = {}
    results: dict[str, Aggregation] = {}
    per_question: dict[str, PerQuestion] = {}
    wanted = [m for m in hit.aggregation_methods if m in methods]
    coded = _frame_answers(session, study, hit, frame, filtered) if frame is not None else None
    if coded is not None:
        answers_coded, truth, question = coded
        if answers_coded.n == 0:
            return summary, stored
        for method in wanted:
            if hit.label_applies(method, question, study.config):
                try:
                    results[method] = aggregate(method, answers_coded)
                except ValueError as error:
                    summary[method] = {"error": str(error)}
    else:
        from_rows = _fit_rows(session, study, hit, filtered, wanted, summary, results, per_question)
        if from_rows is None:
            return summary, stored
        truth = from_rows
    majority = results.get("majority_vote")
    for method, result in results.items():
        data = result.to_json()
        data["gold_accuracy"] = label_accuracy(result.labels, truth)
        data["agreement_with_majority_vote"] = (
            label_accuracy(result.labels, majority.labels) if majority is not None else None
        )
        data["filtered"] = filtered
        stored[method] = data
        summary[method] = {
            "n_tasks": data["n_tasks"],
            "n_workers": data["n_workers"],
            "gold_accuracy": data["gold_accuracy"],
            "agreement_with_majority_vote": data["agreement_with_majority_vote"],
        }
        if method in per_question:
            fitted = per_question[method]
            data["skills_by_question"] = {
                question: {str(worker): float(s) for worker, s in part.skills.items()}
                for question, part in fitted.parts.items()
            }
            data["question_errors"] = summary[method]["question_errors"] = fitted.errors
    return summary, stored


def _fit_rows(
    session: Session,
    study: Study,
    hit: HitType,
    filtered: bool,
    wanted: list[str],
    summary: dict[str, Any],
    results: dict[str, Aggregation],
    per_question: dict[str, PerQuestion],
) -> dict[str, Hashable] | None:
    """Fit the methods to the answers read as rows (into `results`, errors into `summary`);
    the gold truth by task, or None when there are no answers."""
    answers = _answers(session, study, filtered)
    labelled = [
        (item.external_id, key, worker, label)
        for item, worker, answer, _ in answers
        for key, label in hit.answer_labels(answer).items()
    ]
    truth: dict[str, Hashable] = {
        f"{item.external_id}/{key}": label
        for item, _, _, _ in answers
        if item.kind == ItemKind.GOLD
        for key, label in hit.expected_labels(item.expected).items()
    }
    if not labelled:
        return None
    for method in (m for m in wanted if m != "bradley_terry"):
        if hit.aggregate_per_question:
            fitted = aggregate_per_question(hit, method, labelled, study.config)
            if fitted.aggregation is not None:
                results[method], per_question[method] = fitted.aggregation, fitted
            elif fitted.errors:  # no question could be fitted
                reasons = (f"{question}: {error}" for question, error in fitted.errors.items())
                summary[method] = {"error": "; ".join(reasons)}
            continue
        triples = method_triples(hit, method, labelled, study.config)
        if not triples:  # no question of the study fits the method
            continue
        try:
            results[method] = aggregate(method, triples)
        except ValueError as error:  # e.g. too little data for the model
            summary[method] = {"error": str(error)}
    if "bradley_terry" in wanted:  # best-of-K choices, not per-task labels
        choices = [
            (item.external_id, worker, len(item.content["candidates"]), int(answer["best"]))
            for item, worker, answer, _ in answers
        ]
        bt = bradley_terry_best(choices)
        # Same task keys as the categorical methods, so they compare one to one.
        results["bradley_terry"] = replace(
            bt,
            labels={f"{item}/best": label for item, label in bt.labels.items()},
            confidence={f"{item}/best": value for item, value in bt.confidence.items()},
        )
    return truth


def _frame_answers(
    session: Session, study: Study, hit: HitType, frame: Any, filtered: bool
) -> tuple[Coded, dict[str, Hashable], str] | None:
    """The answers to real and gold items in a study frame (crowd.studies.frame), coded for
    the aggregators, with the gold truth by task and the question; None where the type's
    answers are not one label each in a frame field (then they are read as rows)."""
    single = hit.single_label
    if single is None or hit.aggregate_per_question or single[0] not in frame.answer:
        return None
    if "bradley_terry" in hit.aggregation_methods:  # choices among candidates, not labels
        return None
    field, question = single
    keep = _counted(session, study, frame, filtered)
    tasks = [f"{item_id}/{question}" for item_id in frame.item_ids]
    coded = Coded.from_codes(
        frame.item[keep], tasks, frame.worker[keep], frame.workers, frame.answer[field][keep]
    )
    answered = np.zeros(len(frame.item_ids), dtype=bool)
    answered[frame.item[keep]] = True
    truth: dict[str, Hashable] = {
        f"{frame.item_ids[i]}/{key}": label
        for i in np.flatnonzero(answered)
        if frame.item_kind[i] == ItemKind.GOLD
        for key, label in hit.expected_labels(frame.item_expected[i]).items()
    }
    return coded, truth, question


@dataclass(frozen=True)
class PerQuestion:
    """One method fitted to each question on its own (a form's fields), and merged."""

    aggregation: Aggregation | None  # every question's labels; None: no question fitted
    parts: dict[str, Aggregation]  # question -> its own fit
    errors: dict[str, str]  # question -> why the method could not fit it


def aggregate_per_question(
    hit: HitType,
    method: str,
    labelled: list[tuple[str, str, str, Hashable]],
    config: Mapping[str, Any],
) -> PerQuestion:
    """Fit `method` to each question's labels separately, so questions share neither classes
    (a rating of 1 and a rank's top index 1) nor worker confusion.

    The merged labels and confidence hold every fitted question's tasks; a worker's skill is
    the mean of their per-question skills weighted by how many of their labels each question
    holds. A question the method cannot fit (too little data) is named in `errors` and the
    others are still given.
    """
    by_question: dict[str, list[tuple[str, str, str, Hashable]]] = {}
    for row in labelled:  # grouped by the question itself: a field id may contain "/"
        by_question.setdefault(row[1], []).append(row)
    parts: dict[str, Aggregation] = {}
    errors: dict[str, str] = {}
    weights: dict[str, dict[str, int]] = {}
    for question, rows in by_question.items():
        triples = method_triples(hit, method, rows, config)
        if not triples:  # the method does not fit this question (ordinal_mean, a category)
            continue
        try:
            parts[question] = aggregate(method, triples)
        except ValueError as error:
            errors[question] = str(error)
            continue
        weights[question] = Counter(worker for _, worker, _ in triples)
    if not parts:
        return PerQuestion(None, parts, errors)
    skill_sum: dict[str, float] = {}
    label_count: dict[str, int] = {}
    for question, part in parts.items():
        for worker, skill in part.skills.items():
            n = weights[question][worker]
            skill_sum[worker] = skill_sum.get(worker, 0.0) + float(skill) * n
            label_count[worker] = label_count.get(worker, 0) + n
    merged = Aggregation(
        method,
        {task: label for part in parts.values() for task, label in part.labels.items()},
        {task: p for part in parts.values() for task, p in part.confidence.items()},
        {worker: skill_sum[worker] / label_count[worker] for worker in skill_sum},
    )
    return PerQuestion(merged, parts, errors)


def method_triples(
    hit: HitType,
    method: str,
    labelled: list[tuple[str, str, str, Hashable]],
    config: Mapping[str, Any],
) -> list[tuple[str, str, Hashable]]:
    """The (task, worker, label) triples `method` aggregates, of (item, question, worker,
    label) answers: the questions the HIT type says the method applies to."""
    applies: dict[str, bool] = {}
    triples = []
    for item, question, worker, label in labelled:
        if question not in applies:
            applies[question] = hit.label_applies(method, question, config)
        if applies[question]:
            triples.append((f"{item}/{question}", worker, label))
    return triples


def answer_groups(
    session: Session, study: Study, filtered: bool = True, frame: Any = None
) -> list[str]:
    """The rater groups whose answers the aggregations use (of the filtered set by default),
    from the study frame where the report read one."""
    if frame is None:
        return sorted({group for _, _, _, group in _answers(session, study, filtered)})
    keep = _counted(session, study, frame, filtered)
    return sorted({str(frame.rater_groups[int(g)]) for g in np.unique(frame.rater_group[keep])})


def _counted(session: Session, study: Study, frame: Any, filtered: bool) -> np.ndarray:
    """Which of a frame's responses the aggregations count: real and gold items, and with
    `filtered` only of the workers who were not left out."""
    kinds = np.asarray([kind in (ItemKind.REAL, ItemKind.GOLD) for kind in frame.item_kind])
    keep: np.ndarray = kinds[frame.item] if len(frame) else np.zeros(0, dtype=bool)
    if filtered:
        left_out = np.asarray(sorted(left_out_workers(session, study)), dtype=np.int64)
        keep &= ~np.isin(frame.worker_db_id[frame.worker], left_out)
    return keep


def store_aggregations(session: Session, study_id: int, results: dict[str, dict[str, Any]]) -> None:
    for method, data in results.items():
        _store(session, study_id, method, data)


def _store(session: Session, study_id: int, method: str, data: dict[str, Any]) -> None:
    row = session.scalar(
        select(AggregatedLabels).where(
            AggregatedLabels.study_id == study_id, AggregatedLabels.method == method
        )
    )
    if row is None:
        row = AggregatedLabels(study_id=study_id, method=method)
        session.add(row)
    row.data = data
    row.computed_at = utcnow()


def stored(session: Session, study_id: int) -> dict[str, Any]:
    """The study's stored aggregations by method."""
    return {
        row.method: {**row.data, "computed_at": row.computed_at.isoformat()}
        for row in session.scalars(
            select(AggregatedLabels).where(AggregatedLabels.study_id == study_id)
        ).all()
    }


def trusted_workers(session: Session, study: Study) -> set[str]:
    """Workers whose gold posterior mean reached the study's `trusted` level on enough gold."""
    policy = study_qc(study).gold
    result = session.execute(
        select(StudyWorker, Worker)
        .join(Worker, Worker.id == StudyWorker.worker_id)
        .where(StudyWorker.study_id == study.id, StudyWorker.excluded_by.is_(None))
    ).all()
    trusted = set()
    for row, worker in result:
        evidence = row.evidence or {}
        if (evidence.get("gold_n") or 0) >= policy.min_gold and (
            evidence.get("gold_mean") or 0
        ) >= policy.trusted:
            trusted.add(f"{worker.provider}:{worker.external_id}")
    return trusted


def promote(
    session: Session,
    study: Study,
    actor: str = SYSTEM,
    min_agreeing: int = 3,
    min_share: float = 1.0,
    dry_run: bool = False,
) -> dict[str, dict[str, Any]]:
    """Make real items gold where enough trusted workers gave the same answer.

    Their agreed answer becomes the item's expected answer; earlier answers to the item are
    scored against it. Returns the promoted items with their expected answers.
    """
    if min_agreeing < 1 or not 0 < min_share <= 1:
        raise ValueError("min_agreeing is 1 or more and min_share in (0, 1]")
    hit = get_hit_type(study.hit_type)
    trusted = trusted_workers(session, study)
    answers: list[tuple[str, str, Hashable]] = [
        (item.external_id, worker, tuple(sorted(hit.answer_labels(answer).items())))
        for item, worker, answer, _ in _answers(session, study, filtered=True)
        if item.kind == ItemKind.REAL
    ]
    agreed = promote_gold(answers, trusted, min_agreeing=min_agreeing, min_share=min_share)
    promoted: dict[str, dict[str, Any]] = {}
    for external_id, label in sorted(agreed.items()):
        expected = hit.expected_from_labels(dict(cast(tuple[tuple[str, Hashable], ...], label)))
        promoted[external_id] = expected
        if dry_run:
            continue
        item = session.scalar(
            select(Item).where(Item.study_id == study.id, Item.external_id == external_id)
        )
        if item is None:
            continue
        item.kind = ItemKind.GOLD
        item.expected = expected
        item.meta = {**item.meta, "promoted_gold": {"trusted_workers": len(trusted)}}
        # The gold tally serving orders by (qc.gold.easy_first) counts these answers from the
        # next QC refresh (crowd.quality.tally), with the readers' weights of the moment.
        for response in session.scalars(select(Response).where(Response.item_id == item.id)):
            accuracy = hit.gold_accuracy(expected, response.answer)
            response.qc_flags = {**response.qc_flags, "gold_accuracy": accuracy}
        audit(session, actor, "promote_gold", f"{min_agreeing}+ trusted workers agree",
              study_id=study.id, details={"item": external_id, "expected": expected})  # fmt: skip
    return promoted
