"""Quality control wired to storage: QC facts on each response, the worker's standing in a
study, gold serving, the qualification gate, and rules that act (every action audited).

Imported answers (crowd.studies.annotations, crowd.ml.llm_eval) get the same facts, evidence
and rules as live ones: their raters have a standing in the study, and the rules' exclusions
leave them out of the filtered set the same way (a rule with `live_only` spares them).

The algorithms are in `qc/` (pure); this module reads and writes the database around them.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any

from sqlalchemy import Select, case, insert, null, select, true
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from crowd.exceptions import InvalidAction
from crowd.quality.exclusion import replace_excluded, study_qc
from crowd.quality.tally import retally_gold
from crowd.storage import (
    Assignment,
    AuditEntry,
    Item,
    ItemKind,
    Qualification,
    Response,
    Serving,
    Study,
    StudyWorker,
)
from qc.anomalies import response_signals
from qc.config import QcConfig
from qc.evidence import crowd_evidence, worker_evidence
from qc.gold import GoldConfidence, gold_rate
from qc.rules import Action, evaluate
from tasks import HitType, get_hit_type

SYSTEM = "system"
# Unpredictable to workers: which item is gold must not follow from anything they can see.
_GOLD_RANDOM = random.SystemRandom()
_PHASE_RANDOM = random.SystemRandom()
# What the page may report about typing in a free-text field, and the largest values kept.
TYPING_FIELDS = {"keys": 100_000, "pastes": 1_000, "pasted_chars": 100_000, "typing_ms": 86_400_000}


def audit(
    session: Session,
    actor: str,
    action: str,
    reason: str = "",
    *,
    study_id: int | None = None,
    worker_id: int | None = None,
    details: Mapping[str, Any] | None = None,
) -> AuditEntry:
    entry = AuditEntry(
        actor=actor,
        action=action,
        reason=reason,
        study_id=study_id,
        worker_id=worker_id,
        details=dict(details or {}),
    )
    session.add(entry)
    return entry


def standing(session: Session, study_id: int, worker_id: int) -> StudyWorker:
    """The worker's QC standing in the study, locked for update, created on first use.

    The lock keeps a rule's job and a reviewer's decision from overwriting each other on
    PostgreSQL (SQLite serializes every write transaction anyway).
    """
    return standings(session, study_id, [worker_id])[worker_id]


def standings(
    session: Session, study_id: int, worker_ids: Collection[int]
) -> dict[int, StudyWorker]:
    """The workers' QC standings in the study (by worker id), as `standing` gives one."""
    ids = sorted(set(worker_ids))
    query = (
        select(StudyWorker)
        .where(StudyWorker.study_id == study_id, StudyWorker.worker_id.in_(ids))
        .order_by(StudyWorker.worker_id)
        .with_for_update()
    )
    found = {row.worker_id: row for row in session.scalars(query)}
    missing = [worker_id for worker_id in ids if worker_id not in found]
    if not missing:
        return found
    # One statement for all (an import's raters are new to the study together).
    try:
        with session.begin_nested():
            session.execute(insert(StudyWorker), [_new_standing(study_id, w) for w in missing])
    except IntegrityError:  # some were created by a concurrent request: create the others
        for worker_id in missing:
            try:
                with session.begin_nested():
                    session.execute(insert(StudyWorker), [_new_standing(study_id, worker_id)])
            except IntegrityError:
                pass
    found = {row.worker_id: row for row in session.scalars(query)}
    for worker_id in missing:
        if worker_id not in found:
            raise RuntimeError(f"no QC standing for worker {worker_id} in study {study_id}")
    return found


def _new_standing(study_id: int, worker_id: int) -> dict[str, Any]:
    return {
        "study_id": study_id,
        "worker_id": worker_id,
        "attention_phase": _PHASE_RANDOM.random(),
    }


# -- facts recorded with each response --------------------------------------------------------
def response_facts(
    hit: HitType,
    item: Item,
    answer: Mapping[str, Any],
    seconds: float | None,
    config: QcConfig,
) -> dict[str, Any]:
    """The QC facts of an answer: time taken, text shown, gold accuracy, signals.

    `seconds` is None for an imported answer whose file did not say how long it took.
    """
    flags: dict[str, Any] = {
        "seconds": None if seconds is None else round(seconds, 3),
        "chars_shown": hit.chars_shown(item.content, answer),
        "surface": hit.surface(answer),
    }
    if item.kind == ItemKind.ATTENTION:
        flags["attention_passed"] = hit.passed_attention(item.expected, answer)
    if item.kind in (ItemKind.GOLD, ItemKind.TRAINING):
        flags["gold_accuracy"] = hit.gold_accuracy(item.expected, answer)
    row = _qc_row(0, "", item.external_id, str(item.kind), flags, None)
    flags["signals"] = response_signals(row, config.anomalies)
    return flags


