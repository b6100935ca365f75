"""QC settings: defaults, every validation error naming its field, and the JSON round trip."""

from __future__ import annotations

from typing import Any

import pytest

from qc.config import (
    AnomalyThresholds,
    GoldPolicy,
    QcConfig,
    Qualification,
    parse_qc_config,
)
from qc.rules import DEFAULT_RULES, Action, default_rules


def test_defaults() -> None:
    config = parse_qc_config(None)
    assert config == parse_qc_config({}) == QcConfig()
    assert config.gold == GoldPolicy(0.5, 0.95, 3, 0.8, 0.05, 0.75, (1.0, 1.0), True)
    assert config.qualification is None
    assert config.anomalies == AnomalyThresholds(40.0, 1.0, 5, 15.0, 0.5, 10)
    assert config.rules == DEFAULT_RULES


def test_partial_sections_keep_other_defaults() -> None:
    config = parse_qc_config(
        {"gold": {"min_gold": 5}, "qualification": {}, "anomalies": {"run_length": 8}}
    )
    assert config.gold.min_gold == 5 and config.gold.threshold == 0.5
    assert config.qualification == Qualification(min_accuracy=0.75)
    assert config.anomalies.run_length == 8 and config.anomalies.min_seconds == 1.0


def test_default_rules_take_the_gold_policy() -> None:
    config = parse_qc_config({"gold": {"credibility": 0.99, "min_gold": 4}})
    assert config.rules == default_rules(config.gold)
    gold_rule = next(r for r in config.rules if r.name == "gold_below_threshold")
    assert gold_rule.threshold == 0.99 and gold_rule.min_evidence == {"gold_n": 4}


def test_rules_list_replaces_the_defaults() -> None:
    raw_rule = {
        "name": "slow_gold",
        "metric": "gold_mean",
        "op": "<",
        "threshold": 0.4,
        "action": "stop",
        "min_evidence": {"gold_n": 5},
    }
    config = parse_qc_config({"rules": [raw_rule]})
    [rule] = config.rules
    assert (rule.name, rule.action, rule.min_evidence) == ("slow_gold", Action.STOP, {"gold_n": 5})
    assert parse_qc_config({"rules": []}).rules == ()
    # Every rule applies to every rater group unless it says it judges live workers only (of
    # the defaults, those comparing a worker with the crowd).
    assert {r.name for r in parse_qc_config(None).rules if r.live_only} == {
        "collusion", "stopped_reading", "below_crowd", "below_crowd_known", "drifted"}  # fmt: skip
    [live] = parse_qc_config({"rules": [raw_rule | {"live_only": True}]}).rules
    assert live.live_only is True
    with pytest.raises(ValueError, match=r"qc.rules\[0\]: rule 'slow_gold': live_only must be"):
        parse_qc_config({"rules": [raw_rule | {"live_only": "no"}]})


def test_the_early_crowd_rule_follows_the_crowd_policy() -> None:
    # Off by default; a study (or its HIT type) sets the answers it may act after.
    assert "below_crowd_early" not in {r.name for r in parse_qc_config(None).rules}
    config = parse_qc_config({"crowd": {"early_answers": 7, "early_credibility": 0.99}})
    [rule] = [r for r in config.rules if r.name == "below_crowd_early"]
    assert (rule.metric, rule.op, rule.threshold) == ("agreement_below_prob", ">=", 0.99)
    assert rule.min_evidence == {"agreement_n": 7, "agreement_real_n": 3, "gold_doubt": 0.2}
    assert rule.live_only
    assert parse_qc_config(config.to_json()) == config


def test_below_crowd_waits_for_the_crowd_policys_items() -> None:
    [rule] = [r for r in parse_qc_config(None).rules if r.name == "below_crowd"]
    assert rule.min_evidence == {"agreement_n": 10, "agreement_real_n": 3, "gold_doubt": 0.2}
    config = parse_qc_config({"crowd": {"min_items": 8}})
    [rule] = [r for r in config.rules if r.name == "below_crowd"]
    assert rule.min_evidence == {
        "agreement_n": 10, "agreement_real_n": 3, "agreement_items": 8, "gold_doubt": 0.2
    }
    assert parse_qc_config(config.to_json()) == config
    config = parse_qc_config({"crowd": {"min_answers": 8}})
    [rule] = [r for r in config.rules if r.name == "below_crowd"]
    assert rule.min_evidence == {"agreement_n": 8, "agreement_real_n": 3, "gold_doubt": 0.2}
    assert parse_qc_config(config.to_json()) == config
    for bad in (0, 2.5, "8", True):
        with pytest.raises(ValueError, match="qc.crowd.min_answers"):
            parse_qc_config({"crowd": {"min_answers": bad}})


