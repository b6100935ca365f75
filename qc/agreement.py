"""Agreement with the crowd as evidence of a worker's skill, over the whole record and recently.

Gold items are few, so they test a worker slowly; every real item that others answered too is
a test of its own. Each worker w has one accuracy p_w (a "one-coin" model, as in Dawid & Skene,
J. R. Stat. Soc. C 28, 1979, with one parameter per worker): they give the true label with
probability p_w, else any other label of the question evenly. For each task a worker
answered, the truth's posterior is computed from the *other* workers' labels only
(leave-one-out: a worker never vouches for themselves), or is the gold answer on a gold item,
and the worker's agreement there is the posterior probability that their label is the truth,
or near it (within `tolerance`: a rating or a boundary guess one step off agrees). p_w is
fitted to the exact agreements, which keep the posterior of an ordinal truth sharp. A worker
whose accuracy is no better than chance weighs nothing in that posterior (their likelihood is
flat), so random clickers do not shape the consensus, and a minority copying one answer counts
only as much as their record elsewhere earns them. The accuracies are refitted a few times (EM).

A worker's agreements a_t in [0, 1] on n tasks give a Beta(1 + sum a_t, 1 + n - sum a_t)
posterior on their accuracy (a fractional success per task, as `qc.gold.GoldConfidence` does
for partly right gold), so the rule waits for credible evidence; the same posterior over the
last `window` tasks, by answer time, shows drift (a worker who stops reading). The chance
level is what a worker who picks labels uniformly would score on the same tasks, so a random
clicker's expected agreement is known whatever the number of labels or the tolerance.

A worker is judged against a threshold between chance and the crowd's level: threshold =
chance + margin * (crowd - chance), where crowd is the mean accuracy of the workers above
chance, weighted by how far above chance they are. A worker credibly below it is credibly
closer to chance than to the crowd.

Example:
    >>> answers = [(f"t{i}/q", w, i % 3) for i in range(12) for w in ("a", "b", "c")]
    >>> answers += [(f"t{i}/q", "r", (i * 7 + 1) % 3) for i in range(12)]
    >>> model = CrowdAgreement().fit(answers)
    >>> round(model.agreement_["a"], 2), round(model.agreement_["r"], 2)
    (1.0, 0.0)
    >>> model.prob_below("r", model.threshold("r")) > 0.99
    True
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

# EM rounds: accuracies settle in a few.
_ROUNDS = 6
# A worker's accuracy before any evidence.
_START = 0.7
# How much an agreement on a real item counts in a worker's accuracy (which weighs their labels
# in the others' posteriors) against an answer whose truth is known: copiers who meet on an
# item vouch for each other there, and gold cannot be talked into agreeing.
REAL_WEIGHT = 0.3
# Accuracies are kept off 0 and 1, so one label never decides a posterior outright.
_CLIP = (0.02, 0.98)


@dataclass
class CrowdAgreement:
    """Each worker's accuracy against the leave-one-out posterior of the truth (one coin each).

    Input: (task, worker, label) triples in answer-time order (the order sets the drift
    window; a worker's last answer per task counts); a task is an (item, question) pair and
    its question the text after its last "/". `truth` (task -> label) clamps the truth of
    gold tasks. tolerance: labels within this distance count as the same answer (0 for
    categories; ordinal labels must then be numbers); min_others: other answers a real task
    needs to count; window: the recent tasks the drift posterior reads; margin: where the
    threshold sits between chance (0) and the crowd (1). `labels` (question -> labels)
    declares a question's labels; by default the labels seen.

    Fitted: n_ (tasks judged per worker), agreement_ (mean agreement: the estimated
    accuracy), chance_ (mean chance agreement), history_ (the per-task agreements in answer
    order), skill_ (the accuracy used in others' posteriors), consensus_ (task -> the most
    probable truth from every answer, or the gold answer), crowd_ (the crowd's level).
    """

    tolerance: float = 0
    min_others: int = 2
    window: int = 10
    margin: float = 0.5
    labels: Mapping[str, Iterable[Hashable]] | None = None
    n_: dict[str, int] = field(default_factory=dict, init=False)
    agreement_: dict[str, float] = field(default_factory=dict, init=False)
    chance_: dict[str, float] = field(default_factory=dict, init=False)
    history_: dict[str, list[float]] = field(default_factory=dict, init=False)
    skill_: dict[str, float] = field(default_factory=dict, init=False)
    consensus_: dict[str, Hashable] = field(default_factory=dict, init=False)
    crowd_: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if isinstance(self.tolerance, bool) or not isinstance(self.tolerance, int | float):
            raise ValueError(f"tolerance must be a number of 0 or more, got {self.tolerance!r}")
        if self.tolerance < 0:
            raise ValueError(f"tolerance must be a number of 0 or more, got {self.tolerance!r}")
        for name in ("min_others", "window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of 1 or more, got {value!r}")
        if not 0 <= self.margin <= 1:
            raise ValueError(f"margin must be between 0 and 1, got {self.margin!r}")

    def _near(self, a: Hashable, b: Hashable) -> bool:
        if self.tolerance == 0:
            return a == b
        return abs(float(a) - float(b)) <= self.tolerance  # type: ignore[arg-type]

    def fit(
        self,
        answers: Iterable[tuple[str, str, Hashable]],
        truth: Mapping[str, Hashable] | None = None,
    ) -> CrowdAgreement:
        by_task: dict[str, dict[str, Hashable]] = {}
        order: list[tuple[str, str]] = []
        for task, worker, label in answers:
            if self.tolerance and (isinstance(label, bool) or not isinstance(label, int | float)):
                raise ValueError(
                    f"task {task!r}: label {label!r} of worker {worker!r} is not a number; "
                    "ordinal agreement (tolerance > 0) needs numeric labels"
                )
            if worker not in by_task.setdefault(task, {}):
                order.append((task, worker))
            by_task[task][worker] = label
        gold = {task: label for task, label in (truth or {}).items() if task in by_task}
        workers = sorted({worker for given in by_task.values() for worker in given})
        blocks = [
            self._block(question, tasks, by_task, gold, {w: i for i, w in enumerate(workers)})
            for question, tasks in _by_question(by_task).items()
        ]
        skill = np.full(len(workers), _START)
        for _ in range(_ROUNDS):
            exact_sum, count = np.zeros(len(workers)), np.zeros(len(workers))
            for block in blocks:
                block.judge(skill)
                judged = block.judged
                # Known answers (gold, attention checks) count in full; an agreement with the
                # others counts for less, since a group answering alike props itself up there.
                weight = np.where(block.truth[block.task] >= 0, 1.0, REAL_WEIGHT)[judged]
                np.add.at(exact_sum, block.worker[judged], weight * block.exact[judged])
                np.add.at(count, block.worker[judged], weight)
            # The posterior mean under a Beta(1, 1) prior keeps a short record modest.
            skill = np.clip((exact_sum + 1) / (count + 2), *_CLIP)
        scores = {
            (block.tasks[block.task[j]], workers[block.worker[j]]): (
                float(block.agreed[j]), float(block.chance[j]))
            for block in blocks
            for j in np.flatnonzero(block.judged)
        }  # fmt: skip
        self._summarize(order, scores, dict(zip(workers, map(float, skill), strict=True)))
        self.consensus_ = {
            task: block.labels[int(block.consensus[t])]
            for block in blocks
            for t, task in enumerate(block.tasks)
        }
        return self

    def _block(
        self,
        question: str,
        tasks: list[str],
        by_task: Mapping[str, Mapping[str, Hashable]],
        gold: Mapping[str, Hashable],
        worker_index: Mapping[str, int],
    ) -> _Question:
        """The answers to one question as arrays; its labels declared, or those seen."""
        seen = {label for task in tasks for label in by_task[task].values()}
        seen |= {gold[task] for task in tasks if task in gold}
        declared = list((self.labels or {}).get(question) or [])
        labels = declared + sorted(seen - set(declared), key=repr)
        index = {label: i for i, label in enumerate(labels)}
        close = np.array([[self._near(a, b) for b in labels] for a in labels], dtype=float)
        rows = [(t, worker_index[w], index[x]) for t, task in enumerate(tasks)
                for w, x in by_task[task].items()]  # fmt: skip
        task, worker, label = (np.array(column, dtype=int) for column in zip(*rows, strict=True))
        sizes = np.bincount(task, minlength=len(tasks))
        truth = np.array([index[gold[t]] if t in gold else -1 for t in tasks])
        judged = (sizes[task] - 1 >= self.min_others) | (truth[task] >= 0)
        return _Question(tasks, close, task, worker, label, truth, judged, labels)

    def _summarize(
        self,
        order: list[tuple[str, str]],
        scores: Mapping[tuple[str, str], tuple[float, float]],
        skill: Mapping[str, float],
    ) -> None:
        history: dict[str, list[float]] = {}
        chance_sum: dict[str, float] = {}
        for key in order:
            if key in scores:
                agreed, chance = scores[key]
                history.setdefault(key[1], []).append(agreed)
                chance_sum[key[1]] = chance_sum.get(key[1], 0.0) + chance
        self.history_ = history
        self.n_ = {w: len(h) for w, h in history.items()}
        self.agreement_ = {w: sum(h) / len(h) for w, h in history.items()}
        self.chance_ = {w: chance_sum[w] / len(h) for w, h in history.items()}
        self.skill_ = dict(skill)
        lead = {w: self.agreement_[w] - self.chance_[w] for w in history}
        weights = {w: lead[w] * self.n_[w] for w in history if lead[w] > 0}
        total = sum(weights.values())
        self.crowd_ = (
            sum(weights[w] * self.agreement_[w] for w in weights) / total if total else None
        )

    def fit_predict(self, answers: Iterable[tuple[str, str, Hashable]]) -> dict[str, float]:
        return self.fit(answers).agreement_

    def threshold(self, worker: str) -> float:
        """The agreement below which `worker` is closer to chance than to the crowd."""
        chance = self.chance_.get(worker, 0.0)
        crowd = self.crowd_ if self.crowd_ is not None else 1.0
        return chance + self.margin * max(crowd - chance, 0.0)

    def recent(self, worker: str) -> tuple[float | None, int]:
        """The mean agreement over the last `window` tasks, and how many there are."""
        values = self.history_.get(worker, [])[-self.window :]
        return (sum(values) / len(values) if values else None), len(values)

    def prob_below(self, worker: str, threshold: float, recent: bool = False) -> float:
        """P(accuracy < threshold) under the Beta posterior (of the recent window's tasks)."""
        values = self.history_.get(worker, [])
        if recent:
            values = values[-self.window :]
        successes = sum(values)
        return float(stats.beta.cdf(threshold, 1 + successes, 1 + len(values) - successes))


@dataclass
class _Question:
    """One question's answers as arrays (one entry per answer), judged against the others'.

    judge(skill) sets, per answer, the posterior probability that it is the truth (exact),
    near it (agreed) and a uniform guess's chance there, from the other answers to its task
    (or the gold answer).
    """

    tasks: list[str]
    close: np.ndarray  # close[a, b]: labels a and b agree
    task: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    truth: np.ndarray  # per task: the gold label's index, or -1
    judged: np.ndarray
    consensus: np.ndarray = field(init=False)  # per task: the most probable truth's index
    labels: list[Hashable] = field(default_factory=list)
    exact: np.ndarray = field(init=False)
    agreed: np.ndarray = field(init=False)
    chance: np.ndarray = field(init=False)

    def judge(self, skill: np.ndarray) -> None:
        k = self.close.shape[0]
        n = len(self.label)
        if k == 1:
            self.exact = self.agreed = self.chance = np.ones(n)
            self.consensus = np.zeros(len(self.tasks), dtype=int)
            return
        # A worker right with probability p gives the truth's label with p, each other with
        # (1 - p) / (k - 1); p is kept at or above chance: below it, a label says nothing.
        rate = np.clip(skill[self.worker], 1 / k, _CLIP[1])
        hit, miss = np.log(rate), np.log((1 - rate) / (k - 1))
        own = np.repeat(miss[:, None], k, axis=1)
        own[np.arange(n), self.label] = hit
        total = np.zeros((len(self.tasks), k))
        np.add.at(total, self.task, own)
        logits = total[self.task] - own  # leave the answer's own label out
        self.consensus = np.where(self.truth >= 0, self.truth, total.argmax(axis=1))
        posterior = np.exp(logits - logits.max(axis=1, keepdims=True))
        posterior /= posterior.sum(axis=1, keepdims=True)
        gold = self.truth[self.task]
        clamped = gold >= 0
        posterior[clamped] = 0.0
        posterior[clamped, gold[clamped]] = 1.0
        self.exact = posterior[np.arange(n), self.label]
        self.agreed = (posterior * self.close[self.label]).sum(axis=1)
        self.chance = posterior @ (self.close.sum(axis=0) / k)


def _by_question(by_task: Mapping[str, object]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for task in by_task:
        out.setdefault(task.rsplit("/", 1)[-1], []).append(task)
    return out