def typing_report(raw: Any) -> dict[str, int] | None:
    """The page's report on how an explanation was entered, checked field by field."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - set(TYPING_FIELDS):
        raise InvalidAction(f"'typing' must be an object with the fields {sorted(TYPING_FIELDS)}")
    report: dict[str, int] = {}
    for name, limit in TYPING_FIELDS.items():
        value = raw.get(name, 0)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
            raise InvalidAction(f"'typing.{name}' must be a whole number from 0 to {limit}")
        report[name] = value
    return report


def explanation_facts(
    flags: Mapping[str, Any],
    explanation: str | None,
    typing: dict[str, int] | None,
    config: QcConfig,
) -> dict[str, Any]:
    """The response's QC facts once its explanation arrives (paste and typing signals)."""
    updated = {**flags, "typing": typing}
    row = _qc_row(0, "", "", "real", updated, explanation)
    updated["signals"] = response_signals(row, config.anomalies)
    return updated


def _qc_row(
    response_id: int,
    worker: str,
    item: str,
    kind: str,
    flags: Mapping[str, Any],
    explanation: str | None,
) -> dict[str, Any]:
    return {
        "response_id": response_id,
        "worker": worker,
        "item": item,
        "kind": kind,
        "seconds": flags.get("seconds"),
        "chars_shown": int(flags.get("chars_shown") or 0),
        "surface": flags.get("surface"),
        "attention_passed": flags.get("attention_passed"),
        "gold_accuracy": flags.get("gold_accuracy"),
        "explanation": explanation,
        "typing": flags.get("typing"),
    }


def qc_rows(
    session: Session, study: Study, worker_ids: Collection[int] | None = None
) -> list[dict[str, Any]]:
    """The study's responses, live and imported, as QC rows (qc/) in time order; only those
    of `worker_ids` when given.

    An imported response stored without QC facts (before imports had them, or by the LLM
    rater) gets them here from its item, so its rater is judged like everyone else.
    """
    # Columns, not entities: a large import's rows are read without each item's content; the
    # answer only where the facts are missing (decoding every answer's JSON cost more than
    # the rest of the read).
    query = (
        select(
            Response.id,
            Response.worker_id,
            Response.qc_flags,
            Response.explanation,
            Response.source,
            Response.rater_group,
            Response.item_id,
            Item.external_id,
            Item.kind,
        )  # fmt: skip
        .join(Item, Item.id == Response.item_id)
        .where(Response.study_id == study.id)
        .order_by(Response.created_at, Response.id)
    )
    # Of the workers asked for, or of everyone.
    whose = true() if worker_ids is None else Response.worker_id.in_(sorted(set(worker_ids)))
    found_rows = session.execute(query.where(whose)).all()
    missing = {found.id for found in found_rows if "chars_shown" not in (found.qc_flags or {})}
    facts: dict[int, dict[str, Any]] = {}
    if missing:
        hit, config = get_hit_type(study.hit_type), study_qc(study)
        items = {
            item.id: item for item in session.scalars(select(Item).where(Item.study_id == study.id))
        }
        # The same responses again with their answers (not by id: an import's can be many
        # more than a statement takes parameters).
        for response_id, item_id, answer in session.execute(
            select(Response.id, Response.item_id, Response.answer).where(
                Response.study_id == study.id, whose
            )
        ):
            if response_id in missing:
                facts[response_id] = response_facts(hit, items[item_id], answer, None, config)
    rows = []
    for found in found_rows:
        flags = found.qc_flags or {}
        if found.id in facts:
            flags = {**facts[found.id], **flags}
        row = _qc_row(
            found.id, str(found.worker_id), found.external_id, str(found.kind), flags,
            found.explanation,
        )  # fmt: skip
        row["source"] = str(found.source)
        row["rater_group"] = found.rater_group
        rows.append(row)
    return rows


# -- gold confidence and serving --------------------------------------------------------------
def gold_results(session: Session, worker_id: int, study: Study) -> list[float]:
    """The worker's gold accuracies over the experimenter's studies of the study's HIT type.

    One confidence per HIT type, pooled over studies; never over other experimenters'
    studies, whose gold (right or wrong) is theirs to judge by. Live and imported answers
    alike: a worker is one or the other (imported raters have their own providers).
    """
    return gold_results_of(session, [worker_id], study).get(worker_id, [])


