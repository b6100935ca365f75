"""Trying rules offline on whole records (benchmarks/qc_policies.py) and the flag-only studies
that give them (benchmarks/qc_labels.flag_only_config, `qc_bench.py --flag-only`)."""

from __future__ import annotations

import doctest
import importlib
import sys
from pathlib import Path

import pytest

from qc.rules import DEFAULT_RULES, Action
from tasks import get_hit_type

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
qc_policies = importlib.import_module("qc_policies")
qc_labels = importlib.import_module("qc_labels")


def test_the_examples_hold() -> None:
    result = doctest.testmod(qc_policies)
    assert result.failed == 0 and result.attempted >= 2


def test_a_variant_scales_probability_rules_only_and_adds_evidence_to_one_rule() -> None:
    got = {r.name: r for r in qc_policies.variant_rules(
        DEFAULT_RULES, "scale=4, stopped_reading.stopped_reading_n=8")}  # fmt: skip
    before = {r.name: r for r in DEFAULT_RULES}
    assert got["stopped_reading"].threshold == pytest.approx(0.96)
    assert got["stopped_reading"].min_evidence == {
        "stopped_reading_n": 8, "responses": 6, "gold_doubt": 0.2
    }
    assert got["gold_below_threshold"].threshold == pytest.approx(0.92)  # 1 - 4 x 0.02
    # Not a probability: left alone, as is every other rule's evidence.
    assert got["collusion"] == before["collusion"]
    assert got["below_crowd"].min_evidence == before["below_crowd"].min_evidence


def test_a_variant_sets_one_rules_threshold() -> None:
    got = {r.name: r for r in qc_policies.variant_rules(
        DEFAULT_RULES, "attention_failed.threshold=0.995")}  # fmt: skip
    before = {r.name: r for r in DEFAULT_RULES}
    assert got["attention_failed"].threshold == 0.995
    assert got["attention_failed"].min_evidence == before["attention_failed"].min_evidence
    assert got["gold_below_threshold"] == before["gold_below_threshold"]


@pytest.mark.parametrize(
    "changes", ["nosuchrule.responses=3", "scale", "stopped_reading=3", "x.threshold=0.9"]
)
def test_a_mistyped_variant_is_refused_by_name(changes: str) -> None:
    with pytest.raises((SystemExit, ValueError)):
        qc_policies.variant_rules(DEFAULT_RULES, changes)


def test_the_report_counts_careful_stops_and_bad_workers_answers_from_a_drift() -> None:
    studies = {
        "form-half_bad-3-1": {
            "c1": {"kind": "careful", "first": {"live": [4, "stopped_reading"]}},
            "c2": {"kind": "careful", "first": {}},
            "n1": {"kind": "noisy", "first": {"live": [9, "below_crowd"]}},
            "d1": {"kind": "drifter", "first": {"live": [14, "attention_failed"], "v": [20, "x"]}},
            "r1": {"kind": "slow_random", "first": {"live": [5, "stopped_reading"]}},
            "p1": {"kind": "paster", "first": {"v": [30, "x"]}},
        }
    }
    lines = qc_policies.report(studies, ["live", "v"])
    assert lines[0].split() == [
        "form", "live", "careful", "stopped", "1/2;", "bad:", "median", "5.5", "before", "the",
        "stop,", "never", "stopped", "1", "of", "3",
    ]  # fmt: skip
    assert lines[1].strip() == "form-half_bad-3-1 c1 at 4 (stopped_reading)"
    assert "careful stopped 0/2; bad: median 21.0 before the stop, never stopped 1 of 3" in lines[2]


def test_a_flag_only_study_keeps_the_types_default_rules_as_flags() -> None:
    config = {"attention_rate": 0.1, "qc": {"gold": {"credibility": 0.99}}}
    flagged = qc_labels.flag_only_config("comparison", config)
    defaults = get_hit_type("comparison").validate_qc_config(config["qc"])["rules"]
    assert [r["name"] for r in flagged["qc"]["rules"]] == [r["name"] for r in defaults]
    assert {r["action"] for r in flagged["qc"]["rules"]} == {Action.FLAG.value}
    gold = next(r for r in flagged["qc"]["rules"] if r["name"] == "gold_below_threshold")
    assert gold["threshold"] == 0.99  # the study's own settings made them
    assert flagged["qc"]["gold"] == {"credibility": 0.99} and flagged["attention_rate"] == 0.1
    # The study accepts them (the type validates its QC settings on creation).
    get_hit_type("comparison").validate_qc_config(flagged["qc"])
