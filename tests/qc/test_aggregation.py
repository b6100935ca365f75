"""Aggregation: hand-worked votes, agreement with crowd-kit, and a crowd with spammers."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import MACE, DawidSkene

from qc import aggregation as qc_aggregation
from qc.aggregation import (
    AGGREGATORS,
    DS_N_ITER,
    Aggregation,
    BradleyTerryMM,
    aggregate,
    best_of_k_pairs,
    bradley_terry_best,
    label_accuracy,
)

# crowd-kit 1.4 uses pandas features that pandas 3 deprecates; that is crowd-kit's to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crowdkit.*")

GOOD = ["w0", "w1", "w2"]
SPAMMERS = ["w3", "w4", "w5", "w6"]


def synthetic_crowd(
    n_tasks: int = 200, per_task: int | None = 5, seed: int = 0
) -> tuple[list[tuple[str, str, int]], dict[str, int]]:
    """3 classes; w0-w2 are right 85% of the time, w3-w6 answer uniformly at random."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, int]] = []
    truth: dict[str, int] = {}
    for t in range(n_tasks):
        task = f"t{t:03d}"
        truth[task] = int(rng.integers(3))
        workers = range(7) if per_task is None else rng.choice(7, per_task, replace=False)
        for w in workers:
            if w < 3:
                right = rng.random() < 0.85
                label = truth[task] if right else (truth[task] + int(rng.integers(1, 3))) % 3
            else:
                label = int(rng.integers(3))
            rows.append((task, f"w{w}", int(label)))
    return rows, truth


