"""Answer aggregation: majority vote, Dawid-Skene, MACE and Bradley-Terry, made deterministic.

crowd-kit fits MACE and Bradley-Terry; majority vote, Dawid-Skene (crowd-kit's algorithm) and
the first-change model run on integer codes with sparse products (`qc.coded`), fast enough
for a million answers. This module validates input, breaks ties reproducibly, gives labels
back as the Python objects that came in (not numpy scalars) and reports one skill per worker.

>>> result = aggregate("majority_vote", [("t1", "a", 1), ("t1", "b", 1), ("t1", "c", 0)])
>>> result.labels, result.confidence["t1"] > 0.6, result.skills
({'t1': 1}, True, {'a': 1.0, 'b': 1.0, 'c': 0.0})
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
from crowdkit.aggregation import MACE, BradleyTerry

from crowd.registry import Registry
from qc.coded import Coded, dawid_skene_labels, first_change, majority, sorted_values

DS_N_ITER = 100
# crowd-kit's default, which is also the MACE reference implementation's.
MACE_N_ITER = 50
# One restart, not the reference's 10: crowd-kit 1.4 draws every restart's starting point from
# the same integer seed, so its restarts repeat one another and end in the same estimate (a
# test keeps this true); ten cost ten times as long (12 s against 1.2 s for 480 answers).
MACE_N_RESTARTS = 1
BT_N_ITER = 100

Answers: TypeAlias = Iterable[tuple[str, str, Any]] | pd.DataFrame
Comparisons: TypeAlias = Iterable[tuple[str, str, str, Any]] | pd.DataFrame
Choices: TypeAlias = Iterable[tuple[str, str, int, int]]
Rows: TypeAlias = list[tuple[Any, Any, Any]]


@dataclass(frozen=True)
class Aggregation:
    """One method's verdict: a label and its confidence per task, a skill in [0, 1] per worker."""

    method: str
    labels: dict[str, Any]
    confidence: dict[str, float]
    skills: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types only: ids become strings, numpy scalars Python ones."""
        return {
            "method": self.method,
            "n_tasks": len(self.labels),
            "n_workers": len(self.skills),
            "labels": {str(task): _jsonable(label) for task, label in self.labels.items()},
            "confidence": {str(task): float(p) for task, p in self.confidence.items()},
            "skills": {str(worker): float(s) for worker, s in self.skills.items()},
        }


class BradleyTerryMM(BradleyTerry):
    """Bradley-Terry by Hunter's MM algorithm, run until it actually converges.

    Model: i beats j with probability p_i / (p_i + p_j); MM update p_i <- W_i / sum_j n_ij /
    (p_i + p_j), rescaled to sum 1. D. R. Hunter, MM algorithms for generalized Bradley-Terry
    models, Ann. Statist. 32 (2004). crowd-kit 1.4's fit keeps `p_old` as an alias of `p_new`,
    so its L1 stopping test reads 0 on the second pass and it always stops after two iterations,
    short of the maximum likelihood; only `fit` is replaced, the win matrix is crowd-kit's.

    >>> df = pd.DataFrame([("w", "a", "b", "a")] * 2 + [("w", "a", "b", "b")],
    ...                   columns=["worker", "left", "right", "label"])
    >>> BradleyTerryMM(n_iter=100).fit_predict(df).round(3).to_dict()
    {'a': 0.667, 'b': 0.333}
    """

    def fit(self, data: pd.DataFrame) -> BradleyTerryMM:
        wins, items = self._build_win_matrix(data)
        games = (wins + wins.T).astype(float)
        won = wins.sum(axis=1).astype(float)
        p = np.full(items.size, 1.0 / max(items.size, 1))
        self.loss_history_ = []
        for _ in range(self.n_iter):
            denominator = p[:, None] + p[None, :]
            ratio = np.divide(games, denominator, out=np.zeros_like(games), where=games > 0)
            new = won / ratio.sum(axis=1)
            new /= new.sum()
            self.loss_history_.append(float(np.abs(new - p).sum()))
            p = new
            if self.loss_history_[-1] < self.tol:
                break
        self.scores_ = pd.Series(p, index=items, dtype=float)
        return self


AGGREGATORS: Registry[Callable[..., Aggregation]] = Registry("aggregation method")


def aggregate(method: str, labels: Answers | Comparisons | Coded, *, seed: int = 0) -> Aggregation:
    """Aggregate (task, worker, label) answers, or for "bradley_terry" (worker, left, right,
    winner) comparisons; a DataFrame needs task/worker/label or worker/left/right/label columns.
    Answers may also come coded (`qc.coded.Coded`), as a report reads a large study.

    >>> aggregate("dawid_skene", [("t1", "a", "x"), ("t1", "b", "x")]).labels
    {'t1': 'x'}
    """
    if method not in AGGREGATORS:
        known = ", ".join(AGGREGATORS)
        raise ValueError(f"unknown aggregation method {method!r}; use one of: {known}")
    return AGGREGATORS.get(method)(labels, seed=seed)


def _majority_vote(labels: Answers | Coded, *, seed: int = 0) -> Aggregation:
    """Most frequent label per task; skill = the worker's agreement with those labels.

    Ties go to the smallest label (natural order, else `repr` order), not (as in crowd-kit)
    to whichever label pandas counted first, which depends on the order of the answers.
    """
    labels_, confidence, skills = majority(_coded_answers(labels))
    return Aggregation("majority_vote", labels_, confidence, skills)


def _ordinal_mean(labels: Answers | Coded, *, seed: int = 0) -> Aggregation:
    """The mean rating per task, rounded half up: for ordinal scales (Likert ratings).

    Categorical methods treat 2 and 4 as unrelated classes; a rating is a noisy reading of a
    quality on a line, where the mean of the readings is the better estimate. Confidence is
    the share of ratings equal to the label; skill is the share of the worker's ratings
    within one point of the labels. crowd-kit has no ordinal aggregator, hence our own.

    >>> _ordinal_mean([("t", "a", 4), ("t", "b", 5), ("t", "c", 5)]).labels
    {'t': 5}
    """
    rows = _answers(labels)
    by_task: dict[str, list[float]] = defaultdict(list)
    for task, _, label in rows:
        if isinstance(label, bool) or not isinstance(label, int | float):
            raise ValueError(f"ordinal_mean needs numeric ratings; task {task!r} has {label!r}")
        by_task[task].append(float(label))
    chosen: dict[str, Any] = {
        task: int(math.floor(sum(values) / len(values) + 0.5)) for task, values in by_task.items()
    }
    confidence = {
        task: sum(1 for v in values if v == chosen[task]) / len(values)
        for task, values in by_task.items()
    }
    close: dict[str, list[bool]] = defaultdict(list)
    for task, worker, label in rows:
        close[worker].append(abs(float(label) - chosen[task]) <= 1)
    skills = {worker: sum(h) / len(h) for worker, h in close.items()}
    return Aggregation("ordinal_mean", chosen, confidence, skills)


FIRST_CHANGE_N_ITER = 50


def _first_change(labels: Answers | Coded, *, seed: int = 0) -> Aggregation:
    """Where a sequence first changes (e.g. the RoFT boundary), from each worker's first call.

    Model: a worker reads positions 1, 2, ... and calls the first one that looks changed.
    Before the true change point b they call a position by mistake with probability f (false
    alarm), from b on they notice with probability d, both per position and per worker, so
    P(call at g | b) = (1-f)^(g-1) f for g < b and (1-f)^(b-1) (1-d)^(g-b) d for g >= b.
    EM alternates the posterior over b per task (uniform prior over 1..the largest label)
    with each worker's f and d (Beta(1, 1)-smoothed counts). Two parameters per worker, where
    Dawid-Skene fits a K x K confusion matrix from a few dozen answers.

    A guess of "no change" (the sequence's length n) has probability (1-d)^(n-b) under every
    b < n rather than (1-d)^(n-b) d: the same factor d for every b, so the posterior over b
    is right without knowing n. Skill is d * (1 - f): noticing the change and nothing else.

    >>> _first_change([("t", "a", 3), ("t", "b", 3), ("t", "c", 5), ("u", "a", 2),
    ...                ("u", "b", 2), ("u", "c", 2)]).labels
    {'t': 3, 'u': 2}
    """
    coded = _coded_answers(labels)
    for code, label in enumerate(coded.labels):
        if isinstance(label, bool) or not isinstance(label, int) or label < 1:
            task = coded.tasks[int(coded.task[np.flatnonzero(coded.label == code)[0]])]
            raise ValueError(f"first_change needs positions 1, 2, ...; task {task!r} has {label!r}")
    chosen, confidence, skills = first_change(coded, FIRST_CHANGE_N_ITER)
    return Aggregation("first_change", chosen, confidence, skills)


def _dawid_skene(labels: Answers | Coded, *, seed: int = 0) -> Aggregation:
    """Dawid & Skene (Applied Statistics, 1979): EM over a confusion matrix per worker, run for
    up to `DS_N_ITER` iterations, as crowd-kit's DawidSkene runs it (`qc.coded.dawid_skene`:
    crowd-kit's own took 70 s for a million answers).

    Skill = sum over classes c of prior(c) * P(worker answers c | truth is c): the worker's
    expected accuracy on a random task under the fitted model.
    """
    chosen, confidence, skills = dawid_skene_labels(_coded_answers(labels), DS_N_ITER)
    return Aggregation("dawid_skene", chosen, confidence, skills)


def _mace(labels: Answers | Coded, *, seed: int = 0) -> Aggregation:
    """MACE (Hovy et al., NAACL 2013) by variational Bayes: `MACE_N_RESTARTS` restart seeded by
    `seed`, of `MACE_N_ITER` iterations.

    Skill = the worker's probability of knowing the answer rather than spamming: crowd-kit's
    `spamming_` column 1 (column 0 is spamming), renormalised because VB leaves rows summing
    to less than 1.
    """
    rows = _answers(labels)
    frame, tasks, workers, names = _coded(rows)
    model = MACE(n_restarts=MACE_N_RESTARTS, n_iter=MACE_N_ITER, random_state=seed).fit(frame)
    chosen, confidence = _decide(model.probas_, tasks, names)
    knowing = model.spamming_[:, 1] / model.spamming_.sum(axis=1)  # rows in worker-code order
    skills = {worker: float(k) for worker, k in zip(workers, knowing, strict=True)}
    return Aggregation("mace", chosen, confidence, skills)


def _bradley_terry(labels: Comparisons, *, seed: int = 0) -> Aggregation:
    """Bradley-Terry over pairwise comparisons; the tasks are the compared items.

    labels[item] is its rank (1 = best, equal scores by item order), confidence[item] its
    strength, normalised to sum to 1 (only comparable within a connected set of comparisons).
    Skill = share of the worker's comparisons whose winner has the higher strength (ties: 1/2).
    """
    rows = _comparisons(labels)
    scores = _bt_scores(rows, BT_N_ITER)
    ranked = sorted(sorted_values(scores), key=lambda item: -scores[item])
    ranks = {item: rank for rank, item in enumerate(ranked, start=1)}
    credit: dict[str, list[float]] = defaultdict(list)
    for worker, left, right, winner in rows:
        loser = right if winner == left else left
        won, lost = scores[winner], scores[loser]
        credit[worker].append(1.0 if won > lost else 0.5 if won == lost else 0.0)
    skills = {worker: sum(c) / len(c) for worker, c in credit.items()}
    return Aggregation("bradley_terry", ranks, dict(scores), skills)


AGGREGATORS.register("majority_vote", _majority_vote)
AGGREGATORS.register("dawid_skene", _dawid_skene)
AGGREGATORS.register("mace", _mace)
AGGREGATORS.register("bradley_terry", _bradley_terry)
AGGREGATORS.register("ordinal_mean", _ordinal_mean)
AGGREGATORS.register("first_change", _first_change)


def best_of_k_pairs(choices: Choices) -> list[tuple[str, str, str, str]]:
    """(item, worker, k, best) choices as (worker, left, right, winner) pairs: the chosen
    candidate f"{item}#{best}" beats each of the other k - 1.

    >>> best_of_k_pairs([("x", "w", 3, 1)])
    [('w', 'x#1', 'x#0', 'x#1'), ('w', 'x#1', 'x#2', 'x#1')]
    """
    pairs: list[tuple[str, str, str, str]] = []
    for choice in choices:
        item, worker, k, best = _unpack(choice, 4, "(item, worker, k, best)")
        if _missing(item) or _missing(worker):
            raise ValueError(f"choice {choice!r} lacks an item or worker id")
        if not all(isinstance(v, int | np.integer) for v in (k, best)):
            raise ValueError(f"item {item!r}: k and best must be integers, got {k!r}, {best!r}")
        if k < 2:
            raise ValueError(f"item {item!r}: k={k}, but a best-of-k choice needs k >= 2")
        if not 0 <= best < k:
            raise ValueError(f"item {item!r}: worker {worker!r} chose {best}, not in 0..{k - 1}")
        winner = f"{item}#{best}"
        pairs.extend((worker, winner, f"{item}#{i}", winner) for i in range(k) if i != best)
    return pairs


def bradley_terry_best(choices: Choices, *, n_iter: int = BT_N_ITER) -> Aggregation:
    """Best candidate index per item from best-of-k choices, by Bradley-Terry over their pairs.

    Candidates of different items are never compared, so each item is its own ranking.
    confidence = the winner's Luce choice share, p_best / sum of p over the item's k candidates;
    skill = share of the worker's choices that pick the BT winner.

    >>> bradley_terry_best([("x", "a", 2, 1), ("x", "b", 2, 1), ("x", "c", 2, 0)]).labels
    {'x': 1}
    """
    choices = list(choices)
    pairs = best_of_k_pairs(choices)
    ks: dict[str, int] = {}
    seen: set[tuple[str, str]] = set()
    for item, worker, k, _ in choices:
        if ks.setdefault(item, k) != k:
            raise ValueError(f"item {item!r} was shown with k={ks[item]} and k={k}; use one k")
        if (item, worker) in seen:
            raise ValueError(f"worker {worker!r} chose twice for item {item!r}; keep one choice")
        seen.add((item, worker))
    if not pairs:
        raise ValueError("no choices given: pass at least one (item, worker, k, best) tuple")
    scores = _bt_scores(pairs, n_iter)
    labels: dict[str, Any] = {}
    confidence: dict[str, float] = {}
    for item, k in ks.items():
        strengths = [scores[f"{item}#{i}"] for i in range(k)]
        labels[item] = int(np.argmax(strengths))  # first maximum: ties go to the lower index
        confidence[item] = strengths[labels[item]] / sum(strengths)
    skills = _agreement([(item, worker, best) for item, worker, _, best in choices], labels)
    return Aggregation("bradley_terry_best", labels, confidence, skills)


def label_accuracy(labels: Mapping[str, Any], truth: Mapping[str, Any]) -> float | None:
    """Share of tasks in both mappings whose label equals the truth; None when none overlap.

    >>> label_accuracy({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 0})
    0.5
    """
    shared = [task for task in labels if task in truth]
    if not shared:
        return None
    return sum(labels[task] == truth[task] for task in shared) / len(shared)


def _answers(data: Answers | Coded) -> Rows:
    rows = data.rows() if isinstance(data, Coded) else _rows(data, ("task", "worker", "label"))
    if not rows:
        raise ValueError("no answers given: pass at least one (task, worker, label) triple")
    seen: set[tuple[Any, Any]] = set()
    for task, worker, label in rows:
        if _missing(task) or _missing(worker):
            raise ValueError(f"answer {(task, worker, label)!r} lacks a task or worker id")
        if _missing(label):
            raise ValueError(f"task {task!r}: worker {worker!r} gave no label; drop it first")
        if not isinstance(label, Hashable):
            raise ValueError(f"task {task!r}: label {label!r} is unhashable; use str or int")
        if (task, worker) in seen:
            raise ValueError(f"worker {worker!r} labelled task {task!r} twice; keep one answer")
        seen.add((task, worker))
    return rows


def _coded_answers(data: Answers | Coded) -> Coded:
    return data if isinstance(data, Coded) else Coded.from_rows(_answers(data))


def _comparisons(data: Comparisons) -> list[tuple[Any, Any, Any, Any]]:
    rows = _rows(data, ("worker", "left", "right", "label"))
    if not rows:
        raise ValueError("no comparisons given: pass (worker, left, right, winner) tuples")
    for row in rows:
        _, left, right, winner = row
        if any(_missing(value) for value in row):
            raise ValueError(f"comparison {row!r} has a missing value")
        if winner not in (left, right):
            raise ValueError(f"comparison {row!r}: the winner must be left or right")
        if left == right:
            raise ValueError(f"comparison {row!r}: left and right must differ")
    return rows


def _rows(data: Answers | Comparisons, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    if isinstance(data, pd.DataFrame):
        missing = [c for c in columns if c not in data.columns]
        if missing:
            raise ValueError(f"the DataFrame lacks columns {missing}; it needs {list(columns)}")
        # tolist() gives Python scalars, not numpy ones.
        return list(zip(*(data[c].tolist() for c in columns), strict=True))
    return [_unpack(row, len(columns), f"({', '.join(columns)})") for row in data]


def _unpack(row: Any, size: int, shape: str) -> tuple[Any, ...]:
    if not isinstance(row, tuple | list) or len(row) != size:
        raise ValueError(f"expected {shape} tuples, got {row!r}")
    return tuple(row)


def _coded(rows: Rows) -> tuple[pd.DataFrame, list[Any], list[Any], list[Any]]:
    """The answers as integer codes, and the task, worker and label objects the codes stand for.

    crowd-kit 1.4's MACE indexes strategy counts built by a sorting groupby with first-appearance
    codes, mixing up workers and labels unless both orders agree: codes numbered by appearance
    agree. Sorting first makes results independent of row order; codes also spare crowd-kit
    mixed-type labels (its MajorityVote fails on them) and give back the very objects given."""
    ordered = sorted_values((worker, label, task) for task, worker, label in rows)
    (workers, worker_ids), (labels, label_ids), (tasks, task_ids) = (
        pd.factorize(pd.Series(column, dtype=object)) for column in zip(*ordered, strict=True)
    )
    frame = pd.DataFrame({"task": tasks, "worker": workers, "label": labels})
    return frame, list(task_ids), list(worker_ids), list(label_ids)


def _decide(
    probas: pd.DataFrame | None, tasks: list[Any], labels: list[Any]
) -> tuple[dict[str, Any], dict[str, float]]:
    """Top label per task, ties to the smallest label, with codes turned back into objects."""
    if probas is None:
        raise RuntimeError("crowd-kit returned no label probabilities")
    columns = [labels[int(c)] for c in probas.columns]
    chosen: dict[str, Any] = {}
    confidence: dict[str, float] = {}
    for task, row in zip(probas.index, probas.to_numpy(dtype=float), strict=True):
        top = float(np.nanmax(row))
        tied = [columns[i] for i in np.flatnonzero(row == top)]
        chosen[tasks[int(task)]] = sorted_values(tied)[0]
        confidence[tasks[int(task)]] = top
    return chosen, confidence


def _agreement(rows: Rows, labels: Mapping[Any, Any]) -> dict[str, float]:
    hits: dict[str, list[bool]] = defaultdict(list)
    for task, worker, label in rows:
        hits[worker].append(label == labels[task])
    return {worker: sum(h) / len(h) for worker, h in hits.items()}


def _bt_scores(rows: list[tuple[Any, Any, Any, Any]], n_iter: int) -> dict[Any, float]:
    # Integer codes, as in _coded: crowd-kit's np.unique would turn ids into numpy scalars and
    # cannot sort ids of mixed types.
    items = list(dict.fromkeys(item for _, left, right, _ in rows for item in (left, right)))
    code = {item: i for i, item in enumerate(items)}
    coded = [(worker, code[left], code[right], code[won]) for worker, left, right, won in rows]
    frame = pd.DataFrame(coded, columns=["worker", "left", "right", "label"])
    scores = BradleyTerryMM(n_iter=n_iter).fit(frame).scores_
    return {items[int(i)]: float(p) for i, p in scores.items()}


def _missing(value: Any) -> bool:
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)
