"""Agreement with the crowd: the leave-one-out posterior of the truth, the accuracy posterior
it gives each worker, the chance level, robustness to a group answering alike, and drift."""

from __future__ import annotations

import random

import numpy as np
import pytest

from qc.agreement import CrowdAgreement

K = 4


def crowd(
    rng: random.Random, accuracy: dict[str, float], tasks: int = 40
) -> tuple[dict[str, int], list[tuple[str, str, int]]]:
    """Workers answering K-way tasks right with their accuracy, else with another label."""
    truth = {f"i{t}/best": rng.randrange(K) for t in range(tasks)}
    answers = [
        (task, worker, z if rng.random() < p else (z + 1 + rng.randrange(K - 1)) % K)
        for task, z in truth.items()
        for worker, p in accuracy.items()
    ]
    return truth, answers


def test_a_random_clicker_is_credibly_below_the_crowd_and_careful_workers_are_not() -> None:
    rng = random.Random(3)
    accuracy = {f"careful{n}": 0.75 for n in range(10)} | {"random": 0.25}
    truth, answers = crowd(rng, accuracy)
    model = CrowdAgreement().fit(answers)
    right: dict[str, list[bool]] = {}
    for task, worker, label in answers:
        right.setdefault(worker, []).append(label == truth[task])
    # The estimate follows each worker's accuracy on these very tasks, which the model never
    # saw, drawn towards the crowd's (the prior is the crowd's accuracies): never farther from
    # the worker's true accuracy than their luck on these tasks.
    for worker, hits in right.items():
        observed = sum(hits) / len(hits)
        assert model.agreement_[worker] == pytest.approx(observed, abs=0.05)
        assert (
            abs(model.agreement_[worker] - accuracy[worker])
            <= abs(observed - accuracy[worker]) + 0.02
        )
    assert model.chance_["random"] == pytest.approx(1 / K)
    assert model.prob_below("random", model.threshold("random")) > 0.99
    for n in range(10):
        worker = f"careful{n}"
        assert model.prob_below(worker, model.threshold(worker)) < 0.05
    # The crowd's level is the careful workers' (the random clicker weighs nothing in it).
    assert model.crowd_ == pytest.approx(0.75, abs=0.05)
    assert model.skill_["random"] < 0.4 < 0.6 < model.skill_["careful0"]


