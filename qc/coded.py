"""Answers as integer codes, and the aggregators that must scale fitted on them with sparse
matrices: majority vote, Dawid-Skene and the first-change model.

A study of a million boundary answers is a million (task, worker, label) triples. Python
tuples, pandas group-bys and crowd-kit's DawidSkene (70 s for 100 iterations at a million
answers, its E-step a pandas join and group-by each time) are too slow for a report that
refreshes as answers arrive. Here every EM step is two sparse products: C (tasks x
(worker, label) pairs, the count of each pair's answers on the task) times a table per
(worker, label) pair gives each task's log-likelihood, and C's transpose times the tasks'
posteriors gives each pair's expected counts. Dawid-Skene follows crowd-kit's algorithm
step for step (majority-vote start, M-step, E-step, its evidence lower bound and stopping
tolerance), so it gives crowd-kit's labels (tests/qc/test_coded.py compares the two).

>>> coded = Coded.from_rows([("t1", "a", 1), ("t1", "b", 1), ("t1", "c", 0), ("t2", "a", 0)])
>>> coded.labels, coded.n
([0, 1], 4)
>>> majority(coded)[0]
{'t1': 1, 't2': 0}
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

# crowd-kit's DawidSkene: the floor of its probabilities, and its stopping tolerance on the
# change of the evidence lower bound per answer.
DS_EPS = 1e-10
DS_TOL = 1e-5


def sorted_values(values: Iterable[Any]) -> list[Any]:
    """Values in their natural order; mixed types (1 and "a") in a total, stable order."""
    values = list(values)
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


@dataclass(frozen=True)
class Coded:
    """(task, worker, label) answers as codes into `tasks`, `workers` and `labels`.

    Labels are coded in their natural order (`sorted_values`), so the lowest code among tied
    labels is the smallest label. Build it with `from_rows` (Python objects) or `from_codes`
    (columns a database read already coded). Each (task, worker) pair appears once.
    """

    task: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    tasks: list[Any]
    workers: list[Any]
    labels: list[Any]

    @property
    def n(self) -> int:
        return int(self.task.size)

    def rows(self) -> list[tuple[Any, Any, Any]]:
        """The (task, worker, label) triples again, for aggregators that take rows."""
        return [
            (self.tasks[t], self.workers[w], self.labels[x])
            for t, w, x in zip(
                self.task.tolist(), self.worker.tolist(), self.label.tolist(), strict=True
            )
        ]

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[Hashable, Hashable, Hashable]]) -> Coded:
        """Codes of validated rows (see qc.aggregation): tasks and workers in the order they
        first appear."""
        tasks = list(dict.fromkeys(task for task, _, _ in rows))
        workers = list(dict.fromkeys(worker for _, worker, _ in rows))
        labels = sorted_values({label for _, _, label in rows})
        t_index = {t: i for i, t in enumerate(tasks)}
        w_index = {w: i for i, w in enumerate(workers)}
        l_index = {label: i for i, label in enumerate(labels)}
        return cls(
            np.fromiter((t_index[t] for t, _, _ in rows), dtype=np.int64, count=len(rows)),
            np.fromiter((w_index[w] for _, w, _ in rows), dtype=np.int64, count=len(rows)),
            np.fromiter((l_index[x] for _, _, x in rows), dtype=np.int64, count=len(rows)),
            tasks,
            workers,
            labels,
        )

    @classmethod
    def from_codes(
        cls,
        task: np.ndarray,
        tasks: Sequence[Any],
        worker: np.ndarray,
        workers: Sequence[Any],
        values: np.ndarray,
    ) -> Coded:
        """Codes of columns: `task` and `worker` index `tasks` and `workers` (unused entries
        are dropped), `values` are the labels themselves (integers). Raises ValueError when a
        worker answered a task twice."""
        task, worker = np.asarray(task, dtype=np.int64), np.asarray(worker, dtype=np.int64)
        pairs = np.sort(task * max(len(workers), 1) + worker)
        if pairs.size and bool((pairs[1:] == pairs[:-1]).any()):
            raise ValueError("a worker labelled a task twice; keep one answer")
        task, used_tasks = _renumber(task, len(tasks))
        worker, used_workers = _renumber(worker, len(workers))
        uniques, label = np.unique(np.asarray(values), return_inverse=True)
        return cls(
            task,
            worker,
            label.astype(np.int64).ravel(),
            [tasks[i] for i in used_tasks],
            [workers[i] for i in used_workers],
            [v.item() if isinstance(v, np.generic) else v for v in uniques],
        )

    def pair_counts(
        self, n_labels: int | None = None, label: np.ndarray | None = None
    ) -> sp.csr_matrix:
        """tasks x (worker, label) pairs: how many answers of each pair each task has (0/1)."""
        k = len(self.labels) if n_labels is None else n_labels
        label = self.label if label is None else label
        columns = self.worker * k + label
        shape = (len(self.tasks), len(self.workers) * k)
        return sp.csr_matrix((np.ones(self.n), (self.task, columns)), shape=shape)


def present(codes: np.ndarray) -> np.ndarray:
    """The distinct non-negative codes, in order: a count per code, where np.unique would sort
    or hash every entry."""
    return np.flatnonzero(np.bincount(codes)) if codes.size else codes.astype(np.int64)


def _renumber(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes into 0..size-1 renumbered densely over the ones used, and the used ones (in
    order). np.unique would sort (or hash) every answer; a count per code is enough."""
    used = present(codes)
    dense = np.zeros(size, dtype=np.int64)
    dense[used] = np.arange(used.size)
    return dense[codes], used