def frame(rows: list[tuple[str, str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


def test_the_registry_holds_the_six_methods() -> None:
    assert list(AGGREGATORS) == [
        "bradley_terry", "dawid_skene", "first_change", "mace", "majority_vote", "ordinal_mean",
    ]  # fmt: skip


def test_ordinal_mean_rounds_the_mean_half_up_and_beats_the_vote_on_noisy_ratings() -> None:
    # Two readings each side of 4 outvote nothing, but the mean lands on 4; a vote picks 5.
    rows = [("t", "a", 5), ("t", "b", 5), ("t", "c", 3), ("t", "d", 3.5), ("t", "e", 4)]
    result = aggregate("ordinal_mean", rows)
    assert result.labels == {"t": 4} and isinstance(result.labels["t"], int)
    assert aggregate("majority_vote", rows).labels == {"t": 5}
    assert result.confidence == {"t": 0.2}
    assert aggregate("ordinal_mean", [("u", "a", 2), ("u", "b", 3)]).labels == {"u": 3}
    skills = aggregate("ordinal_mean", [*rows, ("s", "a", 1), ("s", "b", 5), ("s", "c", 5)]).skills
    assert skills["a"] == 0.5 and skills["b"] == 1.0
    with pytest.raises(ValueError, match="numeric ratings"):
        aggregate("ordinal_mean", [("t", "a", "good")])


def test_majority_vote_by_hand_with_a_tie_and_int_labels() -> None:
    rows = [
        ("t1", "a", 1), ("t1", "b", 1), ("t1", "c", 0),
        ("t2", "a", 0), ("t2", "b", 0), ("t2", "c", 0),
        ("t3", "a", 2), ("t3", "b", 1),
    ]  # fmt: skip
    result = aggregate("majority_vote", rows)
    assert result.labels == {"t1": 1, "t2": 0, "t3": 1}  # t3 ties 2 vs 1: the smaller wins
    assert all(type(label) is int for label in result.labels.values())
    assert result.confidence == pytest.approx({"t1": 2 / 3, "t2": 1.0, "t3": 0.5})
    assert result.skills == pytest.approx({"a": 2 / 3, "b": 1.0, "c": 0.5})


@pytest.mark.parametrize("order", [["b", "a"], ["a", "b"]])
def test_majority_vote_ties_do_not_depend_on_answer_order(order: list[str]) -> None:
    # crowd-kit alone answers "b" for the first order and "a" for the second.
    rows = [("t", f"w{i}", label) for i, label in enumerate(order)]
    assert aggregate("majority_vote", rows).labels == {"t": "a"}


@pytest.mark.parametrize("order", [["x", 1], [1, "x"]])
def test_a_tie_between_incomparable_labels_falls_back_to_repr_order(order: list[Any]) -> None:
    rows = [("t", f"w{i}", label) for i, label in enumerate(order)]
    assert aggregate("majority_vote", rows).labels == {"t": "x"}  # repr "'x'" < "1"


@pytest.mark.parametrize("method", ["majority_vote", "dawid_skene", "mace"])
def test_a_dataframe_with_numpy_ints_gives_python_ints(method: str) -> None:
    df = frame([("t1", "a", 3), ("t1", "b", 3), ("t2", "a", 5), ("t2", "b", 5)])
    assert df["label"].dtype == np.int64
    result = aggregate(method, df)
    assert result.labels == {"t1": 3, "t2": 5}
    assert all(type(label) is int for label in result.labels.values())
    assert all(type(task) is str for task in result.labels)


@pytest.mark.parametrize("method", ["majority_vote", "dawid_skene"])
def test_string_labels_come_back_as_str(method: str) -> None:
    rows = [("t1", "a", "cat"), ("t1", "b", "cat"), ("t2", "a", "dog"), ("t2", "b", "dog")]
    result = aggregate(method, rows)
    assert result.labels == {"t1": "cat", "t2": "dog"}
    assert all(type(label) is str for label in result.labels.values())


def test_dawid_skene_equals_crowd_kit_on_the_same_frame() -> None:
    rows, _ = synthetic_crowd()
    df = frame(rows)
    expected = DawidSkene(n_iter=DS_N_ITER).fit(df)
    assert expected.probas_ is not None and expected.labels_ is not None
    result = aggregate("dawid_skene", df)
    assert len(result.labels) == 200
    assert result.labels == expected.labels_.to_dict()
    assert result.confidence == pytest.approx(expected.probas_.max(axis=1).to_dict())


def test_crowd_kits_seeded_mace_restarts_repeat_one_another() -> None:
    """Why MACE_N_RESTARTS is 1: with an integer seed, crowd-kit starts every restart from
    the same point, so ten restarts end where one does. Should a crowd-kit release draw
    each restart anew, this fails, and restarts are worth their time again."""
    rows, _ = synthetic_crowd(n_tasks=30)
    df = frame(rows).sort_values(["worker", "label", "task"], ignore_index=True)
    one = MACE(n_restarts=1, n_iter=qc_aggregation.MACE_N_ITER, random_state=0).fit(df)
    three = MACE(n_restarts=3, n_iter=qc_aggregation.MACE_N_ITER, random_state=0).fit(df)
    assert one.probas_ is not None and three.probas_ is not None
    assert (one.probas_.to_numpy() == three.probas_.to_numpy()).all()
    assert (one.spamming_ == three.spamming_).all()


def test_mace_equals_crowd_kit_on_the_same_frame() -> None:
    rows, _ = synthetic_crowd(n_tasks=60)
    # Sorted so that workers and labels first appear in sorted order: there crowd-kit's MACE
    # indexes its strategy counts correctly, and our canonical order is the frame's own.
    df = frame(rows).sort_values(["worker", "label", "task"], ignore_index=True)
    expected = MACE(
        n_restarts=qc_aggregation.MACE_N_RESTARTS,
        n_iter=qc_aggregation.MACE_N_ITER,
        random_state=0,
    ).fit(df)
    assert expected.probas_ is not None and expected.labels_ is not None
    result = aggregate("mace", df, seed=0)
    assert result.labels == expected.labels_.to_dict()
    assert result.confidence == pytest.approx(expected.probas_.max(axis=1).to_dict())
    competence = expected.spamming_[:, 1] / expected.spamming_.sum(axis=1)
    workers = pd.factorize(df["worker"])[1]
    assert result.skills == pytest.approx(dict(zip(workers, competence, strict=True)))


def test_mace_does_not_depend_on_the_order_of_answers() -> None:
    rows, _ = synthetic_crowd(n_tasks=60)
    shuffled = [rows[i] for i in np.random.default_rng(7).permutation(len(rows))]
    first, second = aggregate("mace", rows), aggregate("mace", shuffled)
    assert first.labels == second.labels
    assert first.skills == pytest.approx(second.skills)


@pytest.mark.parametrize("per_task", [5, None])
def test_dawid_skene_beats_majority_vote_on_a_crowd_with_spammers(per_task: int | None) -> None:
    rows, truth = synthetic_crowd(per_task=per_task)
    mv = aggregate("majority_vote", rows)
    ds = aggregate("dawid_skene", rows)
    mv_accuracy, ds_accuracy = label_accuracy(mv.labels, truth), label_accuracy(ds.labels, truth)
    assert mv_accuracy is not None and ds_accuracy is not None
    assert ds_accuracy > mv_accuracy
    assert ds_accuracy > 0.85
    assert min(ds.skills[w] for w in GOOD) > max(ds.skills[w] for w in SPAMMERS)
    for skill in ds.skills.values():
        assert 0.0 <= skill <= 1.0


@pytest.mark.slow
def test_mace_skills_separate_good_workers_from_spammers() -> None:
    rows, truth = synthetic_crowd()
    mace = aggregate("mace", rows, seed=0)
    assert min(mace.skills[w] for w in GOOD) > 0.6
    assert max(mace.skills[w] for w in SPAMMERS) < 0.2
    accuracy = label_accuracy(mace.labels, truth)
    assert accuracy is not None and accuracy > 0.85


def test_best_of_k_pairs_by_hand() -> None:
    pairs = best_of_k_pairs([("x", "w1", 3, 2), ("y", "w2", 2, 0)])
    assert pairs == [
        ("w1", "x#2", "x#0", "x#2"),
        ("w1", "x#2", "x#1", "x#2"),
        ("w2", "y#0", "y#1", "y#0"),
    ]


def test_bradley_terry_best_picks_the_majority_choice() -> None:
    choices = [
        ("x", "w1", 4, 2), ("x", "w2", 4, 2), ("x", "w3", 4, 2), ("x", "w4", 4, 0),
        ("y", "w1", 2, 1), ("y", "w2", 2, 1),
    ]  # fmt: skip
    result = bradley_terry_best(choices)
    assert result.labels == {"x": 2, "y": 1}
    assert all(type(label) is int for label in result.labels.values())
    # x#2 beat x#0 three times to one and x#1, x#3 never won: its Luce share is 3 / (3 + 1).
    assert result.confidence == pytest.approx({"x": 0.75, "y": 1.0}, abs=1e-3)
    assert result.skills == {"w1": 1.0, "w2": 1.0, "w3": 1.0, "w4": 0.0}


COMPARISONS = (
    [("u", "a", "b", "a")] * 3
    + [("u", "a", "b", "b")]
    + [("v", "b", "c", "b")] * 2
    + [("v", "b", "c", "c")] * 2
    + [("u", "a", "c", "c")]
    + [("u", "a", "c", "a")] * 2
)


def test_bradley_terry_reaches_the_maximum_likelihood() -> None:
    df = pd.DataFrame(COMPARISONS, columns=["worker", "left", "right", "label"])
    p = BradleyTerryMM(n_iter=1000, tol=1e-10).fit_predict(df)
    wins = {"a": 5, "b": 3, "c": 3}
    games = {("a", "b"): 4, ("b", "c"): 4, ("a", "c"): 3}
    # At the optimum each item's expected wins equal its observed wins (Hunter 2004, eq. 3).
    for item, won in wins.items():
        expected = sum(n * p[item] / (p[i] + p[j]) for (i, j), n in games.items() if item in (i, j))
        assert expected == pytest.approx(won, rel=1e-6)


def test_bradley_terry_ranks_items_and_scores_workers() -> None:
    result = aggregate("bradley_terry", COMPARISONS)
    assert result.labels == {"a": 1, "c": 2, "b": 3}
    assert sum(result.confidence.values()) == pytest.approx(1.0)
    assert result.confidence["a"] > result.confidence["c"] > result.confidence["b"]
    # u: a>b x3 agree, b>a disagrees, c>a disagrees, a>c x2 agree; v: b>c x2 no, c>b x2 yes.
    assert result.skills == pytest.approx({"u": 5 / 7, "v": 0.5})
    df = pd.DataFrame(COMPARISONS, columns=["worker", "left", "right", "label"])
    assert aggregate("bradley_terry", df) == result


def test_label_accuracy() -> None:
    assert label_accuracy({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 0, "z": 9}) == 0.5
    assert label_accuracy({"a": 1}, {"b": 1}) is None


@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("majority_vote", [("t1", "a", 1), ("t1", "b", 0), ("t2", "a", 1)]),
        ("dawid_skene", [("t1", "a", "x"), ("t1", "b", "y"), ("t2", "a", "y")]),
        ("mace", [("t1", "a", True), ("t1", "b", False), ("t2", "a", True)]),
        ("bradley_terry", COMPARISONS),
    ],
)
def test_to_json_is_plain_json(method: str, data: list[tuple[Any, ...]]) -> None:
    result = aggregate(method, data)
    payload = json.loads(json.dumps(result.to_json()))
    assert payload["method"] == method
    assert payload["n_tasks"] == len(result.labels)
    assert payload["n_workers"] == len(result.skills)
    assert set(payload) == {"method", "n_tasks", "n_workers", "labels", "confidence", "skills"}
    assert all(0.0 <= p <= 1.0 for p in payload["confidence"].values())


def test_best_of_k_to_json_is_plain_json() -> None:
    result = bradley_terry_best([("x", "w1", 3, 1), ("x", "w2", 3, 1)])
    assert isinstance(result, Aggregation)
    assert json.loads(json.dumps(result.to_json()))["labels"] == {"x": 1}


@pytest.mark.parametrize(
    ("method", "data", "message"),
    [
        ("nope", [("t", "w", 1)], "first_change, mace, majority_vote, ordinal_mean"),
        ("majority_vote", [], "no answers"),
        ("dawid_skene", frame([]), "no answers"),
        ("mace", [("t", "w", None)], "gave no label"),
        ("majority_vote", frame([("t", "w", 1.0), ("t", "v", math.nan)]), "gave no label"),
        ("majority_vote", [(None, "w", 1)], "lacks a task"),
        ("majority_vote", [("t1", "w", 1), ("t1", "w", 2)], "'w' labelled task 't1' twice"),
        ("majority_vote", [("t1", "w")], "(task, worker, label)"),
        ("majority_vote", pd.DataFrame({"task": ["t"], "label": [1]}), "lacks columns"),
        ("majority_vote", [("t", "w", [1])], "unhashable"),
        ("bradley_terry", [], "no comparisons"),
        ("bradley_terry", [("w", "a", "b", "c")], "winner must be left or right"),
        ("bradley_terry", [("w", "a", "a", "a")], "must differ"),
    ],
)
def test_bad_input_raises_a_helpful_value_error(method: str, data: Any, message: str) -> None:
    with pytest.raises(ValueError) as error:
        aggregate(method, data)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        ([("x", "w", 1, 0)], "k >= 2"),
        ([("x", "w", 3, 3)], "not in 0..2"),
        ([("x", "w", 3, -1)], "not in 0..2"),
        ([("x", "w", "3", 1)], "integers"),
        ([(None, "w", 3, 1)], "lacks an item"),
        ([("x", "w", 3)], "(item, worker, k, best)"),
        ([("x", "w1", 3, 1), ("x", "w2", 4, 1)], "k=3 and k=4"),
        ([("x", "w", 3, 1), ("x", "w", 3, 2)], "chose twice"),
        ([], "no choices"),
    ],
)
def test_bad_choices_raise_a_helpful_value_error(
    choices: list[tuple[Any, ...]], message: str
) -> None:
    with pytest.raises(ValueError) as error:
        bradley_terry_best(choices)
    assert message in str(error.value)


