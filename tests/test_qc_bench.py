"""The QC benchmark's tally (benchmarks/qc_bench.py): who QC stopped, when, and what the bad
workers it missed answered."""

from __future__ import annotations

import doctest
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
qc_bench = importlib.import_module("qc_bench")


def test_the_examples_hold() -> None:
    result = doctest.testmod(qc_bench)
    assert result.attempted > 0 and result.failed == 0


def test_a_drifter_is_counted_from_its_drift_and_a_missed_one_by_its_answers() -> None:
    kinds = {"d1": "drifter", "d2": "drifter", "d3": "drifter", "p1": "paster", "c1": "careful",
             "n1": "noisy"}  # fmt: skip
    excluded = {"d1": "rule:drifted", "p1": "rule:collusion", "n1": "rule:below_crowd"}
    answered = {"d1": 20, "d2": 30, "d3": 12, "p1": 11, "c1": 30, "n1": 25}
    # d1's stop was decided on 15 answers, 5 more were stored while the queue caught up.
    out = qc_bench.detection(kinds, excluded, answered, {"d1": (15, 20)})
    drifters = out["kinds"]["drifter"]
    assert (drifters["n"], drifters["excluded"]) == (3, 1)
    assert drifters["before_stop"] == [15 - qc_bench.DRIFT_AFTER]
    assert drifters["lag"] == [5]
    assert drifters["missed"] == [12, 30]  # d3's work ran out after 12 answers
    assert out["kinds"]["paster"]["missed"] == []
    # The noisy worker counts in neither precision nor recall.
    assert out["precision"] == 1.0 and out["kinds"]["noisy"]["excluded"] == 1
