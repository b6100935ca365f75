"""Pure analysis of best-of-K comparison labels: agreement, model win rates, per-worker QC.

The agreement table follows Ziegler et al. (2019), "Fine-tuning language models from human
preferences", table 2: the chance rate (1/K), the share of agreeing label pairs between two
crowd workers on the same item, between an expert and a worker, and between two experts.

Rows are the type's analysis rows (see ComparisonHit.analysis_row). Only real and gold items
count in the statistics; training and attention labels are summarised on their own.
Expert labels are the responses whose rater group is an expert group (imported labels), plus
the experimenter's own `best` on each gold item.

Every rater group counts. The paper's table and win rates compare the crowd (rater group
"crowd", the live workers and answers imported without a group) with the experts; the same
figures for every rater group follow (an old MTurk batch imported as "mturk", an LLM...):
agreement within each group and between every two groups (the experimenter's gold labels as
the group "experimenter"), and win rates by each group's majority. Every figure says which
rater groups it uses (`rater_groups`, and `figure_groups` for the counts and tables).

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
from tasks.base import LIVE_RATER_GROUP, rater_group

Row = Mapping[str, Any]

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
    """The labels of one item, (rater, canonical best): the crowd's, the experts' (expert
    groups and the experimenter's gold label), and every rater group's on its own."""

    k: int
    policies: list[Any]
    crowd: list[tuple[str, int]] = field(default_factory=list)
    experts: list[tuple[str, int]] = field(default_factory=list)
    groups: dict[str, list[tuple[str, int]]] = field(default_factory=dict)


def group_items(rows: Sequence[Row], expert_groups: Iterable[str]) -> dict[str, ItemLabels]:
    """Labels of the real and gold rows by item, by rater group.

    The crowd and the expert groups fill the paper's table; `groups` holds every group's
    labels (others, e.g. an LLM, only there), the gold label under EXPERIMENTER.
    """
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
                gold = (EXPERIMENTER, int(row["expected_best"]))
                labels.experts.append(gold)
                labels.groups[EXPERIMENTER] = [gold]
        group = rater_group(row)
        label = (str(row["worker"]), int(row["best"]))
        labels.groups.setdefault(group, []).append(label)
        if group == LIVE_RATER_GROUP:
            labels.crowd.append(label)
        elif group in experts:
            labels.experts.append(label)
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
    """Chance, worker-worker, expert-worker and expert-expert agreement, as in the paper.

    Workers are the crowd; experts the expert groups and the experimenter (see `summarize`,
    which names the groups of each row).
    """
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


def agreement_by_group(items: Mapping[str, ItemLabels]) -> list[dict[str, Any]]:
    """Agreement within every rater group and between every two groups, on the same items.

    Groups in name order, the experimenter's gold labels (one per gold item) last; a group
    with one rater per item has no pairs within it (rate None).
    """
    names = sorted({g for labels in items.values() for g in labels.groups} - {EXPERIMENTER})
    if any(EXPERIMENTER in labels.groups for labels in items.values()):
        names.append(EXPERIMENTER)
    entries = []
    for index, first in enumerate(names):
        for second in names[index:]:
            if first == second == EXPERIMENTER:
                continue  # one gold label per item: never a pair
            per_item = []
            for labels in items.values():
                a, b = labels.groups.get(first, []), labels.groups.get(second, [])
                counted = _pairs_within(a) if first == second else _pairs_between(a, b)
                per_item.append((*counted, labels.k))
            entries.append({"group_a": first, "group_b": second, **_agreement(per_item)})
    return entries


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


def win_rates(
    items: Mapping[str, ItemLabels], group: str = LIVE_RATER_GROUP
) -> list[dict[str, Any]]:
    """Model-vs-model win rates from the majority of one rater group's labels on each item.

    An item counts when two policies wrote half its candidates each (2-way: a ~ A, b ~ B;
    4-way: a0, a1 ~ A, b0, b1 ~ B). Its winner is the policy picked by more crowd workers; a
    tie (e.g. 1-1 with two labels) is counted under "ties" and left out of the win rate and
    its interval. Items with fewer labels than planned (say 1 instead of a majority of 3) are
    used as they are; labels_per_item shows how many labels each item had. One entry per
    policy pair and K, then one over all K ("k": "all"), each naming its `rater_groups`.
    """
    by_pair: dict[tuple[str, str], dict[int, list[tuple[str | None, int]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for labels in items.values():
        pair = two_policies(labels.policies)
        voters = labels.groups.get(group, [])
        if pair is None or not voters:
            continue
        votes = Counter(str(labels.policies[best]) for _, best in voters)
        a, b = votes[pair[0]], votes[pair[1]]
        winner = pair[0] if a > b else pair[1] if b > a else None
        by_pair[pair][labels.k].append((winner, len(voters)))
    entries: list[dict[str, Any]] = []
    for pair in sorted(by_pair):
        per_k = by_pair[pair]
        entries.extend(_win_entry(pair, k, per_k[k]) for k in sorted(per_k))
        entries.append(_win_entry(pair, "all", [o for k in sorted(per_k) for o in per_k[k]]))
    return [{**entry, "rater_groups": [group]} for entry in entries]


def _position_bias(rows: Sequence[Row]) -> dict[str, Any]:
    """How often each displayed position was picked, by K, against 1/K (live labels only:
    imported ones have no displayed order)."""
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
    """Each rater's labels, agreement with the other raters of their group and with the
    experts, gold accuracy and position picks; raters of every group, by group then name."""
    by_worker: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        if row["kind"] in SCORED_KINDS:
            by_worker[(rater_group(row), str(row["worker"]))].append(row)
    result = []
    for group, worker in sorted(by_worker):
        own = by_worker[(group, worker)]
        ww = [0, 0]
        ew = [0, 0]
        for row in own:
            labels = items[str(row["item"])]
            mine = [(worker, int(row["best"]))]
            others = [label for label in labels.groups.get(group, []) if label[0] != worker]
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
                "rater_group": group,
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


def _gold_accuracy(rows: Sequence[Row]) -> tuple[int, float | None]:
    gold = [row for row in rows if row["kind"] == "gold" and row.get("expected_best") is not None]
    if not gold:
        return 0, None
    return len(gold), _num(np.mean([int(r["best"]) == int(r["expected_best"]) for r in gold]))


def _by_group(scored: Sequence[Row], experts: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Counts and gold accuracy of each rater group."""
    rows_of: dict[str, list[Row]] = defaultdict(list)
    for row in scored:
        rows_of[rater_group(row)].append(row)
    out = {}
    for group in sorted(rows_of):
        rows = rows_of[group]
        n_gold, accuracy = _gold_accuracy(rows)
        out[group] = {
            "expert": group in experts,
            "n_labels": len(rows),
            "n_raters": len({str(row["worker"]) for row in rows}),
            "n_items": len({str(row["item"]) for row in rows}),
            "n_gold_labels": n_gold,
            "gold_accuracy": accuracy,
        }
    return out


def summarize(
    rows: Sequence[Row], expert_groups: Iterable[str] = DEFAULT_EXPERT_GROUPS
) -> dict[str, Any]:
    """Every statistic over the real and gold rows of one set (full or filtered).

    The paper's figures (agreement, win_rates, gold accuracy, n_workers) are the crowd's
    against the experts; `agreement_by_group`, `win_rates_by_group` and `by_rater_group` give
    them for every rater group, and each figure names the groups it uses.
    """
    groups = tuple(expert_groups)
    scored = [row for row in rows if row["kind"] in SCORED_KINDS]
    items = group_items(scored, groups)
    crowd = [row for row in scored if rater_group(row) == LIVE_RATER_GROUP]
    n_gold, gold_accuracy = _gold_accuracy(crowd)
    by_group = Counter(rater_group(row) for row in scored)
    present = sorted(by_group)
    experts = [g for g in present if g in groups]
    if any(EXPERIMENTER in labels.groups for labels in items.values()):
        experts.append(EXPERIMENTER)
    agreement = agreement_table(items)
    used = {
        "chance": [LIVE_RATER_GROUP, *experts],
        "worker_worker": [LIVE_RATER_GROUP],
        "expert_worker": [LIVE_RATER_GROUP, *experts],
        "expert_expert": experts,
    }
    for key, names in used.items():
        agreement[key]["rater_groups"] = names
    return {
        "rater_groups": present,
        "n_labels": len(scored),
        "n_crowd_labels": len(crowd),
        "n_expert_labels": sum(by_group[g] for g in groups),
        "labels_by_group": {group: by_group[group] for group in present},
        "by_rater_group": _by_group(scored, groups),
        "n_workers": len({str(row["worker"]) for row in crowd}),
        "n_items": len(items),
        "items_by_k": {
            str(k): n for k, n in sorted(Counter(lab.k for lab in items.values()).items())
        },
        "n_gold_items": sum(
            1 for lab in items.values() if any(r == EXPERIMENTER for r, _ in lab.experts)
        ),
        "gold_accuracy": gold_accuracy,
        "n_gold_labels": n_gold,
        "agreement": agreement,
        "agreement_by_group": agreement_by_group(items),
        "win_rates": win_rates(items),
        "win_rates_by_group": {group: win_rates(items, group) for group in present},
        "position_bias": _position_bias(scored),
        "workers": per_worker(scored, items),
        # The groups behind the figures that do not name their own.
        "figure_groups": {
            "n_workers": [LIVE_RATER_GROUP],
            "gold_accuracy": [LIVE_RATER_GROUP],
            "position_bias": sorted({rater_group(r) for r in scored if r.get("shown") is not None}),
            "workers": present,
        },
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
