"""The coded aggregators against what they replace: crowd-kit's DawidSkene and MajorityVote
on boundary-like crowds (ten labels, sparse answers), and the first-change model as it was
written answer by answer; coded columns give what rows give."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import DawidSkene, MajorityVote

from qc.aggregation import DS_N_ITER, FIRST_CHANGE_N_ITER, aggregate
from qc.coded import Coded, dawid_skene

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crowdkit.*")


def boundary_crowd(
    n_tasks: int, per_task: int, n_workers: int, seed: int
) -> list[tuple[str, str, int]]:
    """Guesses 1..10: readers call the boundary or a sentence or two late, guessers anywhere."""
    rng = np.random.default_rng(seed)
    skill = rng.uniform(0.1, 0.95, n_workers)
    rows = []
    for t in range(n_tasks):
        boundary = int(rng.integers(1, 11))
        for w in rng.choice(n_workers, per_task, replace=False):
            if rng.random() < skill[w]:
                guess = min(10, boundary + int(rng.choice([0, 0, 0, 1, 2])))
            else:
                guess = int(rng.integers(1, 11))
            rows.append((f"t{t}", f"w{w}", guess))
    return rows


def as_frame(rows: list[tuple[str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dawid_skene_is_crowd_kits(seed: int) -> None:
    rows = boundary_crowd(n_tasks=150, per_task=5, n_workers=25, seed=seed)
    expected = DawidSkene(n_iter=DS_N_ITER).fit(as_frame(rows))
    assert expected.probas_ is not None and expected.labels_ is not None
    assert expected.priors_ is not None and expected.errors_ is not None
    fit = dawid_skene(Coded.from_rows(rows), DS_N_ITER)
    assert fit.iterations == len(expected.loss_history_)
    coded = Coded.from_rows(rows)
    probas = expected.probas_.loc[coded.tasks, coded.labels].to_numpy()
    assert fit.probas == pytest.approx(probas, abs=1e-9)
    assert fit.priors == pytest.approx(expected.priors_.loc[coded.labels].to_numpy(), abs=1e-9)
    result = aggregate("dawid_skene", rows)
    assert result.labels == expected.labels_.to_dict()
    skills = dict.fromkeys(coded.workers, 0.0)
    for (worker, observed), row in expected.errors_.iterrows():
        skills[worker] += float(expected.priors_[observed] * row[observed])
    assert result.skills == pytest.approx(skills, abs=1e-9)


def test_majority_vote_is_crowd_kits_with_ties_to_the_smallest_label() -> None:
    rows = boundary_crowd(n_tasks=300, per_task=3, n_workers=20, seed=4)
    probas = MajorityVote().fit(as_frame(rows)).probas_
    assert probas is not None
    result = aggregate("majority_vote", rows)
    ties = 0
    for task, row in probas.iterrows():
        top = row.max()
        ties += int((row == top).sum() > 1)
        assert result.confidence[task] == pytest.approx(top)
        assert result.labels[task] == min(label for label, p in row.items() if p == top)
    assert ties > 10


def first_change_by_answers(rows: list[tuple[str, str, int]]) -> dict[str, int]:
    """The first-change EM as it was first written, one answer a row (the reference)."""
    tasks = list(dict.fromkeys(t for t, _, _ in rows))
    workers = list(dict.fromkeys(w for _, w, _ in rows))
    t_of = np.array([tasks.index(t) for t, _, _ in rows])
    w_of = np.array([workers.index(w) for _, w, _ in rows])
    size = max(x for _, _, x in rows)
    g = np.array([x for _, _, x in rows], dtype=float)[:, None]
    b = np.arange(1, size + 1, dtype=float)[None, :]
    early = g < b
    false_alarm, detect = np.full(len(workers), 0.1), np.full(len(workers), 0.5)
    posterior = np.zeros((len(tasks), size))
    for _ in range(FIRST_CHANGE_N_ITER):
        f, d = false_alarm[w_of][:, None], detect[w_of][:, None]
        log_like = np.where(
            early,
            (g - 1) * np.log1p(-f) + np.log(f),
            (b - 1) * np.log1p(-f) + (g - b) * np.log1p(-d) + np.log(d),
        )
        log_post = np.zeros((len(tasks), size))
        np.add.at(log_post, t_of, log_like)
        posterior = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        posterior /= posterior.sum(axis=1, keepdims=True)
        q = posterior[t_of]
        f_calls, f_trials = (q * early).sum(1), (q * np.where(early, g, b - 1)).sum(1)
        d_calls, d_trials = (q * ~early).sum(1), (q * np.where(early, 0.0, g - b + 1)).sum(1)
        false_alarm = (np.bincount(w_of, f_calls) + 1) / (np.bincount(w_of, f_trials) + 2)
        detect = (np.bincount(w_of, d_calls) + 1) / (np.bincount(w_of, d_trials) + 2)
    return {t: int(np.argmax(posterior[i])) + 1 for i, t in enumerate(tasks)}


@pytest.mark.parametrize("seed", [0, 5])
def test_first_change_is_the_model_as_first_written(seed: int) -> None:
    rows = boundary_crowd(n_tasks=120, per_task=4, n_workers=15, seed=seed)
    assert aggregate("first_change", rows).labels == first_change_by_answers(rows)


@pytest.mark.parametrize("method", ["majority_vote", "dawid_skene", "first_change"])
def test_coded_columns_give_what_rows_give(method: str) -> None:
    rows = boundary_crowd(n_tasks=80, per_task=5, n_workers=12, seed=9)
    tasks = sorted({t for t, _, _ in rows}) + ["never-answered"]
    workers = sorted({w for _, w, _ in rows})
    coded = Coded.from_codes(
        np.array([tasks.index(t) for t, _, _ in rows]),
        tasks,
        np.array([workers.index(w) for _, w, _ in rows]),
        workers,
        np.array([x for _, _, x in rows]),
    )
    assert "never-answered" not in coded.tasks
    by_rows, by_codes = aggregate(method, rows), aggregate(method, coded)
    assert by_codes.labels == by_rows.labels
    assert all(type(label) is int for label in by_codes.labels.values())
    assert by_codes.confidence == pytest.approx(by_rows.confidence)
    assert by_codes.skills == pytest.approx(by_rows.skills)


def test_coded_columns_refuse_a_worker_answering_a_task_twice() -> None:
    with pytest.raises(ValueError, match="labelled a task twice"):
        Coded.from_codes(np.array([0, 0]), ["t"], np.array([1, 1]), ["a", "b"], np.array([2, 3]))


def test_mace_takes_coded_answers_as_rows() -> None:
    rows = boundary_crowd(n_tasks=30, per_task=4, n_workers=8, seed=3)
    assert Coded.from_rows(rows).rows() == rows
    assert aggregate("mace", Coded.from_rows(rows)).labels == aggregate("mace", rows).labels