def test_below_crowd_waits_for_the_crowd_policys_real_answers() -> None:
    config = parse_qc_config({"crowd": {"min_real_answers": 5, "early_answers": 6}})
    rules = {r.name: r for r in config.rules}
    assert rules["below_crowd"].min_evidence["agreement_real_n"] == 5
    assert rules["below_crowd_early"].min_evidence["agreement_real_n"] == 5
    assert parse_qc_config(config.to_json()) == config
    # 0: known answers alone may decide, as before the setting.
    off = parse_qc_config({"crowd": {"min_real_answers": 0}})
    [rule] = [r for r in off.rules if r.name == "below_crowd"]
    assert rule.min_evidence["agreement_real_n"] == 0
    for bad in (-1, 2.5, "3", True, None):
        with pytest.raises(ValueError, match="qc.crowd.min_real_answers"):
            parse_qc_config({"crowd": {"min_real_answers": bad}})


def test_round_trip() -> None:
    raw: dict[str, Any] = {
        "gold": {
            "threshold": 0.7,
            "prior": [2, 3],
            "min_rate": 0.1,
            "max_rate": 0.3,
            "shared_order": False,
            "by_difficulty": False,
            "chance": 0.25,
        },
        "qualification": {"min_accuracy": 0.9},
        "anomalies": {"paste_share": 0.8, "min_explanation_chars": 20},
        "rules": [DEFAULT_RULES[0].to_json()],
    }
    config = parse_qc_config(raw)
    as_json = config.to_json()
    assert as_json["gold"]["prior"] == [2, 3]
    assert as_json["gold"]["shared_order"] is False
    assert (as_json["gold"]["by_difficulty"], as_json["gold"]["chance"]) == (False, 0.25)
    assert as_json["qualification"] == {"min_accuracy": 0.9}
    assert parse_qc_config(as_json) == config
    assert parse_qc_config(parse_qc_config(None).to_json()) == parse_qc_config(None)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"gold": {"threshold": 1.5}}, "qc.gold.threshold must be a number between 0 and 1"),
        ({"gold": {"threshold": "0.5"}}, "qc.gold.threshold must be a number between 0 and 1"),
        ({"gold": {"threshold": True}}, "qc.gold.threshold must be a number"),
        ({"gold": {"threshold": float("nan")}}, "qc.gold.threshold must be a number"),
        ({"gold": {"credibility": 0}}, "qc.gold.credibility must be a number greater than 0"),
        ({"gold": {"credibility": 1.01}}, "qc.gold.credibility must be"),
        ({"gold": {"min_gold": 0}}, "qc.gold.min_gold must be a whole number of 1 or more"),
        ({"gold": {"min_gold": 2.5}}, "qc.gold.min_gold must be a whole number"),
        ({"gold": {"vouch_after": -1}}, "qc.gold.vouch_after must be a whole number of 0 or more"),
        ({"gold": {"vouch_after": True}}, "qc.gold.vouch_after must be a whole number"),
        ({"gold": {"trusted": -0.1}}, "qc.gold.trusted must be a number between 0 and 1"),
        ({"gold": {"min_rate": -0.1}}, "qc.gold.min_rate must be a number between 0 and 1"),
        ({"gold": {"max_rate": 1.1}}, "qc.gold.max_rate must be a number between 0 and 1"),
        (
            {"gold": {"min_rate": 0.6, "max_rate": 0.5}},
            "qc.gold.min_rate must not exceed qc.gold.max_rate",
        ),
        ({"gold": {"prior": [1, 0]}}, r"qc.gold.prior must be two positive numbers"),
        ({"gold": {"prior": [1]}}, r"qc.gold.prior must be two positive numbers"),
        ({"gold": {"prior": 1}}, r"qc.gold.prior must be two positive numbers"),
        ({"gold": {"thresold": 0.5}}, "qc.gold.thresold is not a setting"),
        ({"gold": {"shared_order": "yes"}}, "qc.gold.shared_order must be true or false"),
        ({"gold": {"easy_first": 1}}, "qc.gold.easy_first must be true or false"),
        ({"gold": {"by_difficulty": 1}}, "qc.gold.by_difficulty must be true or false"),
        ({"gold": {"chance": 1}}, "qc.gold.chance must be below 1"),
        ({"gold": {"chance": -0.2}}, "qc.gold.chance must be a number between 0 and 1"),
        ({"gold": {"chance": "0.25"}}, "qc.gold.chance must be a number between 0 and 1"),
        ({"gold": [0.5]}, "qc.gold must be an object"),
        (
            {"qualification": {"min_accuracy": 2}},
            "qc.qualification.min_accuracy must be a number between 0 and 1",
        ),
        ({"qualification": {"min": 0.5}}, "qc.qualification.min is not a setting"),
        (
            {"anomalies": {"reading_chars_per_second": 0}},
            "qc.anomalies.reading_chars_per_second must be a positive number",
        ),
        ({"anomalies": {"min_seconds": -1}}, "qc.anomalies.min_seconds must be a number of 0"),
        (
            {"anomalies": {"run_length": 1}},
            "qc.anomalies.run_length must be a whole number of 2 or more",
        ),
        (
            {"anomalies": {"typing_chars_per_second": -5}},
            "qc.anomalies.typing_chars_per_second must be a positive number",
        ),
        (
            {"anomalies": {"paste_share": 1.5}},
            "qc.anomalies.paste_share must be a number between 0 and 1",
        ),
        (
            {"anomalies": {"min_explanation_chars": 0}},
            "qc.anomalies.min_explanation_chars must be a whole number of 1 or more",
        ),
        ({"anomalies": {"speed": 3}}, "qc.anomalies.speed is not a setting"),
        ({"crowd": {"doubt_checks": 1.5}}, "qc.crowd.doubt_checks must be a number between 0"),
        ({"crowd": {"doubt_checks": "often"}}, "qc.crowd.doubt_checks must be a number"),
        ({"crowd": {"real_difficulty": "yes"}}, "qc.crowd.real_difficulty must be true or false"),
        ({"crowd": {"early_answers": 0}}, "qc.crowd.early_answers must be a whole number of 1"),
        ({"crowd": {"early_answers": 6.5}}, "qc.crowd.early_answers must be a whole number"),
        ({"crowd": {"early_answers": True}}, "qc.crowd.early_answers must be a whole number"),
        ({"crowd": {"min_items": 0}}, "qc.crowd.min_items must be a whole number of 1"),
        ({"crowd": {"min_items": "8"}}, "qc.crowd.min_items must be a whole number"),
        ({"crowd": {"early_credibility": 0}}, "qc.crowd.early_credibility must be a number g"),
        ({"crowd": {"gold_vouch": 1.5}}, "qc.crowd.gold_vouch must be a number between 0 and 1"),
        ({"crowd": {"gold_vouch": "high"}}, "qc.crowd.gold_vouch must be a number between 0"),
        ({"crowd": {"early_credibility": 1.2}}, "qc.crowd.early_credibility must be a number"),
        ({"rules": {"name": "x"}}, "qc.rules must be a list"),
        ({"rules": [{"name": "x"}]}, r"qc.rules\[0\]: rule 'x' lacks metric"),
        (
            {"rules": [DEFAULT_RULES[0].to_json(), DEFAULT_RULES[1].to_json() | {"op": "="}]},
            r"qc.rules\[1\]: rule 'gold_below_threshold': op '=' is unknown",
        ),
        (
            {"rules": [DEFAULT_RULES[0].to_json(), DEFAULT_RULES[0].to_json()]},
            "qc.rules: the name 'attention_failed' is used twice",
        ),
        ({"filters": {}}, "qc.filters is not a QC setting"),
    ],
)
def test_validation_errors_name_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_qc_config(raw)


def test_not_a_mapping_is_refused() -> None:
    with pytest.raises(ValueError, match="qc must be an object"):
        parse_qc_config([("gold", {})])  # type: ignore[arg-type]


def test_direct_construction_is_checked_too() -> None:
    with pytest.raises(ValueError, match="qc.gold.max_rate"):
        GoldPolicy(max_rate=2.0)
    with pytest.raises(ValueError, match="qc.anomalies.run_length"):
        AnomalyThresholds(run_length=True)
