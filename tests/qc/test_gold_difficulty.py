"""Gold weighed by difficulty: a hard item most readers miss is no full test, an easy one is."""

from __future__ import annotations

import pytest
from scipy import stats

from qc.gold import GoldConfidence

COMPARISON_CHANCE, COMPARISON_THRESHOLD = 0.25, 0.4375
READERS = [f"r{i}" for i in range(20)]


def _study() -> list[tuple[str, str, float]]:
    """Twenty readers on eight hard gold items (half of them right on each) and eight easy
    ones (nine in ten right)."""
    rows = []
    for g in range(8):
        for i, reader in enumerate(READERS):
            rows.append((reader, f"hard{g}", float((i + g) % 2 == 0)))
            rows.append((reader, f"easy{g}", float((i + g) % 10 != 0)))
    return rows


def _both(rows: list[tuple[str, str, float]]) -> tuple[GoldConfidence, GoldConfidence]:
    weighed = GoldConfidence(chance=COMPARISON_CHANCE).fit_items(rows)
    plain = GoldConfidence().fit((worker, accuracy) for worker, _, accuracy in rows)
    return weighed, plain


def test_a_reader_who_met_only_hard_gold_is_not_judged_as_if_it_were_easy() -> None:
    # The check run's lost careful worker: 1 of 8 right, all on items readers get half right.
    unlucky = [("unlucky", f"hard{g}", float(g == 0)) for g in range(8)]
    weighed, plain = _both(_study() + unlucky)
    assert plain.prob_below("unlucky", COMPARISON_THRESHOLD) > 0.95
    assert weighed.prob_below("unlucky", COMPARISON_THRESHOLD) < 0.9
    assert 4 < weighed.weight("unlucky") < 6 and weighed.n_["unlucky"] == 8
    # The raw record is unchanged: only the decision weighs difficulty.
    assert weighed.mean("unlucky") == plain.mean("unlucky") == pytest.approx(2 / 10)


def test_misses_on_easy_gold_are_full_tests() -> None:
    clicker = [("clicker", f"easy{g}", 0.0) for g in range(5)]
    weighed, plain = _both(_study() + clicker)
    assert weighed.weight("clicker") == 5.0
    assert weighed.prob_below("clicker", COMPARISON_THRESHOLD) == pytest.approx(
        stats.beta.cdf(COMPARISON_THRESHOLD, 1, 6)
    )
    assert weighed.prob_below("clicker", COMPARISON_THRESHOLD) > 0.95


def test_gold_of_one_difficulty_gives_the_beta_posterior() -> None:
    # Every item as hard as the others: each is as much a test as gold can be.
    rows = [(r, f"g{g}", float((i + g) % 2 == 0)) for g in range(6) for i, r in enumerate(READERS)]
    rows += [("w", f"g{g}", float(g < 2)) for g in range(6)]
    weighed, plain = _both(rows)
    assert weighed.weight("w") == 6.0
    assert weighed.prob_below("w", 0.5) == pytest.approx(plain.prob_below("w", 0.5))
    assert weighed.prob_below("w", 0.5) == pytest.approx(stats.beta.cdf(0.5, 3, 5))


def test_an_item_readers_meet_at_chance_says_almost_nothing() -> None:
    rows = _study()
    # Readers right on "coin" a quarter of the time: a random answer's rate.
    rows += [(r, "coin", float(i % 4 == 0)) for i, r in enumerate(READERS)]
    rows += [("w", "coin", 0.0)]
    weighed, _ = _both(rows)
    [(accuracy, shows)] = weighed.shows_["w"]
    assert accuracy == 0.0 and shows < 0.3  # a little: its few readers are shrunk to the rest
    # One miss on it leaves the prior nearly where it was (uniform: P(p < t) = t).
    assert weighed.prob_below("w", 0.5) == pytest.approx(0.5, abs=0.06)


def test_guessers_do_not_make_an_item_look_hard() -> None:
    # Readers right on every item; ten guessers, wrong on every one, met only g0 and g1. Had
    # their misses counted, those two would look hard.
    rows = [(r, f"g{g}", 1.0) for g in range(4) for r in READERS[:10]]
    rows += [(f"guess{i}", f"g{g}", 0.0) for g in range(2) for i in range(10)]
    weighed, plain = _both(rows)
    assert [float(s) for s in weighed.shows_["r0"][:, 1]] == [1.0] * 4
    assert weighed.weight("guess0") == pytest.approx(2.0)
    assert weighed.prob_below("guess0", 0.4375) == pytest.approx(plain.prob_below("guess0", 0.4375))


