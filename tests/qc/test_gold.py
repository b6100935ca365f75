"""Gold: Beta posteriors match scipy by hand, gold tapers for trusted workers, promotion."""

from __future__ import annotations

import pytest
from scipy import stats

from qc.config import GoldPolicy
from qc.gold import GoldConfidence, gold_rate, promote_gold


def test_posterior_counts_successes_including_fractional_ones() -> None:
    model = GoldConfidence(prior=(2.0, 3.0)).fit(
        [("a", 1.0), ("b", 0.0), ("a", 0.5), ("a", 0.0), ("a", 1.0)]
    )
    # a: alpha = 2 + 1 + 0.5 + 0 + 1, beta = 3 + 0 + 0.5 + 1 + 0
    assert model.alpha_["a"] == pytest.approx(4.5)
    assert model.beta_["a"] == pytest.approx(4.5)
    assert model.n_ == {"a": 4, "b": 1}
    assert (model.alpha_["b"], model.beta_["b"]) == (2.0, 4.0)
    assert model.mean("a") == pytest.approx(0.5)
    assert model.mean("b") == pytest.approx(2 / 6)


def test_prob_below_and_interval_are_the_beta_posterior() -> None:
    # 3 of 10 right with a uniform prior: Beta(4, 8).
    model = GoldConfidence().fit([("w", 1.0)] * 3 + [("w", 0.0)] * 7)
    assert model.prob_below("w", 0.5) == pytest.approx(stats.beta.cdf(0.5, 4, 8))
    assert model.prob_below("w", 0.5) == pytest.approx(0.88671875)  # sum of binomial terms
    low, high = model.credible_interval("w", 0.9)
    assert (low, high) == pytest.approx(stats.beta.interval(0.9, 4, 8))
    assert low < model.mean("w") < high


def test_unseen_worker_gets_the_prior() -> None:
    model = GoldConfidence(prior=(2.0, 2.0)).fit([("a", 1.0)])
    assert model.prob_below("nobody", 0.3) == pytest.approx(stats.beta.cdf(0.3, 2, 2))
    assert model.mean("nobody") == 0.5
    assert model.posterior("nobody") == (2.0, 2.0)


def test_credibly_below_needs_both_credibility_and_min_gold() -> None:
    results = (
        [("bad", 0.0)] * 5  # Beta(1, 6): P(p < 0.5) = 1 - 0.5**6 = 0.984
        + [("short", 0.0)] * 2  # Beta(1, 3): 0.875, and too few answers
        + [("good", 1.0)] * 5
        + [("meh", 1.0), ("meh", 0.0), ("meh", 0.0), ("meh", 0.0)]  # Beta(2, 4): 0.8125
    )
    model = GoldConfidence().fit(results)
    assert model.prob_below("bad", 0.5) == pytest.approx(1 - 0.5**6)
    assert model.credibly_below(0.5, 0.95, 3) == {"bad"}
    assert model.credibly_below(0.5, 0.85, 3) == {"bad"}
    assert model.credibly_below(0.5, 0.85, 2) == {"bad", "short"}
    assert model.credibly_below(0.5, 0.8, 3) == {"bad", "meh"}
    assert model.fit_predict(results, 0.5, 0.95, 3) == {"bad"}


@pytest.mark.parametrize("accuracy", [1.5, -0.1, True, "1"])
def test_accuracy_outside_the_unit_interval_is_refused(accuracy: object) -> None:
    with pytest.raises(ValueError, match=r"number in \[0, 1\]"):
        GoldConfidence().fit([("a", accuracy)])  # type: ignore[list-item]


def test_bad_prior_and_level_are_refused() -> None:
    with pytest.raises(ValueError, match="prior must be two positive numbers"):
        GoldConfidence(prior=(0.0, 1.0))
    with pytest.raises(ValueError, match="level"):
        GoldConfidence().credible_interval("a", 1.0)


def test_gold_rate_tapers_for_trusted_workers() -> None:
    policy = GoldPolicy()
    new = gold_rate(1, 1, policy)
    perfect = gold_rate(1 + 20, 1, policy)  # 20 of 20 right
    poor = gold_rate(1 + 2, 1 + 8, policy)  # 2 of 10 right
    assert new == pytest.approx(0.05 + 0.7 * 0.8)
    assert perfect == pytest.approx(0.05 + 0.7 * 0.8**21)
    assert perfect < 0.06  # near min_rate
    assert poor > 0.74  # near max_rate
    assert perfect < new < poor
    assert policy.min_rate <= perfect and poor <= policy.max_rate


def test_once_the_crowd_has_judged_a_worker_its_doubt_sets_the_gold_rate() -> None:
    policy = GoldPolicy()
    three_of_four = (1 + 3, 1 + 1)
    # Gold alone: 3 of 4 right is far from credibly above trusted (0.8), so gold stays high.
    assert gold_rate(*three_of_four, policy) > 0.5
    # The crowd vouches for the worker: real work, gold near min_rate.
    vouched = gold_rate(*three_of_four, policy, crowd_doubt=0.0)
    assert vouched == pytest.approx(0.05 + 0.7 * stats.beta.cdf(policy.threshold, 4, 2))
    assert vouched < 0.2
    # The crowd doubts them: gold near max_rate, every one a full test.
    assert gold_rate(*three_of_four, policy, crowd_doubt=0.9) == pytest.approx(0.05 + 0.7 * 0.9)
    # Poor gold keeps gold coming whatever the crowd says.
    assert gold_rate(1 + 1, 1 + 9, policy, crowd_doubt=0.0) > 0.7
    with pytest.raises(ValueError, match="crowd_doubt"):
        gold_rate(1, 1, policy, crowd_doubt=1.5)