def sequential_crowd(seed: int, tasks: int = 150, length: int = 10) -> tuple[list, dict]:
    """Readers who call the first changed position: careful, sloppy and random readers."""
    rng = np.random.default_rng(seed)
    kinds = {"c1": (0.04, 0.4), "c2": (0.04, 0.4), "c3": (0.05, 0.5), "n1": (0.2, 0.3),
             "n2": (0.2, 0.3), "r1": (0.25, 0.25)}  # fmt: skip
    truth, rows = {}, []
    for t in range(tasks):
        boundary = int(rng.integers(1, length + 1))
        truth[f"t{t}"] = boundary
        for worker in rng.choice(list(kinds), size=4, replace=False):
            false_alarm, detect = kinds[str(worker)]
            guess = length
            for position in range(1, length):
                chance = detect if position >= boundary else false_alarm
                if rng.random() < chance:
                    guess = position
                    break
            rows.append((f"t{t}", str(worker), guess))
    return rows, truth


def test_first_change_beats_the_vote_on_readers_who_call_the_first_change() -> None:
    for seed in range(3):
        rows, truth = sequential_crowd(seed)
        fitted = aggregate("first_change", rows)
        vote = label_accuracy(aggregate("majority_vote", rows).labels, truth)
        mine = label_accuracy(fitted.labels, truth)
        assert vote is not None and mine is not None and mine > vote + 0.05, (seed, mine, vote)
        # Careful readers are the most skilled, the random reader the least.
        assert min(fitted.skills[w] for w in ("c1", "c2", "c3")) > fitted.skills["r1"]
        assert all(isinstance(label, int) for label in fitted.labels.values())


def test_first_change_by_hand_and_its_errors() -> None:
    # Two readers agree on 3; a third called 5 late: late calls are what detection explains.
    rows = [("t", "a", 3), ("t", "b", 3), ("t", "c", 5)]
    result = aggregate("first_change", rows)
    assert result.labels == {"t": 3} and 0 < result.confidence["t"] <= 1
    with pytest.raises(ValueError, match="positions 1, 2"):
        aggregate("first_change", [("t", "a", 0)])
    with pytest.raises(ValueError, match="positions 1, 2"):
        aggregate("first_change", [("t", "a", "3")])
