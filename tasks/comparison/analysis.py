"""Pure analysis of best-of-K comparison labels: agreement, model win rates, per-worker QC.

The agreement table follows Ziegler et al. (2019), "Fine-tuning language models from human
preferences", table 2: the chance rate (1/K), the share of agreeing label pairs between two
crowd workers on the same item, between an expert and a worker, and between two experts.

Rows are the type's analysis rows (see ComparisonHit.analysis_row). Only real and gold items
count in the statistics; training and attention labels are summarised on their own.
Expert labels are the responses whose rater group is an expert group (imported labels), plus
the experimenter's own `best` on each gold item.

Confidence intervals:
- agreement rates: a cluster bootstrap over items (percentile, 95%). The pairs of one item
  share its labels (with 5 labels, 10 pairs come from 5 answers), so pairs are not independent
  and a binomial interval over pairs would be too narrow; resampling whole items keeps each
  item's pairs together. With fewer than two items there is nothing to resample: no interval.
- win rates: a Clopper-Pearson ("exact") interval from scipy.stats.binomtest over items, which
  are independent given the policies.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from qc.attention import attention_summary
from qc.filtering import full_and_filtered

Row = Mapping[str, Any]

CROWD = "crowd"
EXPERIMENTER = "experimenter"
DEFAULT_EXPERT_GROUPS = ("expert",)
SCORED_KINDS = frozenset({"real", "gold"})
KINDS = SCORED_KINDS | {"attention", "training"}
CI_LEVEL = 0.95
N_RESAMPLES = 2000
SEED = 20190918  # fixed, so a report shows the same intervals every time it is rebuilt
_DIGITS = 4
_REQUIRED = ("response_id", "worker", "item", "kind", "candidates", "best")


def _num(value: float | np.floating[Any] | None) -> float | None:
    """Round for JSON; NaN and infinities become None so the output never carries NaN."""
    if value is None:
        return None
    number = float(value)
    return round(number, _DIGITS) if math.isfinite(number) else None


def _check_rows(rows: Iterable[Row]) -> None:
    for index, row in enumerate(rows):
        missing = [key for key in _REQUIRED if key not in row]
        if missing:
            raise ValueError(
                f"row {index} (response {row.get('response_id')!r}) lacks {', '.join(missing)}; "
                f"every row needs {', '.join(_REQUIRED)}"
            )
        if row["kind"] not in KINDS:
            raise ValueError(
                f"row {index} (response {row['response_id']!r}) has kind {row['kind']!r}; "
                f"use one of {', '.join(sorted(KINDS))}"
            )
        if not 0 <= int(row["best"]) < len(row["candidates"]):
            raise ValueError(
                f"row {index} (response {row['response_id']!r}) has best {row['best']!r} outside "
                f"0..{len(row['candidates']) - 1}: best is a canonical 0-based candidate index"
            )


@dataclass
class ItemLabels:
    """The labels of one item: crowd workers' and experts' (rater, canonical best)."""

    k: int
    policies: list[Any]
    crowd: list[tuple[str, int]] = field(default_factory=list)
    experts: list[tuple[str, int]] = field(default_factory=list)


def group_items(rows: Sequence[Row], expert_groups: Iterable[str]) -> dict[str, ItemLabels]:
    """Labels of the real and gold rows by item; other rater groups (e.g. an LLM) are left out."""
    experts = set(expert_groups)
    items: dict[str, ItemLabels] = {}
    for row in rows:
        if row["kind"] not in SCORED_KINDS:
            continue
        item = str(row["item"])
        labels = items.get(item)
        if labels is None:
            texts = list(row["candidates"])
            policies = list(row.get("policies") or [None] * len(texts))
            labels = items[item] = ItemLabels(k=len(texts), policies=policies)
            if row["kind"] == "gold" and row.get("expected_best") is not None:
                labels.experts.append((EXPERIMENTER, int(row["expected_best"])))
        group = str(row.get("rater_group") or CROWD)
        if group == CROWD:
            labels.crowd.append((str(row["worker"]), int(row["best"])))
        elif group in experts:
            labels.experts.append((str(row["worker"]), int(row["best"])))
    return items


def _pairs_within(labels: Sequence[tuple[str, int]]) -> tuple[int, int]:
    """(agreeing pairs, pairs) among labels of distinct raters."""
    agree = pairs = 0
    for i, (rater_a, best_a) in enumerate(labels):
        for rater_b, best_b in labels[i + 1 :]:
            if rater_a != rater_b:
                pairs += 1
                agree += best_a == best_b
    return agree, pairs


def _pairs_between(
    left: Sequence[tuple[str, int]], right: Sequence[tuple[str, int]]
) -> tuple[int, int]:
    agree = pairs = 0
    for rater_a, best_a in left:
        for rater_b, best_b in right:
            if rater_a != rater_b:
                pairs += 1
                agree += best_a == best_b
    return agree, pairs


def cluster_bootstrap_ci(
    agree: Sequence[int], pairs: Sequence[int], seed: int = SEED
) -> tuple[float | None, float | None]:
    """95% percentile interval of sum(agree)/sum(pairs), resampling whole items."""
    kept = [(a, p) for a, p in zip(agree, pairs, strict=True) if p > 0]
    if len(kept) < 2:
        return None, None
    agree_arr = np.array([a for a, _ in kept], dtype=float)
    pairs_arr = np.array([p for _, p in kept], dtype=float)

    def ratio(a: np.ndarray, p: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(a.sum(axis=axis) / p.sum(axis=axis))

    result = stats.bootstrap(
        (agree_arr, pairs_arr),
        ratio,
        paired=True,
        vectorized=True,
        n_resamples=N_RESAMPLES,
        confidence_level=CI_LEVEL,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _agreement(per_item: Sequence[tuple[int, int, int]]) -> dict[str, Any]:
    """Rate, chance, counts and CI from (agreeing pairs, pairs, K) per item."""
    used = [(a, p, k) for a, p, k in per_item if p > 0]
    n_pairs = sum(p for _, p, _ in used)
    n_agree = sum(a for a, _, _ in used)
    low, high = cluster_bootstrap_ci([a for a, _, _ in used], [p for _, p, _ in used])
    return {
        "rate": _num(n_agree / n_pairs) if n_pairs else None,
        "ci_low": _num(low),
        "ci_high": _num(high),
        # Chance for these very pairs: two uniform pickers agree with probability 1/K.
        "chance": _num(sum(p / k for _, p, k in used) / n_pairs) if n_pairs else None,
        "n_items": len(used),
        "n_pairs": n_pairs,
        "n_agree": n_agree,
    }


def agreement_table(items: Mapping[str, ItemLabels]) -> dict[str, Any]:
    """Chance, worker-worker, expert-worker and expert-expert agreement, as in the paper."""
    worker: list[tuple[int, int, int]] = []
    expert_worker: list[tuple[int, int, int]] = []
    expert: list[tuple[int, int, int]] = []
    for labels in items.values():
        worker.append((*_pairs_within(labels.crowd), labels.k))
        expert_worker.append((*_pairs_between(labels.crowd, labels.experts), labels.k))
        expert.append((*_pairs_within(labels.experts), labels.k))
    labelled = [labels for labels in items.values() if labels.crowd or labels.experts]
    return {
        "chance": {
            "rate": _num(np.mean([1 / labels.k for labels in labelled])) if labelled else None,
            "n_items": len(labelled),
        },
        "worker_worker": _agreement(worker),
        "expert_worker": _agreement(expert_worker),
        "expert_expert": _agreement(expert),
    }


def two_policies(policies: Sequence[Any]) -> tuple[str, str] | None:
    """The two policies of a model-vs-model item (each wrote half the candidates), sorted."""
    if any(policy is None for policy in policies):
        return None
    counts = Counter(str(policy) for policy in policies)
    if len(counts) != 2 or len(set(counts.values())) != 1:
        return None
    first, second = sorted(counts)
    return first, second


def _win_entry(
    pair: tuple[str, str], k: int | str, outcomes: list[tuple[str | None, int]]
) -> dict[str, Any]:
    a, b = pair
    wins_a = sum(1 for winner, _ in outcomes if winner == a)
    wins_b = sum(1 for winner, _ in outcomes if winner == b)
    decided = wins_a + wins_b
    low = high = None
    if decided:
        interval = stats.binomtest(wins_a, decided).proportion_ci(CI_LEVEL, method="exact")
        low, high = interval.low, interval.high
    labels = Counter(n for _, n in outcomes)
    return {
        "policy_a": a,
        "policy_b": b,
        "k": k,
        "n_items": len(outcomes),
        "wins_a": wins_a,
        "wins_b": wins_b,
        "ties": len(outcomes) - decided,
        "win_rate_a": _num(wins_a / decided) if decided else None,
        "ci_low": _num(low),
        "ci_high": _num(high),
        "labels_per_item": {str(n): labels[n] for n in sorted(labels)},
        "mean_labels_per_item": _num(np.mean([n for _, n in outcomes])),
    }


def win_rates(items: Mapping[str, ItemLabels]) -> list[dict[str, Any]]:
    """Model-vs-model win rates from the majority of the crowd labels on each item.

    An item counts when two policies wrote half its candidates each (2-way: a ~ A, b ~ B;
    4-way: a0, a1 ~ A, b0, b1 ~ B). Its winner is the policy picked by more crowd workers; a
    tie (e.g. 1-1 with two labels) is counted under "ties" and left out of the win rate and
    its interval. Items with fewer labels than planned (say 1 instead of a majority of 3) are
    used as they are; labels_per_item shows how many labels each item had. One entry per
    policy pair and K, then one over all K ("k": "all").
    """
    by_pair: dict[tuple[str, str], dict[int, list[tuple[str | None, int]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for labels in items.values():
        pair = two_policies(labels.policies)
        if pair is None or not labels.crowd:
            continue
        votes = Counter(str(labels.policies[best]) for _, best in labels.crowd)
        a, b = votes[pair[0]], votes[pair[1]]
        winner = pair[0] if a > b else pair[1] if b > a else None
        by_pair[pair][labels.k].append((winner, len(labels.crowd)))
    entries: list[dict[str, Any]] = []
    for pair in sorted(by_pair):
        per_k = by_pair[pair]
        entries.extend(_win_entry(pair, k, per_k[k]) for k in sorted(per_k))
        entries.append(_win_entry(pair, "all", [o for k in sorted(per_k) for o in per_k[k]]))
    return entries


def _position_bias(rows: Sequence[Row]) -> dict[str, Any]:
    """How often each displayed position was picked, by K, against 1/K (live labels only)."""
    counts: dict[int, list[int]] = {}
    for row in rows:
        shown = row.get("shown")
        if shown is None:
            continue
        k = len(row["candidates"])
        counts.setdefault(k, [0] * k)[int(shown)] += 1
    result = {}
    for k in sorted(counts):
        tally = counts[k]
        n = sum(tally)
        # A chi-square test of "every position equally likely"; small n makes it weak, not wrong.
        p_value = stats.chisquare(tally).pvalue if n else None
        result[str(k)] = {
            "n": n,
            "counts": tally,
            "shares": [_num(c / n) for c in tally],
            "chance": _num(1 / k),
            "p_uniform": _num(p_value),
        }
    return result


def per_worker(rows: Sequence[Row], items: Mapping[str, ItemLabels]) -> list[dict[str, Any]]:
    """Each crowd worker's labels, agreement with other workers and experts, position picks."""
    by_worker: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if row["kind"] in SCORED_KINDS and str(row.get("rater_group") or CROWD) == CROWD:
            by_worker[str(row["worker"])].append(row)
    result = []
    for worker in sorted(by_worker):
        own = by_worker[worker]
        ww = [0, 0]
        ew = [0, 0]
        for row in own:
            labels = items[str(row["item"])]
            mine = [(worker, int(row["best"]))]
            others = [label for label in labels.crowd if label[0] != worker]
            for total, (agree, pairs) in (
                (ww, _pairs_between(mine, others)),
                (ew, _pairs_between(mine, labels.experts)),
            ):
                total[0] += agree
                total[1] += pairs
        gold = [
            row for row in own if row["kind"] == "gold" and row.get("expected_best") is not None
        ]
        shown = [row for row in own if row.get("shown") is not None]
        max_k = max((len(row["candidates"]) for row in shown), default=0)
        picks = Counter(int(row["shown"]) for row in shown)
        result.append(
            {
                "worker": worker,
                "labels": len(own),
                "worker_pairs": ww[1],
                "worker_agreement": _num(ww[0] / ww[1]) if ww[1] else None,
                "expert_pairs": ew[1],
                "expert_agreement": _num(ew[0] / ew[1]) if ew[1] else None,
                "gold_labels": len(gold),
                "gold_accuracy": _num(
                    np.mean([int(r["best"]) == int(r["expected_best"]) for r in gold])
                )
                if gold
                else None,
                "position_shares": [
                    _num(picks[p] / len(shown)) if shown else None for p in range(max_k)
                ],
                "first_share": _num(picks[0] / len(shown)) if shown else None,
                "first_chance": _num(np.mean([1 / len(r["candidates"]) for r in shown]))
                if shown
                else None,
            }
        )
    return result