def _decide(
    coded: Coded, probas: np.ndarray
) -> tuple[dict[Any, Any], dict[Any, float], np.ndarray]:
    """Top label per task (ties to the smallest label), its probability, and its code."""
    top = probas.max(axis=1)
    chosen = np.argmax(probas == top[:, None], axis=1)  # the first maximum: the smallest label
    labels = dict(zip(coded.tasks, (coded.labels[int(c)] for c in chosen), strict=True))
    return labels, dict(zip(coded.tasks, top.tolist(), strict=True)), chosen


def _share_per_worker(coded: Coded, hit: np.ndarray) -> dict[Any, float]:
    counts = np.bincount(coded.worker, minlength=len(coded.workers))
    hits = np.bincount(coded.worker, weights=hit.astype(float), minlength=len(coded.workers))
    return dict(zip(coded.workers, (hits / counts).tolist(), strict=True))


def vote_shares(coded: Coded) -> np.ndarray:
    """tasks x labels: each label's share of the task's answers (crowd-kit's MajorityVote
    probabilities)."""
    k = len(coded.labels)
    counts = np.bincount(coded.task * k + coded.label, minlength=len(coded.tasks) * k)
    counts = counts.reshape(len(coded.tasks), k).astype(float)
    return counts / counts.sum(axis=1, keepdims=True)


def majority(coded: Coded) -> tuple[dict[Any, Any], dict[Any, float], dict[Any, float]]:
    """Labels, confidence (the top label's share) and skills (agreement with the labels)."""
    labels, confidence, chosen = _decide(coded, vote_shares(coded))
    return labels, confidence, _share_per_worker(coded, coded.label == chosen[coded.task])


@dataclass(frozen=True)
class DawidSkeneFit:
    probas: np.ndarray  # tasks x labels
    priors: np.ndarray  # labels
    errors: np.ndarray  # (worker, answered label) x true label; rows a worker never gave are 0
    iterations: int


def dawid_skene(coded: Coded, n_iter: int) -> DawidSkeneFit:
    """Dawid & Skene's EM as crowd-kit's DawidSkene runs it (no true labels, no initial
    error matrix): start from the majority vote's shares, then alternate the M-step (each
    worker's confusion over the labels they gave, floored at DS_EPS and normalised per true
    label) and the E-step (log-likelihoods, base 2, shifted by their row maximum), until the
    evidence lower bound per answer gains less than DS_TOL."""
    k, n_workers = len(coded.labels), len(coded.workers)
    counts = coded.pair_counts()
    given = np.asarray(counts.sum(axis=0)).ravel() > 0  # (worker, label) pairs answered
    owner = np.repeat(np.arange(n_workers), k)
    counts_t = counts.T.tocsr()

    def m_step(probas: np.ndarray) -> np.ndarray:
        errors = counts_t @ probas  # (worker, label) x true label
        errors[given] = np.maximum(errors[given], DS_EPS)
        per_worker = np.zeros((n_workers, k))
        np.add.at(per_worker, owner[given], errors[given])
        errors[given] /= per_worker[owner[given]]
        return errors

    def log_of(errors: np.ndarray, log: Any) -> np.ndarray:
        out = np.zeros_like(errors)
        out[given] = log(errors[given])
        return out

    probas = vote_shares(coded)
    priors = probas.mean(axis=0)
    errors = m_step(probas)
    answers_per_task = np.asarray(counts.sum(axis=1))
    # Each task's summed log2 confusion rows: the bound of one iteration and the E-step of
    # the next read the same errors, so one sparse product serves both.
    summed = counts @ log_of(errors, np.log2)
    loss = -np.inf
    iterations = 0
    for iterations in range(1, n_iter + 1):  # noqa: B007 - the count is returned
        log_like = np.log2(np.maximum(priors, DS_EPS)) + summed
        scaled = np.exp2(log_like - log_like.max(axis=1, keepdims=True))
        probas = scaled / scaled.sum(axis=1, keepdims=True)
        priors = probas.mean(axis=0)
        errors = m_step(probas)
        summed = counts @ log_of(errors, np.log2)
        # The bound: expected joint log-likelihood (the prior counted per answer, as
        # crowd-kit joins it to every answer) plus the posteriors' entropy.
        log_prior = np.log(np.maximum(priors, DS_EPS))
        per_task = summed * np.log(2) + answers_per_task * log_prior
        floored = np.maximum(probas, DS_EPS)
        new_loss = float((probas * per_task).sum() - (np.log(floored) * floored).sum())
        new_loss /= coded.n
        # crowd-kit floors its posteriors and priors in place while computing the bound.
        probas, priors = floored, np.maximum(priors, DS_EPS)
        if new_loss - loss < DS_TOL:
            break
        loss = new_loss
    return DawidSkeneFit(probas, priors, errors, iterations)


