"""Agreement with the crowd: chance levels, leave-one-out consensus, skill weights, drift."""

from __future__ import annotations

import random

import pytest

from qc.agreement import CrowdAgreement

K = 4


def crowd(
    rng: random.Random, accuracy: dict[str, float], tasks: int = 40
) -> tuple[dict[str, int], list[tuple[str, str, int]]]:
    """Workers answering K-way tasks right with their accuracy, else uniformly."""
    truth = {f"i{t}/best": rng.randrange(K) for t in range(tasks)}
    answers = [
        (task, worker, z if rng.random() < p else rng.randrange(K))
        for task, z in truth.items()
        for worker, p in accuracy.items()
    ]
    return truth, answers


def test_a_random_clicker_is_credibly_below_the_crowd_and_careful_workers_are_not() -> None:
    rng = random.Random(3)
    accuracy = {f"careful{n}": 0.75 for n in range(10)} | {"random": 0.0}
    _, answers = crowd(rng, accuracy)
    model = CrowdAgreement().fit(answers)
    assert model.chance_["random"] == pytest.approx(1 / K, abs=0.01)
    assert model.agreement_["random"] == pytest.approx(0.25, abs=0.1)
    assert model.prob_below("random", model.threshold("random")) > 0.99
    for n in range(10):
        worker = f"careful{n}"
        assert model.agreement_[worker] > 0.5
        assert model.prob_below(worker, model.threshold(worker)) < 0.2
    # The crowd's level is the careful workers' (the random clicker weighs nothing in it).
    assert model.crowd_ == pytest.approx(0.8, abs=0.1)
    assert model.skill_["random"] < 0.4 < 0.6 < model.skill_["careful0"]


def test_a_worker_never_agrees_with_themselves() -> None:
    answers = [(f"i{t}/q", w, t % 3) for t in range(6) for w in "bcd"]
    answers += [(f"i{t}/q", "a", (t + 1) % 3) for t in range(6)]
    model = CrowdAgreement(min_others=2).fit(answers)
    # Judged by the others only: b, c and d agree with one another, a with nobody.
    assert model.agreement_["a"] < 0.1 < 0.9 < model.agreement_["b"]
    # A task needs more than min_others answers to judge anyone, unless its truth is known.
    assert CrowdAgreement(min_others=4).fit(answers).n_ == {}
    gold = CrowdAgreement(min_others=4).fit(answers, truth={"i1/q": 2})
    assert gold.agreement_ == {"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0}


def test_ordinal_agreement_counts_one_step_off_and_its_chance_follows() -> None:
    answers = [(f"i{t}/fluency", w, 3) for t in range(5) for w in "abc"]
    answers += [(f"i{t}/fluency", "d", 4) for t in range(5)]
    answers += [(f"i{t}/fluency", "e", 1) for t in range(5)]
    model = CrowdAgreement(tolerance=1, labels={"fluency": [1, 2, 3, 4, 5]}).fit(answers)
    assert model.agreement_["d"] > 0.9  # 4 is within one of the others' 3
    assert model.agreement_["e"] < 0.1
    # A uniform rating is within one of 3 for 2, 3 and 4: three of five labels.
    assert model.chance_["e"] == pytest.approx(3 / 5, abs=0.05)
    with pytest.raises(ValueError, match="not a number"):
        CrowdAgreement(tolerance=1).fit([("i/q", "a", "good")])


def test_a_group_copying_one_answer_does_not_drag_careful_workers_down() -> None:
    rng = random.Random(5)
    truth, answers = crowd(rng, {f"careful{n}": 0.8 for n in range(10)})
    for task in truth:
        shared = rng.randrange(K)
        answers += [(task, f"ring{n}", shared) for n in range(4)]
    model = CrowdAgreement().fit(answers)
    careful = [model.agreement_[f"careful{n}"] for n in range(10)]
    ring = [model.agreement_[f"ring{n}"] for n in range(4)]
    assert min(careful) > 0.7 > 0.4 > max(ring)
    assert all(model.prob_below(f"careful{n}", model.threshold(f"careful{n}")) < 0.05
               for n in range(10))  # fmt: skip


def test_the_recent_window_shows_a_worker_who_stopped_reading() -> None:
    rng = random.Random(7)
    truth = {f"i{t}/best": rng.randrange(K) for t in range(40)}
    answers = []
    for t, (task, z) in enumerate(truth.items()):
        answers += [(task, f"careful{n}", z if rng.random() < 0.8 else rng.randrange(K))
                    for n in range(8)]  # fmt: skip
        answers.append((task, "drifter", z if t < 28 else (z + 1 + rng.randrange(K - 1)) % K))
    model = CrowdAgreement(window=10).fit(answers)
    threshold = model.threshold("drifter")
    assert model.recent("drifter")[1] == 10
    assert model.prob_below("drifter", threshold, recent=True) > 0.99
    assert model.prob_below("drifter", threshold) < 0.5  # the whole record still looks fine
    assert model.prob_below("careful0", model.threshold("careful0"), recent=True) < 0.5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"tolerance": -1}, "tolerance"), ({"min_others": 0}, "min_others"),
     ({"window": 0}, "window"), ({"margin": 1.5}, "margin")],
)  # fmt: skip
def test_settings_are_checked(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CrowdAgreement(**kwargs)  # type: ignore[arg-type]
