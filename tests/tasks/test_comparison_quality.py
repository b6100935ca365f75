"""Comparison's QC defaults: real items weighed by how hard readers find them; below_crowd
from eight judged answers (the other types wait for ten); no type stops a worker below the
crowd sooner unless the study asks for it (`below_crowd_early`, which on the QC benchmark
cost a careful worker and no answers)."""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from typing import Any

from qc.config import parse_qc_config
from qc.evidence import crowd_evidence
from qc.rules import evaluate
from tasks import get_hit_type

K = 4


def crowd_answers(
    rng: random.Random, tasks: int, careful: int, guesser_tasks: int, right: int = 0
) -> list[tuple[str, str, int]]:
    """Careful readers (right 8 times in 10) answer every task; the guesser answers the first
    `guesser_tasks`, after the others, right on the first `right` of them only."""
    truth = [rng.randrange(K) for _ in range(tasks)]
    answers = [
        (f"q{t}/best", f"careful{w}",
         z if rng.random() < 0.8 else (z + 1 + rng.randrange(K - 1)) % K)
        for t, z in enumerate(truth) for w in range(careful)
    ]  # fmt: skip
    answers += [(f"q{t}/best", "guesser", truth[t] if t < right else (truth[t] + 1) % K)
                for t in range(guesser_tasks)]  # fmt: skip
    return answers


def fired(
    hit_type: str, answers: Sequence[tuple[str, str, Hashable]], qc: dict[str, Any] | None = None
) -> dict[str, list[str]]:
    config = parse_qc_config(get_hit_type(hit_type).validate_qc_config(qc))
    evidence = crowd_evidence(answers, config)
    # No gold answered: nothing vouches for anyone (worker_evidence's gold_doubt is 1).
    return {worker: [d.rule for d in evaluate({worker: {**e, "gold_doubt": 1.0}}, config.rules)]
            for worker, e in evidence.items()}  # fmt: skip


def test_a_study_can_stop_a_worker_far_below_the_crowd_within_a_few_comparisons() -> None:
    early = {"crowd": {"early_answers": 6}}
    config = parse_qc_config(get_hit_type("comparison").validate_qc_config(early))
    [rule] = [r for r in config.rules if r.name == "below_crowd_early"]
    assert rule.min_evidence == {"agreement_n": 6, "agreement_real_n": 3, "gold_doubt": 0.2}
    assert rule.threshold == 0.99
    rng = random.Random(4)
    # Five wrong picks are not enough for anyone; seven are for the early rule, before
    # below_crowd's eight.
    assert fired("comparison", crowd_answers(rng, 20, 10, 5), early)["guesser"] == []
    answers = crowd_answers(rng, 20, 10, 7)
    rules = fired("comparison", answers, early)
    assert "below_crowd_early" in rules["guesser"] and "below_crowd" not in rules["guesser"]
    assert all(not found for worker, found in rules.items() if worker != "guesser"), rules
    # By default the same seven wait for eight; other types wait for ten.
    assert fired("comparison", answers)["guesser"] == []
    eight = crowd_answers(random.Random(4), 20, 10, 8)
    assert "below_crowd" in fired("comparison", eight)["guesser"]
    assert "below_crowd" not in fired("comparison", eight, {"crowd": {"min_answers": 10}})[
        "guesser"]  # fmt: skip
    # One pick right in seven leaves the posterior between below_crowd's 0.95 and the early
    # rule's 0.99: credible enough after ten answers, not after seven.
    answers = crowd_answers(random.Random(4), 20, 10, 7, right=1)
    assert 0.95 < crowd_evidence(answers, config)["guesser"]["agreement_below_prob"] < 0.99
    assert fired("comparison", answers, early)["guesser"] == []


def test_comparisons_weigh_each_item_by_how_hard_readers_find_it_by_default() -> None:
    comparison = get_hit_type("comparison")
    assert parse_qc_config(comparison.validate_qc_config(None)).crowd.real_difficulty is True
    off = comparison.validate_qc_config({"crowd": {"real_difficulty": False}})
    assert parse_qc_config(off).crowd.real_difficulty is False
    # A study stored before the setting existed reads as it did: unweighed.
    stored = comparison.validate_qc_config(None)
    del stored["crowd"]["real_difficulty"]
    assert parse_qc_config(stored).crowd.real_difficulty is False


def test_every_type_waits_for_ten_answers_by_default_and_comparison_for_eight() -> None:
    for hit_type in ("boundary", "likert", "comparison", "form"):
        config = parse_qc_config(get_hit_type(hit_type).validate_qc_config(None))
        assert config.crowd.early_answers is None
        [below] = [r for r in config.rules if r.name == "below_crowd"]
        assert below.min_evidence["agreement_n"] == (8 if hit_type == "comparison" else 10)
        assert "below_crowd_early" not in {r.name for r in config.rules}, hit_type
        if hit_type != "comparison":
            assert config.crowd.real_difficulty is False  # not measured on them yet
    # A study stores its rules with its settings, so one stored before keeps below_crowd's 10.
    stored = get_hit_type("comparison").validate_qc_config(None)
    [raw] = [r for r in stored["rules"] if r["name"] == "below_crowd"]
    raw["min_evidence"]["agreement_n"] = 10
    del stored["crowd"]["min_answers"]
    config = parse_qc_config(stored)
    [rule] = [r for r in config.rules if r.name == "below_crowd"]
    assert rule.min_evidence["agreement_n"] == 10 and config.crowd.min_answers == 10