def summarize(
    rows: Sequence[Row], expert_groups: Iterable[str] = DEFAULT_EXPERT_GROUPS
) -> dict[str, Any]:
    """Every statistic over the real and gold rows of one set (full or filtered)."""
    groups = tuple(expert_groups)
    scored = [row for row in rows if row["kind"] in SCORED_KINDS]
    items = group_items(scored, groups)
    crowd = [row for row in scored if str(row.get("rater_group") or CROWD) == CROWD]
    gold = [row for row in crowd if row["kind"] == "gold" and row.get("expected_best") is not None]
    by_group = Counter(str(row.get("rater_group") or CROWD) for row in scored)
    return {
        "n_labels": len(scored),
        "n_crowd_labels": len(crowd),
        "n_expert_labels": sum(by_group[g] for g in groups),
        "labels_by_group": {group: by_group[group] for group in sorted(by_group)},
        "n_workers": len({str(row["worker"]) for row in crowd}),
        "n_items": len(items),
        "items_by_k": {
            str(k): n for k, n in sorted(Counter(lab.k for lab in items.values()).items())
        },
        "n_gold_items": sum(
            1 for lab in items.values() if any(r == EXPERIMENTER for r, _ in lab.experts)
        ),
        "gold_accuracy": _num(np.mean([int(r["best"]) == int(r["expected_best"]) for r in gold]))
        if gold
        else None,
        "n_gold_labels": len(gold),
        "agreement": agreement_table(items),
        "win_rates": win_rates(items),
        "position_bias": _position_bias(crowd),
        "workers": per_worker(crowd, items),
    }