def gold_results_of(
    session: Session, worker_ids: Collection[int], study: Study
) -> dict[int, list[float]]:
    """`gold_results` of several workers (by worker id; none for a worker without gold)."""
    out: dict[int, list[float]] = {}
    for worker_id, _, accuracy in _gold_answers(session, study, workers=worker_ids):
        out.setdefault(worker_id, []).append(accuracy)
    return out


def _gold_answers(
    session: Session,
    study: Study,
    *,
    workers: Collection[int] | None = None,
    studies: Select[int] | None = None,
) -> list[tuple[int, int, float]]:
    """Scored gold answers (worker id, item id, accuracy) in the experimenter's studies of
    the study's HIT type, of `workers` or in `studies`, in answer order."""
    query = (
        select(Response.worker_id, Response.item_id, Response.qc_flags)
        .join(Item, Item.id == Response.item_id)
        .join(Study, Study.id == Response.study_id)
        .where(
            Study.hit_type == study.hit_type,
            Study.experimenter_id == study.experimenter_id,
            Item.kind == ItemKind.GOLD,
        )
        .order_by(Response.id)
    )
    if workers is not None:
        query = query.where(Response.worker_id.in_(sorted(set(workers))))
    if studies is not None:
        query = query.where(Response.study_id.in_(studies))
    return [
        (worker_id, item_id, float(flags["gold_accuracy"]))
        for worker_id, item_id, flags in session.execute(query).all()
        if flags.get("gold_accuracy") is not None
    ]


def pooled_gold(
    session: Session, worker_ids: Collection[int], study: Study, config: QcConfig
) -> GoldConfidence:
    """The gold confidence of `worker_ids` (keyed by worker id as text), pooled over the
    experimenter's studies of the HIT type.

    With config.gold.by_difficulty, each answer is weighed by how much of a reader's skill
    its item shows (qc.gold.GoldConfidence.fit_items), read off every gold answer in the
    studies where these workers met gold: an item's difficulty needs its other readers, and
    "hard" means hard against the rest of the gold they met.
    """
    model = GoldConfidence(prior=config.gold.prior, chance=config.gold.chance)
    if not config.gold.by_difficulty:
        found = _gold_answers(session, study, workers=worker_ids)
        return model.fit((str(worker), accuracy) for worker, _, accuracy in found)
    # The studies where these workers met gold, as a subquery of the answers' query.
    met = (
        select(Response.study_id)
        .join(Item, Item.id == Response.item_id)
        .where(Response.worker_id.in_(sorted(set(worker_ids))), Item.kind == ItemKind.GOLD)
        .distinct()
    )
    found = _gold_answers(session, study, studies=met)
    return model.fit_items((str(worker), item, accuracy) for worker, item, accuracy in found)


def gold_confidence(results: list[float], config: QcConfig) -> GoldConfidence:
    return GoldConfidence(prior=config.gold.prior).fit(("w", a) for a in results)


def gold_due(session: Session, study: Study, row: StudyWorker) -> bool:
    """Whether the worker's next item is a gold item, drawn at the worker's adaptive gold
    rate (crowd.work.assignments serves one unseen, of the category chosen or of none, so
    gold never stands out by topic; a real item when none is left).

    The rate is the one the worker's last QC refresh computed (pooled over the HIT type's
    studies), or before the first refresh one computed here from the pooled gold record and
    kept in the evidence until that refresh replaces it (a query and a fit saved on every
    item until then).
    """
    rate = (row.evidence or {}).get("gold_rate")
    if rate is None:
        config = study_qc(study)
        fitted = gold_confidence(gold_results(session, row.worker_id, study), config)
        alpha = fitted.alpha_.get("w", config.gold.prior[0])
        beta = fitted.beta_.get("w", config.gold.prior[1])
        rate = gold_rate(alpha, beta, config.gold)
        row.evidence = {**(row.evidence or {}), "gold_rate": rate}
    return _GOLD_RANDOM.random() < float(rate)