def test_a_worker_is_left_out_of_every_answer_they_gave_an_item() -> None:
    # Answered twice (rows from a source without the platform's one-answer rule): neither of
    # their own answers makes the item look hard to them.
    rows = _study() + [("twice", "easy0", 0.0), ("twice", "easy0", 0.0), ("twice", "easy1", 0.0)]
    weighed, _ = _both(rows)
    assert [float(s) for s in weighed.shows_["twice"][:, 1]] == [1.0, 1.0, 1.0]


def test_without_a_chance_level_the_scale_starts_at_zero() -> None:
    unlucky = [("unlucky", f"hard{g}", float(g == 0)) for g in range(8)]
    rows = _study() + unlucky
    zero = GoldConfidence().fit_items(rows)
    at_chance = GoldConfidence(chance=COMPARISON_CHANCE).fit_items(rows)
    # s = r_g / r: a hard item still counts less, if by less than against the chance level.
    assert at_chance.weight("unlucky") < zero.weight("unlucky") < 8
    # The posterior on the grid, with a random answer right with probability 0: hard misses
    # weigh less than in full, at every threshold.
    plain = GoldConfidence().fit((worker, accuracy) for worker, _, accuracy in rows)
    for threshold in (0.3, 0.4375, 0.6):
        below = zero.prob_below("unlucky", threshold)
        assert 0.5 < below < plain.prob_below("unlucky", threshold) - 0.02


def test_plain_fit_forgets_item_weights() -> None:
    model = GoldConfidence(chance=0.25).fit_items(_study() + [("w", "hard0", 0.0)])
    assert model.weight("w") < 1
    model.fit([("w", 0.0)])
    assert model.weight("w") == 1.0
    assert model.prob_below("w", 0.5) == pytest.approx(stats.beta.cdf(0.5, 1, 2))


@pytest.mark.parametrize("chance", [1.0, -0.1, 1.5])
def test_a_chance_level_outside_zero_to_one_is_refused(chance: float) -> None:
    with pytest.raises(ValueError, match="chance must be"):
        GoldConfidence(chance=chance)


def _rows(extra: list[tuple[str, str, float]]) -> list[dict[str, object]]:
    return [
        {"response_id": n, "worker": worker, "item": item, "kind": "gold", "seconds": 30.0,
         "chars_shown": 200, "surface": None, "gold_accuracy": accuracy}
        for n, (worker, item, accuracy) in enumerate(_study() + extra)
    ]  # fmt: skip


def test_the_gold_rule_weighs_difficulty_unless_the_study_says_not() -> None:
    from qc.config import parse_qc_config
    from qc.evidence import worker_evidence
    from qc.rules import evaluate, excluded_by_rule

    # Every hard item missed: 0.994 below the threshold counted in full, 0.965 weighed (the
    # gold rule asks for 0.98). Six easy ones missed: 0.982 either way.
    unlucky = [("unlucky", f"hard{g}", 0.0) for g in range(8)]
    clicker = [("clicker", f"easy{g}", 0.0) for g in range(6)]
    gold = {"threshold": COMPARISON_THRESHOLD, "chance": COMPARISON_CHANCE}
    for by_difficulty, stopped in ((True, {"clicker"}), (False, {"clicker", "unlucky"})):
        config = parse_qc_config({"gold": gold | {"by_difficulty": by_difficulty}})
        evidence = worker_evidence(_rows(unlucky + clicker), config)
        decisions = evaluate(evidence, config.rules)
        assert excluded_by_rule(decisions).get("gold_below_threshold") == stopped
        assert evidence["clicker"]["gold_weight"] == 6
        assert (evidence["unlucky"]["gold_weight"] < 6) is by_difficulty
    # The reason says what the hard items were worth: one easy miss more stops the worker.
    config = parse_qc_config({"gold": gold})
    evidence = worker_evidence(_rows([*unlucky, ("unlucky", "easy0", 0.0)]), config)
    [reason] = [d.reason for d in evaluate(evidence, config.rules) if d.worker == "unlucky"]
    assert "on 9 gold items (worth 6.2 full tests: hard items count less)" in reason