def test_with_vouch_after_the_crowd_vouches_only_after_that_many_gold_answers() -> None:
    # A ring answering alike vouches for its members on the real items where they meet: the
    # crowd's early word must not stop gold from reaching a worker who has met almost none.
    policy = GoldPolicy(vouch_after=3)
    for right, answered in ((0, 0), (1, 1), (2, 2)):
        posterior = (1 + right, 1 + answered - right)
        alone = gold_rate(*posterior, policy)
        assert gold_rate(*posterior, policy, crowd_doubt=0.0) == pytest.approx(alone)
        assert alone > 0.4
        # A crowd that doubts the worker more than gold does still raises the rate.
        assert gold_rate(*posterior, policy, crowd_doubt=0.99) == pytest.approx(0.05 + 0.7 * 0.99)
    # The third gold answer is in: the crowd's vouching counts.
    assert gold_rate(1 + 3, 1, policy, crowd_doubt=0.0) < 0.1
    # Partly right answers count as answers too (each adds 1 to alpha + beta).
    three = (1 + 2.5, 1 + 0.5)
    assert gold_rate(*three, policy, crowd_doubt=0.0) < gold_rate(*three, policy) - 0.2
    two = (1 + 1.5, 1 + 0.5)
    assert gold_rate(*two, policy, crowd_doubt=0.0) == pytest.approx(gold_rate(*two, policy))
    # vouch_after 1: one gold answer is enough; 0 (the default): the crowd counts at once.
    one = GoldPolicy(vouch_after=1)
    assert gold_rate(2, 1, one, crowd_doubt=0.0) < gold_rate(2, 1, policy) - 0.2
    assert gold_rate(2, 1, GoldPolicy(), crowd_doubt=0.0) == pytest.approx(
        gold_rate(2, 1, one, crowd_doubt=0.0)
    )
    # 0 is the behaviour before the setting, for any posterior handed in.
    for posterior in ((1, 1), (0.5, 0.5), (3.2, 1.8)):
        old = 0.05 + 0.7 * max(0.2, stats.beta.cdf(0.5, *posterior))
        assert gold_rate(*posterior, GoldPolicy(), crowd_doubt=0.2) == pytest.approx(old)
    with pytest.raises(ValueError, match="crowd_doubt"):
        gold_rate(2, 1, policy, crowd_doubt=1.5)  # still waiting: checked all the same


def test_gold_rate_with_equal_bounds_is_constant() -> None:
    policy = GoldPolicy(min_rate=0.2, max_rate=0.2)
    assert gold_rate(1, 1, policy) == pytest.approx(0.2)
    assert gold_rate(50, 1, policy) == pytest.approx(0.2)


def test_promotion_counts_only_trusted_workers() -> None:
    trusted = {"t1", "t2", "t3", "t4"}
    answers = [
        # x: three trusted agree; the untrusted dissent does not matter.
        ("x", "t1", "A"), ("x", "t2", "A"), ("x", "t3", "A"), ("x", "u1", "B"),
        # y: only two trusted workers; untrusted agreement does not make up the third.
        ("y", "t1", "A"), ("y", "t2", "A"), ("y", "u1", "A"), ("y", "u2", "A"),
        # z: four trusted, one disagrees: share 0.75.
        ("z", "t1", "C"), ("z", "t2", "C"), ("z", "t3", "C"), ("z", "t4", "D"),
    ]  # fmt: skip
    assert promote_gold(answers, trusted) == {"x": "A"}
    assert promote_gold(answers, trusted, min_share=0.75) == {"x": "A", "z": "C"}
    assert promote_gold(answers, trusted, min_share=0.8) == {"x": "A"}
    assert promote_gold(answers, trusted, min_agreeing=2) == {"x": "A", "y": "A"}
    assert promote_gold(answers, set()) == {}


def test_promotion_needs_enough_agreeing_votes_and_no_tie() -> None:
    trusted = {"t1", "t2", "t3", "t4"}
    # Two against two: no label is the most common.
    tie = [("x", "t1", 1), ("x", "t2", 1), ("x", "t3", 0), ("x", "t4", 0)]
    assert promote_gold(tie, trusted, min_agreeing=2, min_share=0.5) == {}
    # A worker's later answer replaces the earlier one: one vote each.
    revised = [("x", "t1", 0), ("x", "t1", 1), ("x", "t2", 1), ("x", "t3", 1)]
    assert promote_gold(revised, trusted) == {"x": 1}
    repeated = [("x", "t1", 1), ("x", "t1", 1), ("x", "t1", 1)]
    assert promote_gold(repeated, trusted) == {}


def test_promotion_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="min_agreeing"):
        promote_gold([], set(), min_agreeing=0)
    with pytest.raises(ValueError, match="min_share"):
        promote_gold([], set(), min_share=0)
