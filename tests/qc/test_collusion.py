"""Collusion: groups that share answers or explanations, and independent workers who do not."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from qc.agreement import CrowdAgreement
from qc.collusion import Collusion
from qc.leave_out import LeaveOut
from tests.qc.test_agreement import K, crowd


def fit(answers: list[tuple[str, str, int]], ordinal: bool = False, **kwargs: Any) -> Collusion:
    """Collusion as QC runs it: with the skills and consensus of the agreement model."""
    agreement = CrowdAgreement().fit(answers)
    return Collusion(ordinal=ordinal).fit(
        answers, skills=agreement.skill_, consensus=agreement.consensus_, **kwargs
    )


def ring(rng: random.Random, truth: dict[str, int], size: int) -> list[tuple[str, str, int]]:
    """A group that copies one random answer per task."""
    answers = []
    for task in truth:
        shared = rng.randrange(K)
        answers += [(task, f"ring{n}", shared) for n in range(size)]
    return answers


def test_a_group_sharing_random_answers_is_found_whole_and_alone() -> None:
    rng = random.Random(1)
    truth, answers = crowd(rng, {f"c{n}": 0.7 for n in range(12)}, tasks=30)
    model = fit(answers + ring(rng, truth, 4))
    assert model.groups_ == [["ring0", "ring1", "ring2", "ring3"]]
    assert len(model.pairs_) == 6 and model.tested_ == 16 * 15 // 2
    pair = model.pairs_[0]
    assert pair["matches"] == 30 > 2 * pair["expected"] and pair["p_value"] < 1e-6


def test_experts_agree_because_they_are_right_and_are_not_colluders() -> None:
    rng = random.Random(2)
    workers = {f"c{n}": 0.55 for n in range(10)} | {"expert1": 0.97, "expert2": 0.97}
    _, answers = crowd(rng, workers, tasks=60)
    assert fit(answers).pairs_ == []
    # Without the skills, their agreement would be a mystery.
    assert Collusion().fit(answers).groups_ == [["expert1", "expert2"]]


def test_a_popular_wrong_answer_on_hard_items_is_no_collusion() -> None:
    rng = random.Random(4)
    answers = []
    for t in range(40):
        task, z = f"i{t}/best", t % K
        decoy = (z + 1) % K
        hard = t % 3 == 0  # a third of the items tempt half the crowd to the same wrong answer
        for n in range(12):
            if hard and rng.random() < 0.5:
                label = decoy
            else:
                label = z if rng.random() < 0.8 else rng.randrange(K)
            answers.append((task, f"c{n}", label))
    assert fit(answers).pairs_ == []


def test_identical_explanations_convict_even_with_right_answers() -> None:
    rng = random.Random(6)
    truth, answers = crowd(rng, {f"c{n}": 0.9 for n in range(8)}, tasks=30)
    texts = {(task, f"c{n}"): f"my own words {n} on {task}" for task in truth for n in range(8)}
    for task in list(truth)[:3]:
        texts[(task, "c1")] = texts[(task, "c2")] = "the same pasted explanation"
    model = fit(answers, explanations=texts)
    assert model.groups_ == [["c1", "c2"]]
    assert model.pairs_[0]["same_explanations"] == 3
    # One worker who writes the same word under every item matches nobody by it: the pair's
    # three copies stay as improbable as before.
    texts.update({(task, "c0"): "fine" for task in truth})
    assert fit(answers, explanations=texts).groups_ == [["c1", "c2"]]


def test_stock_phrases_matching_by_chance_are_no_collusion_but_a_copied_text_is() -> None:
    # 24 honest workers who write from 40 stock phrases (a third of them name the sentence
    # they flag, so people who flag the same sentence match more often): by chance, dozens of
    # pairs write the same text twice or more. Two workers who paste one text per item do too,
    # on every shared item.
    rng = random.Random(8)
    workers = {f"c{n}": 0.7 for n in range(24)}
    truth, answers = crowd(rng, workers, tasks=30)
    phrases = [f"phrase {i}" for i in range(40)]
    texts: dict[tuple[str, str], str] = {}
    for task, worker, label in answers:
        named = rng.random() < 1 / 3
        texts[(task, worker)] = f"sentence {label} is off" if named else rng.choice(phrases)
    for task in truth:
        answers += [(task, w, truth[task]) for w in ("copy1", "copy2")]
        texts[(task, "copy1")] = texts[(task, "copy2")] = f"pasted words for {task}"
    twice = sum(
        sum(texts[(t, a)] == texts[(t, b)] for t in truth) >= 2
        for a in workers for b in workers if a < b
    )  # fmt: skip
    assert twice > 50  # the old rule (two identical explanations) convicted every one
    model = fit(answers, explanations=texts)
    assert model.groups_ == [["copy1", "copy2"]]
    pair = model.pairs_[0]
    assert pair["same_explanations"] == 30 and pair["same_expected"] < 3
    assert pair["same_p_value"] < 1e-12


def test_focus_tests_only_pairs_with_the_workers_named() -> None:
    rng = random.Random(1)
    truth, answers = crowd(rng, {f"c{n}": 0.7 for n in range(10)}, tasks=30)
    model = fit(answers + ring(rng, truth, 3), focus=["ring0"])
    assert sorted(tuple(p["workers"]) for p in model.pairs_) == [
        ("ring0", "ring1"), ("ring0", "ring2")]  # fmt: skip
    assert model.groups_ == [["ring0", "ring1", "ring2"]]
    assert model.tested_ == 13 * 12 // 2  # the correction counts every pair, focus or not


def test_two_lenient_raters_agree_by_habit_and_two_copying_raters_do_not() -> None:
    rng = random.Random(9)
    answers = []
    for t in range(30):
        task, z = f"i{t}/fluency", rng.randint(1, 5)

        def rate(offset: int = 0, z: int = z) -> int:
            return min(5, max(1, z + offset + rng.choice((-1, 0, 0, 0, 1))))

        answers += [(task, f"c{n}", rate()) for n in range(8)]
        answers += [(task, w, rate(+1)) for w in ("lenient1", "lenient2")]
        copied = rng.randint(1, 5)
        answers += [(task, w, copied) for w in ("copy1", "copy2")]
    model = fit(answers, ordinal=True)
    assert model.groups_ == [["copy1", "copy2"]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"min_shared": 0}, "min_shared"), ({"alpha": 1}, "alpha"),
     ({"min_excess": "2"}, "min_excess"), ({"min_same_explanations": 0}, "min_same_explanations"),
     ({"screen_alpha": 0}, "screen_alpha"), ({"max_group": 1}, "max_group"),
     ({"copied": 1.5}, "copied"), ({"ordinal_questions": ["quality"]}, "ordinal_questions"),
     ({"alpha": "0.1"}, "alpha")],
)  # fmt: skip
def test_settings_are_checked(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Collusion(**kwargs)  # type: ignore[arg-type]


def sparse_ring(rng: random.Random, truth: dict[str, int], size: int) -> list[tuple[str, str, int]]:
    """A group that copies one random answer per task, two of its members on each task: each
    pair shares a sixth of the tasks (size 4), each member half."""
    answers = []
    for task in truth:
        shared = rng.randrange(K)
        answers += [(task, f"ring{n}", shared) for n in rng.sample(range(size), 2)]
    return answers


def test_a_ring_too_sparse_for_its_pairs_is_caught_member_by_member_against_the_rest() -> None:
    rng = random.Random(5)
    truth, answers = crowd(rng, {f"c{n}": 0.7 for n in range(10)}, tasks=42)
    model = fit(answers + sparse_ring(rng, truth, 4))
    # Each pair shares about 7 tasks: improbable, but not at the level corrected for 91 pairs.
    assert model.pairs_ == []
    # Each member against the other three (found among the others alone) shares its ~21 tasks.
    assert sorted(t["worker"] for t in model.group_tests_) == ["ring0", "ring1", "ring2", "ring3"]
    for found in model.group_tests_:
        assert found["worker"] not in found["group"] and len(found["group"]) == 3
        assert found["matches"] == found["shared"] >= 15 and found["p_value"] < 1e-8
    assert model.groups_ == [["ring0", "ring1", "ring2", "ring3"]]
    assert model.partners_["ring0"] == ["ring1", "ring2", "ring3"]


def test_careful_workers_are_not_convicted_against_any_group() -> None:
    # Hard items where careful workers err alike, as in test_a_popular_wrong_answer..., and a
    # screen loose enough to form groups among them: a worker against such a group is judged
    # by what the workers outside it say, and matches no more than chance allows.
    for seed in range(6):
        rng = random.Random(seed)
        answers = []
        for t in range(60):
            task, z = f"i{t}/best", t % K
            decoy = (z + 1) % K
            for n in rng.sample(range(20), 8):
                p = 0.6 + 0.015 * n
                label = z if rng.random() < p else decoy if rng.random() < 0.7 else rng.randrange(K)
                answers.append((task, f"c{n}", label))
        agreement = CrowdAgreement().fit(answers)
        model = Collusion(screen_alpha=0.05).fit(
            answers, skills=agreement.skill_, consensus=agreement.consensus_
        )
        assert model.group_tests_ == [] and model.partners_ == {}


def test_a_group_test_is_only_where_the_truth_has_witnesses_outside_the_group() -> None:
    # Three workers alone on every task: with nobody outside them, a match says nothing about
    # the truth, so there is nothing to test against, however alike they are.
    answers = [(f"i{t}/best", w, t % K) for t in range(30) for w in ("a", "b", "c")]
    model = Collusion().fit(answers, skills={"a": 0.9, "b": 0.9, "c": 0.9})
    assert model.group_tests_ == []
    # With the truth known (gold), the same agreement is what accurate workers give.
    truth = {f"i{t}/best": t % K for t in range(30)}
    model = Collusion().fit(answers, skills={"a": 0.9, "b": 0.9, "c": 0.9}, truth=truth)
    assert model.group_tests_ == [] and model.pairs_ == []


def test_raters_with_like_habits_are_no_ring_when_their_ratings_are_read_as_a_scale() -> None:
    # A form's 1-5 field among its categories: lenient raters say 4 where harsh ones say 3,
    # each consistently. Read as categories, raters of like habits agree far beyond the
    # one-coin model and are convicted as pairs or against groups of their likes; read as a
    # scale (offsets from the consensus, ordinal_questions), they are what they are.
    as_categories, as_scale = [], []
    for seed in range(4):
        rng = random.Random(seed)
        habit = [rng.gauss(0, 0.5) for _ in range(24)]
        answers = []
        for t in range(40):
            quality = rng.uniform(1, 5)
            for n in rng.sample(range(24), 15):
                rating = min(5, max(1, round(quality + habit[n] + rng.gauss(0, 0.2))))
                answers.append((f"i{t}/quality", f"c{n}", rating))
        agreement = CrowdAgreement().fit(answers)
        for found, questions in ((as_categories, frozenset()), (as_scale, {"quality"})):
            model = Collusion(ordinal_questions=frozenset(questions)).fit(
                answers, skills=agreement.skill_, consensus=agreement.consensus_
            )
            found += [*model.pairs_, *model.group_tests_]
    assert as_categories != [] and as_scale == []


def naive_pair_chance(given: dict[str, int], a: str, b: str, skill: dict[str, float]) -> float:
    """P(two independent workers match on a task), recomputed from the others' answers."""
    options = list(range(K))
    others = {w: x for w, x in given.items() if w not in (a, b)}
    counts = {x: 1.0 / K for x in options}
    for label in others.values():
        counts[label] += 1
    logits = []
    for z in options:
        total = 0.0
        for worker, label in others.items():
            rate = min(max(skill[worker], 1 / K), 0.98)
            total += math.log(rate if label == z else (1 - rate) / (K - 1))
        logits.append(total)
    weights = [math.exp(x - max(logits)) for x in logits]
    chance = 0.0
    for z, weight in zip(options, weights, strict=True):
        wrong = {x: c for x, c in counts.items() if x != z}
        same_wrong = sum((c / sum(wrong.values())) ** 2 for c in wrong.values())
        p_a, p_b = skill[a], skill[b]
        chance += weight / sum(weights) * (p_a * p_b + (1 - p_a) * (1 - p_b) * same_wrong)
    return chance


def test_leaving_workers_out_by_subtraction_gives_the_posterior_recomputed_without_them() -> None:
    rng = random.Random(7)
    skill = {f"w{n}": rng.uniform(0.1, 0.99) for n in range(12)}
    by_task = {
        f"i{t}/best": {w: rng.randrange(K) for w in rng.sample(sorted(skill), rng.randint(2, 12))}
        for t in range(50)
    }
    board = LeaveOut(by_task, {"best": list(range(K))}, skill, known={})
    for task, given in by_task.items():
        a, b = sorted(given)[:2]
        assert board.pair_chance(task, a, b, skill[a], skill[b]) == pytest.approx(
            naive_pair_chance(given, a, b, skill), abs=1e-12
        )
