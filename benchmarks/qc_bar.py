"""Issue 19's bar per HIT type, read from the QC benchmark's rows, with how sure each part is.

The bar: exclusion precision at least 0.95 and recall at least 0.90 for each bad kind; a median
of at most 10 items answered by a bad worker before the stop; no careful worker excluded in
any run; aggregated labels after QC at least as accurate as without it at every redundancy
level.

The label part is read per aggregation method and redundancy level, the crowd mixes pooled
(each label compared counts once): as the issue words it, and "every aggregation method" as
its report asks. Until 2026-11-30 it was read per cell (method, mix and redundancy), which
the issue does not ask: at 15 answers an item a mostly careful crowd outvotes its few bad
workers with or without QC, and QC's labels there differ from the control's by a few dozen
labels either way (+17 −19 over eight studies), so each such cell passed or missed as a coin
falls, whatever QC did (benchmarks/RESULTS.md, twenty-sixth look). The cells are still
counted and the worst is still tested, and a cell that QC credibly loses (one-sided sign test,
p < 0.05) still misses the bar: pooling must not hide harm to one crowd.

Each part is a count over a few dozen workers or labels, and near its threshold a table of 64
runs reads it about as a coin would (benchmarks/RESULTS.md, sixteenth look). So beside each
measured value this table gives an exact 95% interval (scipy.stats):
- careful workers excluded: the Clopper-Pearson upper bound on the rate per careful worker;
- recall: the lowest kind's Clopper-Pearson lower bound;
- items before the stop: the distribution-free interval of the median from order statistics
  (ranks from the binomial(n, 1/2) law);
- labels: the levels (method and redundancy) where QC's labels were at least as accurate,
  and the cell where QC lost most against the control, with the one-sided sign test on its
  changed labels: the chance of QC losing at least that many of them if it made no
  difference to which label was right.

`bar_rows` works on the rows `qc_bench.combine` makes (one per HIT type, mix and redundancy,
each pooling its runs); `bar_table` writes them as the QC block's last table.

    >>> rows = [{"hit_type": "likert", "mix": "m", "redundancy": 3,
    ...          "kinds": {"careful": {"n": 40, "excluded": 0, "before_stop": []},
    ...                    "colluder": {"n": 10, "excluded": 9, "before_stop": [4] * 9},
    ...                    "paster": {"n": 10, "excluded": 10, "before_stop": [12] * 10}},
    ...          "label_changes": {"mace": [3, 9], "majority_vote": [5, 1]}}]
    >>> bar = bar_rows(rows)[0]
    >>> bar["careful"], round(bar["careful_upper"], 3), bar["lowest_recall"]
    ('0/40', 0.088, ('colluder', 0.9, 0.555))
    >>> bar["median"], bar["median_interval"], bar["levels"], bar["cells"]
    (12, (4, 12), '1 of 2', '1 of 2')
    >>> bar["worst_cell"], round(bar["worst_p"], 3), bar["misses"]
    ('mace, m, 3 (+3 −9)', 0.073, ['median', 'labels'])
"""

from __future__ import annotations

import statistics
from typing import Any

from scipy import stats

PRECISION, RECALL, MEDIAN = 0.95, 0.90, 10
# A cell (method, mix, redundancy) whose changed labels QC loses at this one-sided sign test
# misses the bar even where its level, the mixes pooled, does not.
CELL_HARM_P = 0.05
# Kinds that read (noisy ones carelessly): neither bad nor, for noisy ones, careful.
GOOD = ("careful", "noisy")


def _upper(k: int, n: int) -> float:
    """The Clopper-Pearson 95% upper bound of a rate seen k times in n."""
    return 1.0 if k >= n else float(stats.beta.ppf(0.975, k + 1, n - k))


def _lower(k: int, n: int) -> float:
    """The Clopper-Pearson 95% lower bound of a rate seen k times in n."""
    return 0.0 if k <= 0 else float(stats.beta.ppf(0.025, k, n - k + 1))


def median_interval(values: list[float]) -> tuple[float, float] | None:
    """The distribution-free 95% interval of the median: the order statistics of ranks j and
    n + 1 - j, j the largest rank with P(Binomial(n, 1/2) < j) at most 0.025 (None under 6
    values, where no such rank exists).

    >>> median_interval(list(range(1, 21)))
    (6, 15)
    """
    ordered = sorted(values)
    n = len(ordered)
    j = int(stats.binom.ppf(0.025, n, 0.5))  # the least j with P(X <= j) >= 0.025
    if j < 1:
        return None
    return ordered[j - 1], ordered[n - j]


