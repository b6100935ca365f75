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

from collections.abc import Iterable, Mapping
from typing import Any

from qc.anomalies import WorkerSignals
from qc.config import QcConfig
from qc.gold import GoldConfidence, gold_rate
from qc.rules import IMPORTED

LIVE = "live"


def worker_evidence(
    rows: Iterable[Mapping[str, Any]], config: QcConfig
) -> dict[str, dict[str, Any]]:
    """Per worker: anomaly metrics, attention and gold figures, and the evidence lists.

    Keys: the metrics of `WorkerSignals`, plus attention_checks, attention_failed, gold_n,
    gold_accuracy (mean raw accuracy; None without gold), gold_mean (posterior mean; the
    prior's without gold), gold_below_prob (P(accuracy < config.gold.threshold); None
    without gold), gold_rate (the chance the next item is gold), "evidence" (signal ->
    entries, for display), "source" ("live" if any row is live, else "imported"; what
    `live_only` rules look at) and "rater_groups" (the sorted groups of the worker's rows).
    Workers with only training rows appear with 0 responses.

    >>> from qc.config import parse_qc_config
    >>> rows = [{"worker": "a", "item": "g1", "kind": "gold", "gold_accuracy": 0.0},
    ...         {"worker": "a", "item": "t1", "kind": "attention", "attention_passed": False}]
    >>> out = worker_evidence(rows, parse_qc_config(None))["a"]
    >>> out["gold_n"], out["gold_accuracy"], out["gold_below_prob"], out["attention_failed"]
    (1, 0.0, 0.75, 1)
    """
    rows = list(rows)
    signals = WorkerSignals(config.anomalies).fit(rows)
    policy = config.gold

    gold_results: list[tuple[str, float]] = []
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
            gold_results.append((worker, row["gold_accuracy"]))
        elif row["kind"] == "attention":
            checks[worker] = checks.get(worker, 0) + 1
            if row.get("attention_passed") is False:
                failed[worker] = failed.get(worker, 0) + 1
    gold = GoldConfidence(prior=policy.prior).fit(gold_results)
    gold_sum: dict[str, float] = {}
    for worker, accuracy in gold_results:
        gold_sum[worker] = gold_sum.get(worker, 0.0) + accuracy

    out: dict[str, dict[str, Any]] = {}
    for worker in sorted(signals.metrics_):
        n_gold = gold.n_.get(worker, 0)
        alpha, beta = gold.posterior(worker)
        out[worker] = {
            **signals.metrics_[worker],
            "attention_checks": checks.get(worker, 0),
            "attention_failed": failed.get(worker, 0),
            "gold_n": n_gold,
            "gold_accuracy": gold_sum[worker] / n_gold if n_gold else None,
            "gold_mean": gold.mean(worker),
            "gold_below_prob": gold.prob_below(worker, policy.threshold) if n_gold else None,
            "gold_rate": gold_rate(alpha, beta, policy),
            "evidence": signals.signals_[worker],
            "source": LIVE if worker in live else IMPORTED,
            "rater_groups": sorted(groups.get(worker, ())),
        }
    return out