# -- the qualification gate --------------------------------------------------------------------
def qualification_due(session: Session, study: Study, row: StudyWorker) -> Qualification | None:
    """Decide the worker's qualification once they went through every training item.

    Training items the worker returned or abandoned count as wrong. Returns the standing's
    qualification (None while training is under way or the study has no gate).
    """
    config = study_qc(study)
    if config.qualification is None or row.qualification is not None:
        return row.qualification
    training = session.scalars(
        select(Item.id).where(Item.study_id == study.id, Item.kind == ItemKind.TRAINING)
    ).all()
    if not training:
        return None
    taken = session.execute(
        select(Assignment.item_id, Response.qc_flags)
        .outerjoin(Response, Response.assignment_id == Assignment.id)
        .where(Assignment.worker_id == row.worker_id, Assignment.item_id.in_(training))
    ).all()
    if len(taken) < len(training):
        return None
    accuracy = sum(float((flags or {}).get("gold_accuracy") or 0.0) for _, flags in taken) / len(
        training
    )
    passed = accuracy >= config.qualification.min_accuracy
    row.qualification = Qualification.PASSED if passed else Qualification.FAILED
    if not passed:
        row.serving = Serving.STOPPED
    audit(
        session,
        SYSTEM,
        "qualification_passed" if passed else "qualification_failed",
        f"training accuracy {accuracy:.2f} against the minimum "
        f"{config.qualification.min_accuracy:.2f}",
        study_id=study.id,
        worker_id=row.worker_id,
        details={"accuracy": round(accuracy, 4), "training_items": len(training)},
    )
    return row.qualification


# -- evidence and rules ------------------------------------------------------------------------
def refresh_standing(session: Session, study: Study, worker_id: int) -> StudyWorker:
    """Recompute the worker's evidence in the study and let the rules act on it.

    Safe to run twice: an action already taken is not taken (or audited) again, and rules a
    person overruled for this worker only record what they find.
    """
    return refresh_standings(session, study, [worker_id])[worker_id]


def refresh_standings(
    session: Session, study: Study, worker_ids: Collection[int]
) -> dict[int, StudyWorker]:
    """`refresh_standing` for several workers (an import's raters, a whole study) in one
    pass: their answers, gold and standings are read in one query each, not one per worker.
    """
    config = study_qc(study)
    crowd = crowd_metrics(session, study, config, worker_ids)
    # A pair of colluders is judged together: the partner found now is refreshed too.
    partners = {
        int(p) for w in worker_ids for p in crowd.get(str(w), {}).get("collusion_group", [])
    }
    rows = standings(session, study.id, {*worker_ids, *partners})
    # Gold pooled over the experimenter's studies of the HIT type, not the study's alone.
    gold = pooled_gold(session, rows.keys(), study, config)
    evidence_of = worker_evidence(qc_rows(session, study, rows.keys()), config, crowd, gold)
    if config.gold.shared_order and config.gold.easy_first:
        retally_gold(session, study, crowd)
    for worker_id, row in rows.items():
        evidence = evidence_of.get(str(worker_id))
        if evidence is not None:
            _judge(session, study, row, evidence, config)
    return rows


def crowd_metrics(
    session: Session, study: Study, config: QcConfig, focus: Collection[int] | None = None
) -> dict[str, dict[str, Any]]:
    """Every worker's agreement with the crowd in the study, and the collusion pairs of the
    `focus` workers (qc.evidence.crowd_evidence), by worker id as text.

    Real items count, and gold items with their answer as the truth, live and imported
    answers alike, in answer-time order. Attention checks do not: they ask for an answer
    that anyone who reads gives, so they measure attention (their own rule), not skill, and
    a worker who guesses at everything else but obeys the checks would have them counted
    as right answers to the task; they join the stopped-reading posterior as checks, in
    their place among the answers. Training is practice.
    """
    return crowd_metrics_of(study, config, crowd_rows(session, study), focus)


def crowd_rows(session: Session, study: Study) -> list[Any]:
    """The study's answers `crowd_metrics` reads, in answer-time order: (response id, worker
    id, item, item kind, the truth of gold and attention items, answer, explanation)."""
    kinds = (ItemKind.REAL, ItemKind.GOLD, ItemKind.ATTENTION)
    return list(
        session.execute(
            select(
                Response.id,
                Response.worker_id,
                Item.external_id,
                Item.kind,
                # Only gold and attention items' truth is read: a real item's expected answer
                # (the study's most) would be decoded from JSON for nothing.
                case((Item.kind != ItemKind.REAL, Item.expected), else_=null()),
                Response.answer,
                Response.explanation,
            )  # fmt: skip
            .join(Item, Item.id == Response.item_id)
            .where(Response.study_id == study.id, Item.kind.in_(kinds))
            .order_by(Response.created_at, Response.id)
        ).all()
    )