def bar_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per HIT type (in the rows' order): the bar's parts pooled over the type's rows, their
    intervals, and the parts it misses ("precision", "recall", "median", "careful",
    "labels")."""
    out: list[dict[str, Any]] = []
    for hit in dict.fromkeys(r["hit_type"] for r in rows):
        mine = [r for r in rows if r["hit_type"] == hit]
        kinds: dict[str, list[int]] = {}
        stops: list[float] = []
        for row in mine:
            for kind, data in row["kinds"].items():
                n, excluded = kinds.setdefault(kind, [0, 0])
                kinds[kind] = [n + data["n"], excluded + data["excluded"]]
                if kind not in GOOD:
                    stops += data["before_stop"]
        bad = {k: v for k, v in kinds.items() if k not in GOOD and v[0]}
        caught = sum(v[1] for v in bad.values())
        careful_n, careful_out = kinds.get("careful", [0, 0])
        precision = caught / (caught + careful_out) if caught + careful_out else None
        worst = min(bad, key=lambda k: (bad[k][1] / bad[k][0], k)) if bad else None
        cells, worst_cell = _label_cells(mine)
        levels = _label_levels(mine)
        median = statistics.median(stops) if stops else None
        found = {
            "hit_type": hit,
            "precision": precision,
            "careful": f"{careful_out}/{careful_n}",
            "careful_upper": _upper(careful_out, careful_n) if careful_n else None,
            "lowest_recall": None if worst is None else (
                worst, round(bad[worst][1] / bad[worst][0], 3),
                round(_lower(bad[worst][1], bad[worst][0]), 3)),
            "median": median,
            "median_interval": median_interval(stops),
            "levels": f"{levels[0]} of {levels[1]}" if levels[1] else "-",
            "cells": f"{cells[0]} of {cells[1]}" if cells[1] else "-",
            "worst_cell": worst_cell[0] if worst_cell else None,
            "worst_p": worst_cell[1] if worst_cell else None,
        }  # fmt: skip
        misses = []
        if precision is not None and precision < PRECISION:
            misses.append("precision")
        if worst is not None and bad[worst][1] / bad[worst][0] < RECALL:
            misses.append("recall")
        if median is not None and median > MEDIAN:
            misses.append("median")
        if careful_out:
            misses.append("careful")
        if levels[0] < levels[1] or (worst_cell is not None and worst_cell[1] < CELL_HARM_P):
            misses.append("labels")
        found["misses"] = misses
        out.append(found)
    return out


def _label_cells(rows: list[dict[str, Any]]) -> tuple[tuple[int, int], tuple[str, float] | None]:
    """(cells where QC's labels were at least as accurate, cells), and the cell QC lost most
    in with its sign test's p-value (None where it lost in none). A cell is at least as
    accurate where QC got at least as many of the changed labels right as the control did:
    both are scored on the same labels, so that is the accuracies' order."""
    good = total = 0
    worst: tuple[float, str] | None = None
    for row in rows:
        for method, (gained, lost) in sorted(row.get("label_changes", {}).items()):
            total += 1
            good += gained >= lost
            if lost > gained:
                p = float(stats.binomtest(lost, gained + lost, 0.5, "greater").pvalue)
                name = f"{method}, {row['mix']}, {row['redundancy']} (+{gained} −{lost})"
                if worst is None or p < worst[0]:
                    worst = (p, name)
    return (good, total), None if worst is None else (worst[1], worst[0])


def _label_levels(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """(levels where QC's labels were at least as accurate, levels): a level is a method at
    one redundancy, its changed labels summed over the rows' mixes.

    >>> _label_levels([{"redundancy": 15, "label_changes": {"mace": [17, 19]}},
    ...                {"redundancy": 15, "label_changes": {"mace": [18, 11]}},
    ...                {"redundancy": 3, "label_changes": {"mace": [2, 3]}}])
    (1, 2)
    """
    pooled: dict[tuple[str, int], list[int]] = {}
    for row in rows:
        for method, (gained, lost) in row.get("label_changes", {}).items():
            level = pooled.setdefault((method, row["redundancy"]), [0, 0])
            level[0] += gained
            level[1] += lost
    return sum(gained >= lost for gained, lost in pooled.values()), len(pooled)


def bar_table(rows: list[dict[str, Any]]) -> list[str]:
    """The bar table of benchmarks/RESULTS.md's QC block (lines)."""
    lines = [
        "",
        "Issue 19's bar per HIT type, pooled over the rows above (`benchmarks/qc_bar.py`), "
        "with exact 95% intervals: the careful workers' rate of exclusion (Clopper-Pearson "
        "upper bound), the lowest recall of a bad kind (its lower bound), the median of items "
        "before the stop (order statistics); the label levels (a method at one redundancy, "
        "the mixes pooled) and cells (a method, mix and redundancy) where QC's labels were at "
        "least as accurate, and of the cells where QC lost, the one that lost most with the "
        "one-sided sign test on its changed labels. The labels miss the bar at a level QC "
        f"loses, or at a cell it loses at p < {CELL_HARM_P}.",
        "",
        "| HIT type | precision | careful excluded (rate at most) | lowest recall (at least) "
        "| items before stop (interval) | label levels at least as accurate | label cells at "
        "least as accurate | QC's worst label cell (sign test p) | bar missed by |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b in bar_rows(rows):
        recall = b["lowest_recall"]
        interval = b["median_interval"]
        worst = "-" if b["worst_cell"] is None else f"{b['worst_cell']}, p {b['worst_p']:.2f}"
        upper = "" if b["careful_upper"] is None else f" ({b['careful_upper']:.4f})"
        lines.append(
            f"| {b['hit_type']} | {_two(b['precision'])} | {b['careful']}{upper} | "
            + ("-" if recall is None else f"{recall[1]:.2f} {recall[0]} ({recall[2]:.2f})")
            + f" | {_two(b['median'], '{:g}')}"
            + ("" if interval is None else f" ({interval[0]:g}-{interval[1]:g})")
            + f" | {b['levels']} | {b['cells']} | {worst} | {', '.join(b['misses']) or 'nothing'} |"
        )
    return lines


def _two(value: float | None, form: str = "{:.2f}") -> str:
    return "n/a" if value is None else form.format(value)
