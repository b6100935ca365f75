"""Pure analysis of Likert ratings, as in Chiang & Lee (2023), on the full and filtered sets.

Per rater group (crowd, expert, llm:...) × item group (human, gpt2, ...) × attribute: mean,
standard deviation and n; Krippendorff's alpha (ordinal and interval, via `krippendorff`) and
the share of items on which every rater gave the same rating; Kendall's tau between two rater
groups' per-item mean ratings and the mean pairwise tau between raters of one group (scipy);
Welch's t-test between item groups (scipy); and each rater's bias against the others.

Missing ratings (None) are skipped everywhere; attention and training rows only feed the
attention summary. A statistic that is undefined on the data (one rater, constant ratings)
is None with a note saying why, never NaN.

Example:
    >>> rows = [
    ...     {"response_id": n, "worker": w, "item": i, "kind": "real", "rater_group": "crowd",
    ...      "item_group": "human", "ratings": {"fluency": r}}
    ...     for n, (w, i, r) in enumerate([("a", "x", 4), ("b", "x", 4), ("a", "y", 2)])
    ... ]
    >>> summary = summarize(rows)
    >>> summary["descriptives"][0]["mean"], summary["agreement"][0]["exact"]
    (3.3333, 1.0)
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import krippendorff
import numpy as np
from scipy import stats

from qc.attention import attention_summary
from qc.filtering import full_and_filtered
from tasks.base import rater_group

Row = Mapping[str, Any]

NO_GROUP = "ungrouped"
# Attention checks say what to answer and training items teach; neither rates the texts.
SCORED_KINDS = frozenset({"real", "gold"})
KINDS = SCORED_KINDS | {"attention", "training"}
_REQUIRED = ("response_id", "worker", "item", "kind", "ratings")
_DIGITS = 4
_P_DIGITS = 4  # significant digits: a p-value of 3e-9 must not round to 0


@dataclass(frozen=True)
class Rating:
    """One non-missing rating of one attribute."""

    worker: str
    rater_group: str
    item: str
    item_group: str
    attribute: str
    value: float


def _num(value: Any) -> float | None:
    """Round for JSON; NaN and infinities become None so the output never carries NaN."""
    if value is None:
        return None
    number = float(value)
    return round(number, _DIGITS) if math.isfinite(number) else None


def _p(value: Any) -> float | None:
    if value is None or not math.isfinite(float(value)):
        return None
    return float(f"{float(value):.{_P_DIGITS}g}")


def _check_rows(rows: Sequence[Row]) -> None:
    for index, row in enumerate(rows):
        missing = [key for key in _REQUIRED if key not in row]
        if missing:
            raise ValueError(
                f"row {index} (response {row.get('response_id')!r}) lacks {', '.join(missing)}; "
                f"every row needs {', '.join(_REQUIRED)} (use LikertHit.analysis_row)"
            )
        if row["kind"] not in KINDS:
            raise ValueError(
                f"row {index} (response {row['response_id']!r}) has kind {row['kind']!r}; "
                f"use one of {', '.join(sorted(KINDS))}"
            )
        for name, value in (row["ratings"] or {}).items():
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, numbers.Real)
            ):
                raise ValueError(
                    f"row {index} (response {row['response_id']!r}) rates {name!r} as {value!r}; "
                    "a rating is a number, or None when missing"
                )


def ratings_of(rows: Iterable[Row]) -> list[Rating]:
    """The non-missing ratings of the real and gold rows."""
    result = []
    for row in rows:
        if row["kind"] not in SCORED_KINDS:
            continue
        group = rater_group(row)
        item_group = row.get("item_group") or NO_GROUP
        for attribute, value in (row["ratings"] or {}).items():
            if value is not None:
                result.append(
                    Rating(
                        str(row["worker"]),
                        str(group),
                        str(row["item"]),
                        str(item_group),
                        str(attribute),
                        float(value),
                    )
                )
    return result


def describe(values: Sequence[float]) -> dict[str, Any]:
    """n, mean and sample standard deviation (ddof=1; None below two values)."""
    arr = np.asarray(values, dtype=float)
    n = int(arr.size)
    return {
        "n": n,
        "mean": _num(arr.mean()) if n else None,
        "std": _num(arr.std(ddof=1)) if n >= 2 else None,
    }


def krippendorff_alpha(
    by_item: Mapping[str, Sequence[float]],
) -> tuple[float | None, float | None, str | None]:
    """Alpha (ordinal, interval) over the items with two or more ratings, and why if undefined.

    Alpha only depends on which values each item got, not on who gave them, so the value
    counts per item go to `krippendorff.alpha` directly (raters may differ between items).
    """
    pairable = [list(values) for values in by_item.values() if len(values) >= 2]
    if not pairable:
        return None, None, "no item has two ratings, so there is nothing to agree on"
    domain = sorted({value for values in pairable for value in values})
    if len(domain) < 2:
        return None, None, "every rating is the same, so no disagreement is expected: undefined"
    column = {value: index for index, value in enumerate(domain)}
    counts = np.zeros((len(pairable), len(domain)))
    for row, values in enumerate(pairable):
        for value in values:
            counts[row, column[value]] += 1
    result = []
    for level in ("ordinal", "interval"):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            alpha = krippendorff.alpha(
                value_counts=counts, value_domain=domain, level_of_measurement=level
            )
        result.append(_num(alpha))
    return result[0], result[1], None


def agreement(by_item: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """Krippendorff's alpha and the share of items (with 2+ ratings) rated all the same."""
    pairable = [values for values in by_item.values() if len(values) >= 2]
    same = sum(1 for values in pairable if len(set(values)) == 1)
    ordinal, interval, note = krippendorff_alpha(by_item)
    return {
        "n_items": len(by_item),
        "n_items_multi": len(pairable),
        "n_ratings": sum(len(values) for values in by_item.values()),
        "alpha_ordinal": ordinal,
        "alpha_interval": interval,
        "alpha_note": note,
        "exact": _num(same / len(pairable)) if pairable else None,
    }


