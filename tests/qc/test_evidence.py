"""worker_evidence gathers attention, gold and anomaly figures per worker, ready for rules."""

from __future__ import annotations

from typing import Any

import pytest
from scipy import stats

from qc.config import parse_qc_config
from qc.evidence import worker_evidence
from qc.rules import METRICS, evaluate, excluded_by_rule


def row(worker: str, kind: str, n: int, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "response_id": n,
        "worker": worker,
        "item": f"{kind}{n}",
        "kind": kind,
        "seconds": 30.0,
        "chars_shown": 200,
        "surface": f"answer {n % 3}",
        "attention_passed": True if kind == "attention" else None,
        "gold_accuracy": 1.0 if kind == "gold" else None,
        "explanation": None,
        "typing": None,
    }
    return base | fields


def test_gold_and_attention_figures() -> None:
    config = parse_qc_config({"gold": {"threshold": 0.6, "prior": [2, 2]}})
    rows = [
        row("a", "gold", 1, gold_accuracy=1.0),
        row("a", "gold", 2, gold_accuracy=0.5),
        row("a", "gold", 3, gold_accuracy=0.0),
        row("a", "gold", 4, gold_accuracy=None),  # unscored gold: not counted
        row("a", "attention", 5, attention_passed=False),
        row("a", "attention", 6, attention_passed=True),
        row("a", "real", 7),
        row("b", "real", 8),
    ]
    out = worker_evidence(rows, config)
    a, b = out["a"], out["b"]
    # a: Beta(2 + 1.5, 2 + 1.5)
    assert a["gold_n"] == 3
    assert a["gold_accuracy"] == pytest.approx(0.5)
    assert a["gold_mean"] == pytest.approx(0.5)
    assert a["gold_below_prob"] == pytest.approx(stats.beta.cdf(0.6, 3.5, 3.5))
    trusted_doubt = stats.beta.cdf(0.8, 3.5, 3.5)
    assert a["gold_rate"] == pytest.approx(0.05 + 0.7 * trusted_doubt)
    assert (a["attention_checks"], a["attention_failed"]) == (2, 1)
    assert a["responses"] == 7
    # b has no gold: the prior's mean and rate, but no accuracy or probability to act on.
    assert b["gold_n"] == 0 and b["gold_accuracy"] is None and b["gold_below_prob"] is None
    assert b["gold_mean"] == pytest.approx(0.5)
    assert b["gold_rate"] == pytest.approx(0.05 + 0.7 * stats.beta.cdf(0.8, 2, 2))
    assert (b["attention_checks"], b["attention_failed"]) == (0, 0)


def test_a_worker_the_crowd_doubts_of_late_meets_more_gold() -> None:
    # Ten gold right, then the worker stops reading: the whole record still vouches for them,
    # the recent window does not, and the gold rate follows the window's doubt.
    config = parse_qc_config(None)
    rows = [row("w", "gold", n) for n in range(10)]
    crowd = {"agreement_n": 30, "agreement_below_prob": 0.02}
    steady = worker_evidence(rows, config, {"w": {**crowd, "recent_below_prob": 0.03}})["w"]
    drifting = worker_evidence(rows, config, {"w": {**crowd, "recent_below_prob": 0.8}})["w"]
    policy = config.gold
    assert steady["gold_rate"] < 0.15
    assert drifting["gold_rate"] == pytest.approx(
        policy.min_rate + (policy.max_rate - policy.min_rate) * 0.8
    )


def test_a_study_with_vouch_after_keeps_gold_coming_until_that_many_gold_answers() -> None:
    # One gold answer, right, and a crowd that vouches after two real items: by default the
    # crowd's word lowers the gold rate at once; with vouch_after 3 it does not yet.
    rows = [row("w", "gold", 1), row("w", "real", 2), row("w", "real", 3)]
    crowd = {"w": {"agreement_n": 2, "agreement_below_prob": 0.01}}
    default = worker_evidence(rows, parse_qc_config(None), crowd)["w"]
    waiting = worker_evidence(rows, parse_qc_config({"gold": {"vouch_after": 3}}), crowd)["w"]
    assert default["gold_n"] == waiting["gold_n"] == 1
    assert default["gold_rate"] < 0.3
    assert waiting["gold_rate"] > 0.45


