"""Boundary's QC defaults: its rules need a posterior of 0.99, not 0.95 (guesses right within
one step swing a careful reader's evidence more than a pick does), so a gold record that is
below the threshold at 0.95 but not at 0.99 stops a worker on other types' defaults and not on
boundary's; a study's own credibility still wins."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient

from qc.config import parse_qc_config
from qc.evidence import worker_evidence
from qc.gold import threshold_from_chance
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
    # The drift rules look again after every answer, so they stay firmer still.
    assert rules["stopped_reading"].threshold == pytest.approx(0.998)
    assert rules["drifted"].threshold == pytest.approx(0.9996)
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
    own = get_hit_type("boundary").validate_qc_config({"gold": {"credibility": 0.95}})
    assert own["gold"]["credibility"] == 0.95
    assert own["gold"]["threshold"] == threshold_from_chance(0.28)
    # The gold rule never acts below 0.98 (qc.rules.GOLD_CREDIBILITY): at 0.95 this record
    # (0.966) still stops nobody, one at 0.988 does.
    assert stops({"gold": {"credibility": 0.95}}, rows) == []
    assert stops({"gold": {"credibility": 0.95}}, gold_rows(right=1, wrong=9)) == [
        "gold_below_threshold"
    ]
    # Three more misses make it credible at 0.99 too.
    assert stops(None, gold_rows(right=1, wrong=10)) == ["gold_below_threshold"]


def test_a_boundary_study_shows_and_stores_its_credibility(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int]
) -> None:
    config: dict[str, Any] = {"annotations_per_item": 2, "attention_rate": 0.0}
    shown = client.get(f"/api/studies/{make_study(config=config)}", headers=auth).get_json()
    assert shown["config"]["qc"]["gold"]["credibility"] == 0.99
    rules = {r["name"]: r for r in shown["config"]["qc"]["rules"]}
    assert rules["gold_below_threshold"]["threshold"] == 0.99
    own = {**config, "qc": {"gold": {"credibility": 0.97}}}
    shown = client.get(f"/api/studies/{make_study(config=own)}", headers=auth).get_json()
    assert shown["config"]["qc"]["gold"]["credibility"] == 0.97