def _kendall(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None]:
    """tau-b and its p-value; None for both when a side is constant (tau is undefined)."""
    if len(set(x)) < 2 or len(set(y)) < 2:
        return None, None
    result = stats.kendalltau(x, y)
    return _num(result.statistic), _p(result.pvalue)


def _item_means(ratings: Iterable[Rating]) -> dict[str, float]:
    by_item: dict[str, list[float]] = defaultdict(list)
    for rating in ratings:
        by_item[rating.item].append(rating.value)
    return {item: float(np.mean(values)) for item, values in by_item.items()}


def tau_between_groups(
    ratings: Sequence[Rating], groups: Sequence[str], attributes: Sequence[str]
) -> list[dict[str, Any]]:
    """Kendall's tau between two rater groups' per-item mean ratings, over items both rated."""
    result = []
    for first, second in combinations(groups, 2):
        for attribute in attributes:
            a = _item_means(
                r for r in ratings if r.rater_group == first and r.attribute == attribute
            )
            b = _item_means(
                r for r in ratings if r.rater_group == second and r.attribute == attribute
            )
            common = sorted(set(a) & set(b))
            tau = p = None
            note = None
            if len(common) < 2:
                note = "fewer than 2 items rated by both groups"
            else:
                tau, p = _kendall([a[i] for i in common], [b[i] for i in common])
                if tau is None:
                    note = "one group's mean ratings are all the same"
            result.append(
                {
                    "group_a": first,
                    "group_b": second,
                    "attribute": attribute,
                    "tau": tau,
                    "p": p,
                    "n_items": len(common),
                    "note": note,
                }
            )
    return result


def tau_within_group(ratings: Sequence[Rating], group: str, attribute: str) -> dict[str, Any]:
    """Mean Kendall's tau over pairs of raters of a group with 2+ items in common.

    Pairs where a rater gave one rating to every common item have no tau; they are counted
    in `n_undefined` and left out of the mean.
    """
    per_worker: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in ratings:
        if r.rater_group == group and r.attribute == attribute:
            per_worker[r.worker][r.item].append(r.value)
    means = {
        worker: {item: float(np.mean(values)) for item, values in items.items()}
        for worker, items in per_worker.items()
    }
    taus: list[float] = []
    undefined = 0
    for first, second in combinations(sorted(means), 2):
        common = sorted(set(means[first]) & set(means[second]))
        if len(common) < 2:
            continue
        tau, _ = _kendall([means[first][i] for i in common], [means[second][i] for i in common])
        if tau is None:
            undefined += 1
        else:
            taus.append(tau)
    return {
        "rater_group": group,
        "attribute": attribute,
        "mean_tau": _num(np.mean(taus)) if taus else None,
        "n_pairs": len(taus),
        "n_undefined": undefined,
        "n_raters": len(means),
    }