def test_every_rule_metric_is_present_and_evidence_is_attached() -> None:
    rows = [row("a", "real", 1, seconds=0.2)]
    out = worker_evidence(rows, parse_qc_config(None))["a"]
    assert set(METRICS) <= set(out)
    assert out["too_fast_n"] == 1
    assert out["evidence"]["too_fast"][0]["response_id"] == 1


def test_imported_raters_get_the_same_evidence_with_their_source_and_groups() -> None:
    text = "the fourth sentence contradicts the first one"
    rows = [
        row("roft:a", "real", n, seconds=None, explanation=text, source="imported",
            rater_group="roft", item=f"r{n}")
        for n in range(1, 8)
    ]  # fmt: skip
    rows += [row("sim:b", "real", 9, source="live", rater_group="crowd"), row("old", "real", 10)]
    out = worker_evidence(rows, parse_qc_config(None))
    imported = out["roft:a"]
    # No timing in the import: no speed evidence, but the repeated text is caught.
    assert imported["too_fast_n"] == 0 and imported["responses"] == 7
    assert imported["repeated_explanations"] == 7
    [repeats] = imported["evidence"]["repeated_explanation"]
    assert repeats["items"] == [f"r{n}" for n in range(1, 8)]
    assert (imported["source"], imported["rater_groups"]) == ("imported", ["roft"])
    assert (out["sim:b"]["source"], out["sim:b"]["rater_groups"]) == ("live", ["crowd"])
    assert (out["old"]["source"], out["old"]["rater_groups"]) == ("live", [])
    decisions = {(d.worker, d.rule) for d in evaluate(out, parse_qc_config(None).rules)}
    assert ("roft:a", "repeated_explanations") in decisions


def test_training_only_workers_appear() -> None:
    rows = [row("t", "training", 1), row("t", "training", 2, seconds=0.1)]
    out = worker_evidence(rows, parse_qc_config(None))
    assert out["t"]["responses"] == 0
    assert out["t"]["too_fast_n"] == 0 and out["t"]["too_fast_share"] is None
    assert out["t"]["gold_n"] == 0


def test_end_to_end_rules_soft_block_the_careless_workers() -> None:
    config = parse_qc_config(None)
    rows: list[dict[str, Any]] = []
    n = 0

    def add(worker: str, kind: str, **fields: Any) -> None:
        nonlocal n
        n += 1
        rows.append(row(worker, kind, n, **fields))

    for _ in range(12):
        add("careful", "real")
        add("constant", "real", surface="position 1")
    # Five misses: P(accuracy < 0.5) is 0.984, over the gold rule's 0.98 (four: 0.969).
    for _ in range(5):
        add("careful", "gold", gold_accuracy=1.0)
        add("guesser", "gold", gold_accuracy=0.0)
    for _ in range(4):
        add("inattentive", "attention", attention_passed=False)
    # Three times in four: careful people slip now and then, and a rare one slips thrice
    # early; the rule waits for a fourth failure.
    for _ in range(3):
        add("slipped", "attention", attention_passed=False)
    add("slipped", "attention", attention_passed=True)

    out = worker_evidence(rows, config)
    decisions = evaluate(out, config.rules)
    excluded = excluded_by_rule(decisions)
    assert excluded["attention_failed"] == {"inattentive"}
    assert excluded["gold_below_threshold"] == {"guesser"}
    assert excluded["constant_answers"] == {"constant"}
    assert "careful" not in {d.worker for d in decisions}
    assert "slipped" not in {d.worker for d in decisions}
    # The constant worker's ten identical answers in a row are also flagged.
    assert ("constant", "identical_run") in {(d.worker, d.rule) for d in decisions}