def dawid_skene_labels(
    coded: Coded, n_iter: int
) -> tuple[dict[Any, Any], dict[Any, float], dict[Any, float]]:
    """Labels, confidence and skills: a worker's skill is sum_c prior(c) x P(they answer c |
    the truth is c), their expected accuracy on a random task."""
    fit = dawid_skene(coded, n_iter)
    labels, confidence, _ = _decide(coded, fit.probas)
    k = len(coded.labels)
    diagonal = fit.errors.reshape(len(coded.workers), k, k)[:, np.arange(k), np.arange(k)]
    skills = diagonal @ fit.priors
    return labels, confidence, dict(zip(coded.workers, skills.tolist(), strict=True))


def first_change(
    coded: Coded, n_iter: int
) -> tuple[dict[Any, Any], dict[Any, float], dict[Any, float]]:
    """The first-change model of qc.aggregation._first_change (see its docstring), its sums
    over answers taken as sparse products over (worker, guess) pairs."""
    guesses = np.asarray(coded.labels, dtype=float)  # the positions, coded in order
    size = int(guesses.max())
    g = np.arange(1, size + 1, dtype=float)[:, None]  # a guess, as a row of the tables below
    b = np.arange(1, size + 1, dtype=float)[None, :]  # a candidate change point
    early = g < b  # a false alarm if the change is at b
    # Per guess and candidate: false-alarm calls and trials, detections and their trials.
    f_trials = np.where(early, g, b - 1)
    d_trials = np.where(early, 0.0, g - b + 1)
    position = np.rint(guesses).astype(np.int64) - 1  # label code -> row of the tables
    counts = coded.pair_counts(size, position[coded.label])
    counts_t = counts.T.tocsr()
    n_workers = len(coded.workers)
    false_alarm = np.full(n_workers, 0.1)
    detect = np.full(n_workers, 0.5)
    posterior = np.full((len(coded.tasks), size), 1.0 / size)
    for _ in range(n_iter):
        f = false_alarm[:, None, None]
        d = detect[:, None, None]
        # (worker, guess, candidate): the log-likelihood of the guess under the candidate.
        table = np.where(
            early[None],
            (g[None] - 1) * np.log1p(-f) + np.log(f),
            (b[None] - 1) * np.log1p(-f) + (g[None] - b[None]) * np.log1p(-d) + np.log(d),
        )
        log_post = counts @ table.reshape(n_workers * size, size)
        log_post -= log_post.max(axis=1, keepdims=True)
        posterior = np.exp(log_post)
        posterior /= posterior.sum(axis=1, keepdims=True)
        # Each (worker, guess) pair's posterior mass over the candidates, summed over tasks.
        mass = (counts_t @ posterior).reshape(n_workers, size, size)
        f_calls = (mass * early).sum(axis=(1, 2))
        f_seen = (mass * f_trials).sum(axis=(1, 2))
        d_calls = (mass * ~early).sum(axis=(1, 2))
        d_seen = (mass * d_trials).sum(axis=(1, 2))
        false_alarm = (f_calls + 1) / (f_seen + 2)
        detect = (d_calls + 1) / (d_seen + 2)
    chosen = np.argmax(posterior, axis=1)
    labels = dict(zip(coded.tasks, (chosen + 1).tolist(), strict=True))
    confidence = dict(zip(coded.tasks, posterior.max(axis=1).tolist(), strict=True))
    skills = dict(zip(coded.workers, (detect * (1 - false_alarm)).tolist(), strict=True))
    return labels, confidence, skills