def welch(
    ratings: Sequence[Rating],
    rater_groups: Sequence[str],
    item_groups: Sequence[str],
    attributes: Sequence[str],
) -> list[dict[str, Any]]:
    """Welch's t-test (unequal variances) between two item groups' individual ratings."""
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in ratings:
        values[(r.rater_group, r.item_group, r.attribute)].append(r.value)
    result = []
    for group in rater_groups:
        for first, second in combinations(item_groups, 2):
            for attribute in attributes:
                a = values.get((group, first, attribute), [])
                b = values.get((group, second, attribute), [])
                t = p = None
                note = None
                if len(a) < 2 or len(b) < 2:
                    note = "needs 2 or more ratings in each item group"
                elif len(set(a)) < 2 and len(set(b)) < 2:
                    note = "both item groups' ratings are constant"
                else:
                    with warnings.catch_warnings():
                        # One constant group is fine for Welch's test, but scipy warns
                        # about precision loss on it; the result is exact.
                        warnings.simplefilter("ignore", RuntimeWarning)
                        test = stats.ttest_ind(a, b, equal_var=False)
                    t, p = _num(test.statistic), _p(test.pvalue)
                result.append(
                    {
                        "rater_group": group,
                        "attribute": attribute,
                        "group_a": first,
                        "group_b": second,
                        "mean_a": _num(np.mean(a)) if a else None,
                        "mean_b": _num(np.mean(b)) if b else None,
                        "n1": len(a),
                        "n2": len(b),
                        "t": t,
                        "p": p,
                        "note": note,
                    }
                )
    return result


def rater_bias(ratings: Sequence[Rating]) -> list[dict[str, Any]]:
    """Per rater and attribute: mean of (rating - the mean of the other raters of the item).

    "Other raters" are those of the same rater group: an expert is compared with experts,
    a crowd worker with the crowd; groups are compared with each other by tau and means.
    Ratings of items no one else in the group rated have nothing to compare with.
    """
    by_item: dict[tuple[str, str, str], list[Rating]] = defaultdict(list)
    for r in ratings:
        by_item[(r.rater_group, r.attribute, r.item)].append(r)
    diffs: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    own: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for group_ratings in by_item.values():
        for r in group_ratings:
            key = (r.rater_group, r.worker, r.attribute)
            own[key].append(r.value)
            others = [o.value for o in group_ratings if o.worker != r.worker]
            if others:
                diffs[key].append(r.value - float(np.mean(others)))
    return [
        {
            "rater_group": group,
            "worker": worker,
            "attribute": attribute,
            "n": len(diffs.get((group, worker, attribute), [])),
            "bias": _num(np.mean(diffs[(group, worker, attribute)]))
            if diffs.get((group, worker, attribute))
            else None,
            "mean": _num(np.mean(values)),
            "n_ratings": len(values),
        }
        for (group, worker, attribute), values in sorted(own.items())
    ]


def _attributes(rows: Sequence[Row], ratings: Sequence[Rating]) -> list[str]:
    # Config order (the order of the answer's keys), so tables read like the questionnaire.
    names: dict[str, None] = {}
    for row in rows:
        if row["kind"] in SCORED_KINDS:
            names.update(dict.fromkeys(str(name) for name in row["ratings"] or {}))
    names.update(dict.fromkeys(r.attribute for r in ratings))
    return list(names)


