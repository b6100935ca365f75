"""Everything QC knows about each worker, as one flat dict of numbers for `qc.rules`.

Input is "QC rows", one dict per stored response, in time order (the caller sorts them):

    {"response_id": int, "worker": str, "item": str,
     "kind": "real" | "gold" | "attention" | "training",
     "seconds": float | None,          # item shown -> answer, server clock
     "chars_shown": int,               # characters the worker had to read
     "surface": str | None,            # the answer as the page showed it, e.g. "sentence 3"
     "attention_passed": bool | None,  # attention items only
     "gold_accuracy": float | None,    # gold items only, in [0, 1]
     "explanation": str | None,
     "typing": {"keys", "pastes", "pasted_chars", "typing_ms"} | None,
     "source": "live" | "imported",    # optional, "live" when absent
     "rater_group": str | None}        # optional, e.g. "crowd", "mturk", "expert"

Imported answers give the same rows: no typing report, and seconds only where the import
had them.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping
from typing import Any

from qc.agreement import CrowdAgreement
from qc.anomalies import WorkerSignals, normalize_explanation
from qc.attention import doubt_check_rate, fail_prob
from qc.collusion import Collusion
from qc.config import QcConfig
from qc.drift import Verdict
from qc.gold import GoldConfidence, gold_rate
from qc.rules import IMPORTED

LIVE = "live"


def worker_evidence(
    rows: Iterable[Mapping[str, Any]],
    config: QcConfig,
    crowd: Mapping[str, Mapping[str, Any]] | None = None,
    gold: GoldConfidence | None = None,
) -> dict[str, dict[str, Any]]:
    """Per worker: anomaly metrics, attention and gold figures, and the evidence lists.

    Keys: the metrics of `WorkerSignals`, plus attention_checks, attention_failed,
    attention_fail_prob (P(failure rate > qc.attention.SLIP_RATE); None without checks), gold_n,
    gold_accuracy (mean raw accuracy; None without gold), gold_weight (the gold answers' worth
    in full tests: hard items count less, see qc.gold), gold_mean (posterior mean, unweighed;
    the prior's without gold), gold_below_prob (P(accuracy < config.gold.threshold), items
    weighed by difficulty unless config.gold.by_difficulty is false; None without gold),
    gold_doubt (gold_below_prob, 1 without gold), gold_rate (the chance the next item is
    gold), "evidence" (signal -> the latest entries, for display), "evidence_counts"
    (signal -> entries found), "source" ("live" if any row is live, else "imported"; what
    `live_only` rules look at) and
    "rater_groups" (the sorted groups of the worker's rows). Workers with only training
    rows appear with 0 responses. `crowd` (worker -> the metrics of `crowd_evidence`) adds
    each worker's agreement with the crowd and collusion. `gold`, a fitted model, gives the
    gold figures instead of the rows' gold (crowd.quality pools gold over a HIT type's
    studies); None fits one from the rows.

    >>> from qc.config import parse_qc_config
    >>> rows = [{"worker": "a", "item": "g1", "kind": "gold", "gold_accuracy": 0.0},
    ...         {"worker": "a", "item": "t1", "kind": "attention", "attention_passed": False}]
    >>> out = worker_evidence(rows, parse_qc_config(None))["a"]
    >>> out["gold_n"], out["gold_accuracy"], out["gold_below_prob"], out["attention_failed"]
    (1, 0.0, 0.75, 1)
    >>> out["gold_doubt"], worker_evidence(rows[1:], parse_qc_config(None))["a"]["gold_doubt"]
    (0.75, 1.0)
    """
    rows = list(rows)
    signals = WorkerSignals(config.anomalies).fit(rows)
    policy = config.gold

    gold_results: list[tuple[str, str, float]] = []
    checks: dict[str, int] = {}
    failed: dict[str, int] = {}
    live: set[str] = set()
    groups: dict[str, set[str]] = {}
    for row in rows:
        worker = str(row["worker"])
        if row.get("source", LIVE) == LIVE:
            live.add(worker)
        if row.get("rater_group") is not None:
            groups.setdefault(worker, set()).add(str(row["rater_group"]))
        if row["kind"] == "gold" and row.get("gold_accuracy") is not None:
            if gold is None:  # a fitted `gold` passed in needs the rows' gold no more
                gold_results.append((worker, str(row["item"]), row["gold_accuracy"]))
        elif row["kind"] == "attention":
            checks[worker] = checks.get(worker, 0) + 1
            if row.get("attention_passed") is False:
                failed[worker] = failed.get(worker, 0) + 1
    if gold is None:
        gold = GoldConfidence(prior=policy.prior, chance=policy.chance)
        if policy.by_difficulty:
            gold.fit_items(gold_results)
        else:
            gold.fit((worker, accuracy) for worker, _, accuracy in gold_results)

    out: dict[str, dict[str, Any]] = {}
    for worker in sorted(signals.metrics_):
        n_gold = gold.n_.get(worker, 0)
        alpha, beta = gold.posterior(worker)
        out[worker] = {
            **signals.metrics_[worker],
            "attention_checks": checks.get(worker, 0),
            "attention_failed": failed.get(worker, 0),
            "attention_fail_prob": fail_prob(failed.get(worker, 0), checks.get(worker, 0)),
            "gold_n": n_gold,
            # The raw mean: each answer added its accuracy to alpha.
            "gold_accuracy": (alpha - policy.prior[0]) / n_gold if n_gold else None,
            "gold_weight": round(gold.weight(worker), 4),
            "gold_mean": gold.mean(worker),
            "gold_below_prob": gold.prob_below(worker, policy.threshold) if n_gold else None,
            # The same, 1 without gold: what the crowd rules read to know that gold does not
            # vouch for the worker (qc.config.CrowdPolicy.gold_vouch).
            "gold_doubt": gold.prob_below(worker, policy.threshold) if n_gold else 1.0,
            "evidence": signals.signals_[worker],
            "evidence_counts": signals.counts_[worker],
            "source": LIVE if worker in live else IMPORTED,
            "rater_groups": sorted(groups.get(worker, ())),
            **NO_CROWD,
            **(crowd or {}).get(worker, {}),
        }
        out[worker]["gold_rate"] = gold_rate(alpha, beta, policy, crowd_doubt(out[worker]))
    return out


def crowd_doubt(evidence: Mapping[str, Any]) -> float | None:
    """How much the crowd doubts a worker, for the gold rate: the largest of P(accuracy below
    the crowd's threshold) over the whole record and over the recent window and P(not
    reading now) (qc.drift), so a worker who stops reading meets more gold, each a full test,
    while the evidence gathers (None before any comparison).

    >>> crowd_doubt({"agreement_n": 9, "agreement_below_prob": 0.1, "recent_below_prob": 0.6})
    0.6
    >>> crowd_doubt({"agreement_n": 9, "agreement_below_prob": 0.1, "stopped_reading_prob": 0.8})
    0.8
    >>> crowd_doubt({"agreement_n": 0, "stopped_reading_prob": 0.3}) is None  # checks only
    True
    """
    if not evidence.get("agreement_n"):
        # Attention checks alone are no comparison with the crowd: until one, the gold rate
        # follows the worker's gold (a passed check must not lower it).
        return None
    found = [
        float(evidence[key])
        for key in ("agreement_below_prob", "recent_below_prob", "stopped_reading_prob")
        if evidence.get(key) is not None
    ]
    return max(found) if found else None


# A worker's crowd metrics before any task of theirs has enough other answers.
NO_CROWD: dict[str, Any] = {
    "agreement_n": 0, "agreement_real_n": 0, "agreement_items": 0, "agreement": None,
    "agreement_chance": None, "agreement_threshold": None,
    "agreement_below_prob": None, "recent_agreement": None, "recent_below_prob": None,
    "collusion_partners": 0, "collusion_group": [], "collusion_pairs": [],
    "stopped_reading_prob": None, "stopped_reading_n": 0, "stopped_reading_since": None,
    "check_rate": 0.0,
}  # fmt: skip


def crowd_evidence(
    answers: Iterable[tuple[str, str, Hashable]],
    config: QcConfig,
    *,
    ordinal: bool = False,
    explanations: Mapping[tuple[str, str], str] | None = None,
    truth: Mapping[str, Hashable] | None = None,
    focus: Collection[str] | None = None,
    checks: Iterable[tuple[int, str, bool]] = (),
    ordinal_questions: Collection[str] = (),
) -> dict[str, dict[str, Any]]:
    """Per worker: agreement with the crowd (whole record and recent window) and collusion.

    `answers` are (task, worker, label) in answer-time order, a task being "item/question";
    `truth` gives the known answers (gold items, attention checks); `explanations` map
    (task, worker) to the worker's explanation there; `ordinal`: the labels are points on a
    scale, and one step off the truth counts as right. Collusion reports the pairs with a
    worker of `focus` and tests those workers against groups (None: everyone). `checks`
    are the attention checks as (how many of `answers` came before it, worker, passed), in
    order. `ordinal_questions`: where
    `ordinal` is False, the questions whose labels are points on a scale all the same (a
    form's ratings), which collusion reads as offsets from the consensus.
    Keys: agreement_n (tasks judged), agreement_real_n (those of real items, whose truth the
    crowd settles, not `truth`), agreement_items (the items they are of), agreement (the
    estimated accuracy against the crowd's posterior of the truth), agreement_chance (a random
    answer's), agreement_threshold (chance + margin * (crowd - chance)), agreement_below_prob
    (P(accuracy < threshold)), recent_agreement and recent_below_prob (the same over the last
    `window` tasks), collusion_partners (how many), collusion_group (the sorted group the worker
    is in) and collusion_pairs (the evidence of each pair), stopped_reading_prob (P(not reading
    now) from answers and checks together, with one possible switch: qc.drift),
    stopped_reading_n (the events it rests on) and stopped_reading_since (the events before the
    most probable switch; None while most probably reading) and check_rate (the chance of an
    extra attention check next while that posterior doubts them: qc.attention.doubt_check_rate);
    the last four for `focus` and the groups they are in only (None and 0 for the others).

    >>> from qc.config import parse_qc_config
    >>> answers = [(f"i{i}/best", w, i % 4) for i in range(12) for w in "abcde"]
    >>> answers += [(f"i{i}/best", w, (i + 1 + i % 2) % 4) for i in range(12) for w in "xy"]
    >>> out = crowd_evidence(answers, parse_qc_config(None))
    >>> out["a"]["agreement_below_prob"] < 0.01, out["x"]["agreement_below_prob"] > 0.99
    (True, True)
    >>> out["x"]["collusion_group"], out["a"]["collusion_partners"]
    (['x', 'y'], 0)
    """
    answers = list(answers)
    policy = config.crowd
    agreement = CrowdAgreement(
        tolerance=1 if ordinal else 0, min_others=policy.min_others, window=policy.window,
        margin=policy.margin, real_difficulty=policy.real_difficulty,
    ).fit(answers, truth)  # fmt: skip
    normalized = {key: normalize_explanation(text) for key, text in (explanations or {}).items()}
    shortest = config.anomalies.min_explanation_chars
    texts = {key: text for key, text in normalized.items() if len(text) >= shortest}
    collusion = Collusion(
        ordinal=ordinal, min_shared=policy.collusion_min_shared,
        alpha=policy.collusion_alpha, ordinal_questions=frozenset(ordinal_questions),
    ).fit(answers, texts, agreement.skill_, focus, agreement.consensus_, truth)  # fmt: skip
    group_of = {worker: group for group in collusion.groups_ for worker in group}
    pairs_of: dict[str, list[dict[str, Any]]] = {}
    for pair in collusion.pairs_:
        for worker in pair["workers"]:
            pairs_of.setdefault(worker, []).append(pair)
    for found in collusion.group_tests_:
        # One worker against a group: "workers" names the worker first, then the group.
        entry = {"workers": [found["worker"], *found["group"]],
                 **{k: v for k, v in found.items() if k not in ("worker", "group")}}  # fmt: skip
        pairs_of.setdefault(found["worker"], []).append(entry)
    checks_of: dict[str, list[tuple[int, bool]]] = {}
    for at, worker, passed in checks:
        checks_of.setdefault(str(worker), []).append((at, bool(passed)))
    # The stopped-reading posterior is the costly one: only for the workers being refreshed
    # (`focus` and the groups they are in), not the whole study on every answer.
    judged = None if focus is None else {*focus, *(w for f in focus for w in group_of.get(f, []))}
    out: dict[str, dict[str, Any]] = {}
    for worker in sorted({str(w) for _, w, _ in answers} | set(checks_of)):
        metrics = dict(NO_CROWD)
        verdict = (
            agreement.stopped_reading(worker, checks_of.get(worker, []))
            if judged is None or worker in judged
            else Verdict(0.0, None, 0)
        )
        if verdict.events:
            metrics.update(
                stopped_reading_prob=round(verdict.prob, 4),
                stopped_reading_n=verdict.events,
                stopped_reading_since=verdict.since,
                check_rate=doubt_check_rate(
                    verdict.prob, policy.doubt_checks, verdict.checks_since
                ),
            )
        n = agreement.n_.get(worker, 0)
        if n:
            threshold = agreement.threshold(worker)
            recent_mean, _ = agreement.recent(worker)
            metrics.update(
                agreement_n=n,
                agreement_real_n=agreement.real_n_[worker],
                agreement_items=agreement.items_[worker],
                agreement=round(agreement.agreement_[worker], 4),
                agreement_chance=round(agreement.chance_[worker], 4),
                agreement_threshold=round(threshold, 4),
                agreement_below_prob=round(agreement.prob_below(worker, threshold), 4),
                recent_agreement=None if recent_mean is None else round(recent_mean, 4),
                recent_below_prob=round(agreement.prob_below(worker, threshold, recent=True), 4),
            )
        partners = collusion.partners_.get(worker, [])
        metrics.update(
            collusion_partners=len(partners),
            collusion_group=group_of.get(worker, []),
            collusion_pairs=pairs_of.get(worker, []),
        )
        out[worker] = metrics
    return out
