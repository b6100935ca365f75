"""Boundary's QC defaults: its rules need a posterior of 0.99, not 0.95 (guesses right within
one step swing a careful reader's evidence more than a pick does), so a gold record that is
below the threshold at 0.95 but not at 0.99 stops a worker on other types' defaults and not on
boundary's; a study's own credibility still wins."""

from __future__ import annotations

from qc.config import parse_qc_config
from qc.evidence import worker_evidence
from qc.rules import evaluate
from tasks import get_hit_type


def gold_rows(right: int, wrong: int) -> list[dict[str, object]]:
    marks = [1.0] * right + [0.0] * wrong
    return [{"worker": "w", "item": f"g{i}", "kind": "gold", "gold_accuracy": mark}
            for i, mark in enumerate(marks)]  # fmt: skip


def stops(raw_qc: object, rows: list[dict[str, object]]) -> list[str]:
    config = parse_qc_config(get_hit_type("boundary").validate_qc_config(raw_qc))
    evidence = worker_evidence(rows, config)
    return [d.rule for d in evaluate(evidence, config.rules)]


def test_boundary_rules_need_a_posterior_of_099() -> None:
    config = parse_qc_config(get_hit_type("boundary").validate_qc_config(None))
    assert config.gold.credibility == 0.99
    rules = {r.name: r for r in config.rules}
    assert rules["gold_below_threshold"].threshold == 0.99
    assert rules["below_crowd"].threshold == 0.99
    assert rules["attention_failed"].threshold == 0.99
    for hit_type in ("likert", "comparison", "form"):
        other = parse_qc_config(get_hit_type(hit_type).validate_qc_config(None))
        assert other.gold.credibility == 0.95, hit_type


def test_a_record_credible_at_095_only_does_not_stop_a_boundary_reader() -> None:
    rows = gold_rows(right=1, wrong=7)
    config = parse_qc_config(get_hit_type("boundary").validate_qc_config(None))
    below = worker_evidence(rows, config)["w"]["gold_below_prob"]
    assert 0.95 < below < 0.99
    assert stops(None, rows) == []
    # The study's own setting wins, with the type's threshold kept.
    assert stops({"gold": {"credibility": 0.95}}, rows) == ["gold_below_threshold"]
    # Three more misses make it credible at 0.99 too.
    assert stops(None, gold_rows(right=1, wrong=10)) == ["gold_below_threshold"]