def summarize(rows: Sequence[Row]) -> dict[str, Any]:
    """Every statistic over the real and gold rows of one set."""
    scored = [row for row in rows if row["kind"] in SCORED_KINDS]
    ratings = ratings_of(scored)
    attributes = _attributes(scored, ratings)
    rater_groups = sorted({r.rater_group for r in ratings})
    item_groups = sorted({r.item_group for r in ratings})
    scales: dict[str, list[Any]] = {}
    for row in scored:
        for name, scale in (row.get("scales") or {}).items():
            scales.setdefault(str(name), list(scale))

    cells: dict[tuple[str, str | None, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in ratings:
        for item_group in (r.item_group, None):  # None: all item groups together
            cells[(r.rater_group, item_group, r.attribute)][r.item].append(r.value)
    descriptives, agreements = [], []
    for (group, item_group, attribute), by_item in sorted(
        cells.items(), key=lambda kv: (kv[0][0], kv[0][1] is None, kv[0][1] or "", kv[0][2])
    ):
        key = {"rater_group": group, "item_group": item_group, "attribute": attribute}
        values = [value for item_values in by_item.values() for value in item_values]
        descriptives.append({**key, **describe(values)})
        agreements.append({**key, **agreement(by_item)})

    n_missing = sum(
        1 for row in scored for value in (row["ratings"] or {}).values() if value is None
    )
    by_group = {
        group: {
            "n_raters": len({r.worker for r in ratings if r.rater_group == group}),
            "n_items": len({r.item for r in ratings if r.rater_group == group}),
            "n_ratings": sum(1 for r in ratings if r.rater_group == group),
        }
        for group in rater_groups
    }
    return {
        "counts": {
            "n_responses": len(scored),
            "n_ratings": len(ratings),
            "n_missing": n_missing,
            "n_raters": len({(r.rater_group, r.worker) for r in ratings}),
            "n_items": len({r.item for r in ratings}),
            "by_rater_group": by_group,
        },
        "attributes": attributes,
        "rater_groups": rater_groups,
        "item_groups": item_groups,
        "scales": scales,
        "descriptives": descriptives,
        "agreement": agreements,
        "table": paper_table(descriptives, agreements, attributes),
        "tau_between_groups": tau_between_groups(ratings, rater_groups, attributes),
        "tau_within_groups": [
            tau_within_group(ratings, group, attribute)
            for group in rater_groups
            for attribute in attributes
        ],
        "welch": welch(ratings, rater_groups, item_groups, attributes),
        "rater_bias": rater_bias(ratings),
    }


def paper_table(
    descriptives: Sequence[Mapping[str, Any]],
    agreements: Sequence[Mapping[str, Any]],
    attributes: Sequence[str],
) -> list[dict[str, Any]]:
    """Rows rater group × item group, columns attribute: mean, std, alpha, % exact.

    The layout of Chiang & Lee's Table 1. The "all item groups" row (item_group None) is
    kept only where a rater group rated more than one item group.
    """
    stats_of = {(d["rater_group"], d["item_group"], d["attribute"]): d for d in descriptives}
    agree_of = {(a["rater_group"], a["item_group"], a["attribute"]): a for a in agreements}
    keys = list(dict.fromkeys((d["rater_group"], d["item_group"]) for d in descriptives))
    n_item_groups: dict[str, int] = defaultdict(int)
    for group, item_group in keys:
        n_item_groups[group] += item_group is not None
    table = []
    for group, item_group in keys:
        if item_group is None and n_item_groups[group] < 2:
            continue
        row_cells = {}
        for attribute in attributes:
            d = stats_of.get((group, item_group, attribute), {})
            a = agree_of.get((group, item_group, attribute), {})
            row_cells[attribute] = {
                "mean": d.get("mean"),
                "std": d.get("std"),
                "n": d.get("n", 0),
                "alpha_interval": a.get("alpha_interval"),
                "alpha_ordinal": a.get("alpha_ordinal"),
                "exact": a.get("exact"),
            }
        table.append({"rater_group": group, "item_group": item_group, "cells": row_cells})
    return table


def _passed(row: Row) -> bool:
    # Imported rows may lack the stored verdict; the rule is every rating equals the asked one.
    verdict = row.get("attention_passed")
    if verdict is not None:
        return bool(verdict)
    wanted = row.get("expected_rating")
    values = list((row["ratings"] or {}).values())
    return wanted is not None and bool(values) and all(v == wanted for v in values)


def analyze(rows: Sequence[Row], excluded_workers: set[str]) -> dict[str, Any]:
    """Full-set and filtered-set statistics plus the attention-check and exclusion counts."""
    _check_rows(rows)
    return {
        **full_and_filtered(rows, excluded_workers, summarize),
        "attention": attention_summary(rows, _passed),
    }