def crowd_metrics_of(
    study: Study, config: QcConfig, found: Sequence[Any], focus: Collection[int] | None = None
) -> dict[str, dict[str, Any]]:
    """`crowd_metrics` over `found`, rows of `crowd_rows` (all of them, or the first few: the
    QC benchmark's replay judges a study as it stood after each answer)."""
    hit = get_hit_type(study.hit_type)
    answers: list[tuple[str, str, Hashable]] = []
    explanations: dict[tuple[str, str], str] = {}
    truth: dict[str, Hashable] = {}
    checks: list[tuple[int, str, bool]] = []
    for _, worker_id, item, kind, expected, answer, explanation in found:
        if kind == ItemKind.ATTENTION:
            passed = hit.passed_attention(expected or {}, answer)
            checks.append((len(answers), str(worker_id), passed))
            continue
        if kind != ItemKind.REAL:
            wanted = hit.expected_labels(expected)
            truth.update((f"{item}/{question}", label) for question, label in wanted.items())
        for question, label in hit.answer_labels(answer).items():
            task = f"{item}/{question}"
            answers.append((task, str(worker_id), label))
            if explanation:
                explanations[(task, str(worker_id))] = explanation
    questions = {task.rsplit("/", 1)[-1] for task, _, _ in answers}
    return crowd_evidence(
        answers, config, ordinal=hit.ordinal_labels, explanations=explanations,
        truth=truth, focus=None if focus is None else [str(w) for w in focus], checks=checks,
        ordinal_questions=scale_questions(hit, study.config, questions),
    )  # fmt: skip


def scale_questions(hit: HitType, config: Mapping[str, Any], questions: set[str]) -> set[str]:
    """Of `questions`, those whose labels are points on a scale in a type whose other
    questions are categories: a form's rating fields (the questions ordinal_mean
    aggregates). Collusion reads raters' habits there as offsets, as on a rating type."""
    if "ordinal_mean" not in hit.aggregation_methods:
        return set()
    return {q for q in questions if hit.label_applies("ordinal_mean", q, config)}


def _judge(
    session: Session,
    study: Study,
    row: StudyWorker,
    evidence: dict[str, Any],
    config: QcConfig,
) -> None:
    """Store the worker's evidence and let the rules act on it."""
    worker_id = row.worker_id
    was_excluded = row.excluded_by is not None
    decisions = evaluate({str(worker_id): evidence}, config.rules)
    row.evidence = _jsonable(evidence)
    row.rule_hits = [decision.rule for decision in decisions]
    for decision in decisions:
        if decision.rule in (row.cleared_rules or []):
            continue  # a person overruled this rule for this worker
        actor = f"rule:{decision.rule}"
        # What the rule saw, and how many of the worker's answers it rests on (the queue
        # may be behind: answers stored since are not among them).
        details = {"evidence": _jsonable(dict(decision.evidence)),
                   "answers_read": evidence.get("responses")}  # fmt: skip
        if decision.action == Action.FLAG:
            if decision.rule not in row.flags:
                row.flags = [*row.flags, decision.rule]
                audit(session, actor, "flag", decision.reason, study_id=study.id,
                      worker_id=worker_id, details=details)  # fmt: skip
            continue
        stopped = row.serving == Serving.STOPPED
        if not stopped:
            row.serving = Serving.STOPPED
        if decision.action == Action.SOFT_BLOCK and row.excluded_by is None:
            row.excluded_by = actor
            audit(session, actor, "soft_block", decision.reason, study_id=study.id,
                  worker_id=worker_id, details=details)  # fmt: skip
        elif not stopped:
            audit(session, actor, "stop", decision.reason, study_id=study.id,
                  worker_id=worker_id, details=details)  # fmt: skip
    if row.excluded_by is not None and not was_excluded:
        replace_excluded(session, study, [worker_id])


# A study's workers are refreshed this many at a time (a bound on the IN lists' parameters).
WORKERS_PER_PASS = 500


def refresh_study(session: Session, study: Study) -> int:
    """Refresh the standing of every worker with responses in the study, imported included."""
    workers = session.scalars(
        select(Response.worker_id).where(Response.study_id == study.id).distinct()
    ).all()
    ids = sorted(workers)
    for start in range(0, len(ids), WORKERS_PER_PASS):
        refresh_standings(session, study, ids[start : start + WORKERS_PER_PASS])
    return len(ids)


def _jsonable(value: Any) -> Any:
    """Numbers as plain floats/ints, containers as dicts/lists (numpy and sets excluded)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)
