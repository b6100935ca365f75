"""The QC benchmark's bar table (benchmarks/qc_bar.py): each part of issue 19's bar is read
from the rows as the issue states it, and its interval is the exact one."""

from __future__ import annotations

import doctest
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
qc_bar = importlib.import_module("qc_bar")


def row(mix: str, redundancy: int, **kinds: tuple[int, int, list[int]]) -> dict[str, Any]:
    return {"hit_type": "comparison", "mix": mix, "redundancy": redundancy,
            "kinds": {k: {"n": n, "excluded": x, "before_stop": s}
                      for k, (n, x, s) in kinds.items()}}  # fmt: skip


def test_the_examples_hold() -> None:
    result = doctest.testmod(qc_bar)
    assert result.failed == 0 and result.attempted >= 5


def test_a_type_that_meets_every_part_misses_nothing() -> None:
    rows = [row("a", 3, careful=(16, 0, []), noisy=(4, 3, [20, 20, 20]),
                paster=(4, 4, [8, 9, 10, 10]), colluder=(4, 4, [5, 6, 7, 8])),
            {**row("b", 15, careful=(24, 0, []), paster=(2, 2, [10, 11])),
             "label_changes": {"mace": [4, 4], "majority_vote": [7, 2]}}]  # fmt: skip
    (bar,) = qc_bar.bar_rows(rows)
    # Noisy workers count in neither precision nor the median; two rows' kinds pool.
    assert bar["precision"] == 1.0 and bar["median"] == 8.5 and bar["careful"] == "0/40"
    assert bar["lowest_recall"][:2] == ("colluder", 1.0) and bar["cells"] == "2 of 2"
    assert bar["levels"] == "2 of 2"
    assert bar["misses"] == [] and bar["worst_cell"] is None


def test_each_part_missed_is_named() -> None:
    rows = [{**row("a", 5, careful=(40, 1, []), drifter=(10, 8, [12] * 8)),
             "label_changes": {"mace": [1, 2]}}]
    (bar,) = qc_bar.bar_rows(rows)
    assert bar["misses"] == ["precision", "recall", "median", "careful", "labels"]
    assert bar["precision"] == pytest.approx(8 / 9)
    # One careful worker in 40: the exact upper bound of the rate is beta(0.975; 2, 39).
    assert bar["careful_upper"] == pytest.approx(0.1316, abs=1e-4)
    assert bar["worst_cell"] == "mace, a, 5 (+1 −2)" and bar["worst_p"] == pytest.approx(0.5)
    table = qc_bar.bar_table(rows)
    assert table[-1].startswith("| comparison | 0.89 | 1/40 (0.1316) | 0.80 drifter (0.44) | 12")
    assert table[-1].endswith("| precision, recall, median, careful, labels |")


def labelled(mix: str, redundancy: int, **changes: list[int]) -> dict[str, Any]:
    return {**row(mix, redundancy, careful=(24, 0, [])), "label_changes": changes}


def test_labels_are_judged_per_method_and_redundancy_with_the_mixes_pooled() -> None:
    # The "at every redundancy level": a mostly careful crowd's coin toss at 15 an
    # item (+17 −19) does not miss the bar where the level, both mixes, is at least as good.
    rows = [
        labelled("half_bad", 15, mace=[18, 11], majority_vote=[31, 14]),
        labelled("mostly_careful", 15, mace=[17, 19], majority_vote=[15, 8]),
        labelled("mostly_careful", 3, mace=[287, 161], majority_vote=[340, 153]),
    ]
    (bar,) = qc_bar.bar_rows(rows)
    assert bar["levels"] == "4 of 4" and bar["cells"] == "5 of 6"
    assert bar["worst_cell"] == "mace, mostly_careful, 15 (+17 −19)"
    assert "labels" not in bar["misses"]
    # The same cell lost at the level's expense misses it.
    rows[0]["label_changes"]["mace"] = [1, 1]
    (bar,) = qc_bar.bar_rows(rows)
    assert bar["levels"] == "3 of 4" and bar["misses"] == ["labels"]


def test_a_cell_qc_credibly_loses_misses_the_bar_however_the_level_pools() -> None:
    # 2 gained, 12 lost: P(at least 12 of 14 lost | no difference) = 0.0065.
    rows = [labelled("half_bad", 5, mace=[60, 10]), labelled("mostly_careful", 5, mace=[2, 12])]
    (bar,) = qc_bar.bar_rows(rows)
    assert bar["levels"] == "1 of 1" and bar["worst_p"] == pytest.approx(0.00647, abs=1e-5)
    assert bar["misses"] == ["labels"]
    assert qc_bar.bar_table(rows)[-1].endswith(
        "| 1 of 1 | 1 of 2 | mace, mostly_careful, 5 (+2 −12), p 0.01 | labels |"
    )


def test_the_median_interval_is_distribution_free() -> None:
    # Under 6 values no pair of ranks holds the median with 95% confidence.
    assert qc_bar.median_interval([1, 2, 3, 4, 5]) is None
    assert qc_bar.median_interval([1, 2, 3, 4, 5, 6]) == (1, 6)
    # 100 values: ranks 40 and 61 (P(Binomial(100, 1/2) <= 39) = 0.0176).
    assert qc_bar.median_interval(list(range(1, 101))) == (40, 61)