def test_the_prior_is_the_crowds_own_so_a_clustered_crowd_judges_sooner() -> None:
    # Twelve tasks with known answers (gold) for everyone: careful workers and guessers.
    rng = random.Random(5)
    truth = {f"g{t}/best": rng.randrange(K) for t in range(12)}

    def answers(accuracy: dict[str, float]) -> list[tuple[str, str, int]]:
        return [
            (task, worker, z if rng.random() < p else (z + 1 + rng.randrange(K - 1)) % K)
            for task, z in truth.items()
            for worker, p in accuracy.items()
        ]

    careful = {f"careful{n}": 0.8 for n in range(16)}
    guessers = {f"guess{n}": 0.25 for n in range(16)}
    half_bad = CrowdAgreement().fit(answers(careful | guessers), truth)
    # The prior has the crowd's two clusters and little between them.
    prior = half_bad.prior_
    grid = (np.arange(len(prior)) + 0.5) / len(prior)
    assert prior[grid < 0.45].sum() > 0.35 and prior[grid > 0.6].sum() > 0.35
    assert prior[(grid > 0.45) & (grid < 0.6)].sum() < 0.1
    # Twelve answers then say which cluster a worker is in.
    for worker in guessers:
        assert half_bad.prob_below(worker, half_bad.threshold(worker)) > 0.95, worker
    doubts = sorted(half_bad.prob_below(w, half_bad.threshold(w)) for w in careful)
    assert doubts[-1] < 0.5 and doubts[len(doubts) // 2] < 0.01, doubts
    # The same worker's answers weigh less where nobody else guesses: the prior is the crowd's.
    lone = answers({"guess0": 0.25})
    alone = CrowdAgreement().fit(answers(careful) + lone, truth)
    with_others = CrowdAgreement().fit(answers(careful | guessers) + lone, truth)
    # (lone's answers replace guess0's: a worker's last answer to a task counts)
    assert alone.prob_below("guess0", alone.threshold("guess0")) < with_others.prob_below(
        "guess0", with_others.threshold("guess0")
    )


def test_a_worker_never_agrees_with_themselves_and_known_answers_judge_alone() -> None:
    answers = [(f"i{t}/q", w, t % 3) for t in range(6) for w in "bcd"]
    answers += [(f"i{t}/q", "a", (t + 1) % 3) for t in range(6)]
    model = CrowdAgreement(min_others=2).fit(answers)
    # Judged by the others only: b, c and d agree with one another, a with nobody.
    assert model.agreement_["a"] < 0.15 < 0.85 < model.agreement_["b"]
    # A task needs more than min_others answers to judge anyone, unless its truth is known.
    assert CrowdAgreement(min_others=4).fit(answers).n_ == {}
    gold = CrowdAgreement(min_others=4).fit(answers, truth={"i1/q": 2})
    assert gold.n_ == {"a": 1, "b": 1, "c": 1, "d": 1}
    assert gold.real_n_ == {"a": 0, "b": 0, "c": 0, "d": 0}
    assert gold.prob_below("a", 0.5) < gold.prob_below("b", 0.5)
    # Known and real tasks together: real_n_ counts the real ones only.
    both = CrowdAgreement(min_others=2).fit(answers, truth={"i1/q": 2, "i4/q": 1})
    assert both.n_["a"] == 6 and both.real_n_["a"] == 4


def test_the_items_judged_count_each_items_questions_once() -> None:
    # Six items of two questions; a answers both questions of the first three only.
    answers = [(f"i{t}/{q}", w, t % 3) for t in range(6) for q in ("rating", "verdict")
               for w in "bcd"]  # fmt: skip
    answers += [(f"i{t}/{q}", "a", 0) for t in range(3) for q in ("rating", "verdict")]
    model = CrowdAgreement(min_others=2).fit(answers)
    assert model.n_["a"] == 6 and model.items_["a"] == 3
    assert model.n_["b"] == 12 and model.items_["b"] == 6


def test_a_task_the_others_leave_open_says_nothing() -> None:
    # The others split evenly on every task, each for either side as often: no label is more
    # likely than another.
    answers = [(f"i{t}/q", f"w{n}", (n + t) % 2) for t in range(20) for n in range(4)]
    answers += [(f"i{t}/q", "x", 0) for t in range(20)]
    model = CrowdAgreement().fit(answers)
    assert model.prob_below("x", 0.5) == pytest.approx(0.5, abs=0.1)


def test_a_group_copying_one_answer_does_not_drag_careful_workers_down() -> None:
    rng = random.Random(5)
    truth, answers = crowd(rng, {f"careful{n}": 0.8 for n in range(10)})
    for task in truth:
        shared = rng.randrange(K)
        answers += [(task, f"ring{n}", shared) for n in range(4)]
    model = CrowdAgreement().fit(answers)
    careful = [model.agreement_[f"careful{n}"] for n in range(10)]
    ring = [model.agreement_[f"ring{n}"] for n in range(4)]
    assert min(careful) > 0.6 > 0.4 > max(ring)
    assert all(model.prob_below(f"careful{n}", model.threshold(f"careful{n}")) < 0.05
               for n in range(10))  # fmt: skip


def test_a_gold_item_readers_get_wrong_says_little_about_who_else_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A known answer tests a worker as far as readers get it right: on an item most readers
    miss, a miss is what a reader does too. A careful worker who missed the hard gold (as
    readers mostly do) and one easy item is not called below the crowd, as they are when
    every known answer counts in full; and a guesser, who misses the easy items too, is
    called below it more surely."""
    rng = random.Random(8)
    truth = {f"g{t}/best": rng.randrange(K) for t in range(20)}
    hard = set(list(truth)[:12])  # readers right 3 times in 10; on the rest 9 in 10

    def wrong(z: int) -> int:
        return (z + 1 + rng.randrange(K - 1)) % K

    answers = [
        (task, f"c{n}", z if rng.random() < (0.3 if task in hard else 0.9) else wrong(z))
        for task, z in truth.items()
        for n in range(14)
    ]
    missed = hard | {list(truth)[12]}
    answers += [(task, "unlucky", wrong(z) if task in missed else z) for task, z in truth.items()]
    answers += [(task, "guesser", rng.randrange(K)) for task in truth]

    def below(model: CrowdAgreement, worker: str) -> float:
        return model.prob_below(worker, model.threshold(worker))

    model = CrowdAgreement().fit(answers, truth)
    monkeypatch.setattr("qc.agreement.DIFFICULTY_PRIOR", 1e12)  # every known answer in full
    blind = CrowdAgreement().fit(answers, truth)
    assert below(blind, "unlucky") > 0.5
    assert below(model, "unlucky") < 0.35
    assert below(model, "guesser") > max(0.95, below(blind, "guesser"))
    # An item no reader gets right says nothing: the guesser's posterior is the same without it.
    monkeypatch.setattr("qc.agreement.DIFFICULTY_PRIOR", 3.0)
    first = "g0/best"
    rest = [a for a in answers if a[0] != first]
    none_right = [(t, w, wrong(truth[t]) if w.startswith("c") else x)
                  for t, w, x in answers if t == first]  # fmt: skip
    with_it = CrowdAgreement().fit(rest + none_right, truth)
    without = CrowdAgreement().fit(rest, truth)
    assert with_it.agreement_["guesser"] == pytest.approx(without.agreement_["guesser"], abs=0.02)


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
    [({"min_others": 0}, "min_others"), ({"window": 0}, "window"), ({"margin": 1.5}, "margin")],
)
def test_settings_are_checked(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CrowdAgreement(**kwargs)  # type: ignore[arg-type]


def test_tasks_where_every_label_given_counts_as_right_judge_nobody() -> None:
    # Ratings of which only 3 and 4 have been given: within one of each other, every one is
    # right, so those tasks say nothing (a chance level of 1 would put the threshold at 1 and
    # every such worker credibly below it). Once 1 and 5 are given elsewhere, they judge.
    answers = [(f"t{i}/q", w, 3 + n % 2) for i in range(12) for n, w in enumerate("abc")]
    model = CrowdAgreement(tolerance=1).fit(answers)
    assert model.n_ == {}
    answers += [(f"u{i}/q", w, 1 if w == "d" else 5) for i in range(12) for w in "abcd"]
    model = CrowdAgreement(tolerance=1).fit(answers)
    assert model.n_ == {"a": 24, "b": 24, "c": 24, "d": 12}
    assert all(np.isfinite(model.stopped_reading(w).prob) for w in "abcd")
    assert model.prob_below("d", model.threshold("d")) > 0.9
    assert model.prob_below("a", model.threshold("a")) < 0.5


def test_real_tasks_weighed_by_difficulty_spare_careful_readers_and_find_guessers_sooner() -> None:
    """With real_difficulty, a real task readers split on tests less and one they all agree on
    more (qc.agreement `_Question.weigh_real`): careful readers, who miss the hard tasks, are
    doubted less, and a guesser, who misses the easy ones too, is found in fewer answers."""
    rng = random.Random(11)
    tasks = [f"i{t}/best" for t in range(40)]
    truth = {task: rng.randrange(K) for task in tasks}
    hard = set(tasks[::2])  # readers right 4 times in 10 there; 19 in 20 on the rest

    def answer(task: str, p: float) -> int:
        z = truth[task]
        return z if rng.random() < p else (z + 1 + rng.randrange(K - 1)) % K

    answers = [(task, f"careful{n}", answer(task, 0.4 if task in hard else 0.95))
               for task in tasks for n in range(12)]  # fmt: skip
    answers += [(task, "guess", answer(task, 0.25)) for task in tasks[:12]]
    plain = CrowdAgreement().fit(answers)
    weighed = CrowdAgreement(real_difficulty=True).fit(answers)

    def doubt(model: CrowdAgreement, worker: str) -> float:
        return model.prob_below(worker, model.threshold(worker))

    careful = [f"careful{n}" for n in range(12)]
    assert max(doubt(weighed, w) for w in careful) < max(doubt(plain, w) for w in careful)
    assert doubt(weighed, "guess") > doubt(plain, "guess")
    assert doubt(weighed, "guess") > 0.99
    # Off by default: the same as before the option.
    assert CrowdAgreement().real_difficulty is False


def test_a_guess_cannot_make_its_own_task_look_hard() -> None:
    """A task's difficulty comes from how often the *other* answers agree: whichever label a
    worker gives, the task weighs the same for them (only whether it is right differs)."""
    # Five readers agree on the even tasks and split on the odd ones.
    answers = [(f"i{t}/q", f"w{n}", t % 4 if t % 2 == 0 else (t + n) % 4)
               for t in range(8) for n in range(5)]  # fmt: skip

    def weight(label: int) -> float:
        """s for x's answer to i0: how far weighing moved its evidence from chance."""
        given = [*answers, ("i0/q", "x", label)]
        plain = CrowdAgreement().fit(given)._evidence["x"][0]
        weighed = CrowdAgreement(real_difficulty=True).fit(given)._evidence["x"][0]
        assert weighed[1] == plain[1]  # the same chance level
        return float((weighed[0] - plain[1]) / (plain[0] - plain[1]))

    # x's label moves it only through the question's overall level and the readers' skills
    # (a few per cent); counted in i0's own pairs, a dissent would cut i0's agreement by a third.
    assert weight(1) == pytest.approx(weight(0), rel=0.05)
    assert weight(2) == pytest.approx(weight(0), rel=0.05)
    assert weight(0) > 1  # the readers all agree there: a sharper test than a typical task