def _attention_passed(row: Row) -> bool:
    verdict = row.get("attention_passed")
    if verdict is not None:
        return bool(verdict)
    return row.get("expected_best") is not None and int(row["best"]) == int(row["expected_best"])


def training_summary(rows: Sequence[Row]) -> dict[str, Any]:
    """How often workers matched the experimenter on the training examples, overall and per item."""
    training = [row for row in rows if row["kind"] == "training"]
    by_item: dict[str, list[bool]] = defaultdict(list)
    for row in training:
        if row.get("expected_best") is not None:
            by_item[str(row["item"])].append(int(row["best"]) == int(row["expected_best"]))
    matches = [hit for hits in by_item.values() for hit in hits]
    return {
        "n_labels": len(training),
        "n_workers": len({str(row["worker"]) for row in training}),
        "accuracy": _num(np.mean(matches)) if matches else None,
        "by_item": [
            {"item": item, "n": len(hits), "accuracy": _num(np.mean(hits))}
            for item, hits in sorted(by_item.items())
        ],
    }


def analyze(
    rows: Sequence[Row],
    excluded_workers: set[str],
    expert_groups: Iterable[str] = DEFAULT_EXPERT_GROUPS,
) -> dict[str, Any]:
    """Full-set and filtered-set statistics, attention checks, training and exclusions."""
    _check_rows(rows)
    groups = sorted(set(expert_groups))
    return {
        "expert_groups": groups,
        **full_and_filtered(rows, excluded_workers, lambda part: summarize(part, groups)),
        "attention": attention_summary(rows, _attention_passed),
        "training": training_summary(rows),
    }
