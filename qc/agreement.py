"""Agreement with the crowd as evidence of a worker's skill, over the whole record and recently.

Gold items are few, so they test a worker slowly; every real item that others answered too is
a test of its own. Each worker w has one accuracy p_w (a "one-coin" model, as in Dawid & Skene,
J. R. Stat. Soc. C 28, 1979, with one parameter per worker): they give the true label with
probability p_w, else one of the question's K - 1 other labels evenly. On each task a worker
answered, the truth's posterior q_t comes from the *other* workers' labels only (leave-one-
out: a worker never vouches for themselves), or is the known answer of a gold item or an
attention check. The worker's label x then has likelihood

    P(x | p) = q_t(x) * p + (1 - q_t(x)) * (1 - p) / (K - 1)   (up to a constant),

so a task whose truth the others settle (q near 0 or 1) is a full test, and one they leave
open (q = 1/K) says nothing. For ordinal labels (a rating, a boundary guess) "right" means
within `tolerance` of the truth: q_t(x) is then the posterior mass near x, and 1/K becomes the
share of labels near the truth (the truth itself is still inferred from exact labels, which
keeps its posterior sharp). The product over the worker's tasks, times a prior, is the posterior
of p (on a grid), so the rule waits for credible evidence and needs less of it where the crowd
is sure; the same posterior over the last `window` tasks, by answer time, shows drift (a
worker who stops reading).

The prior is the crowd's own: the distribution of accuracies among the study's workers,
estimated from all their likelihoods at once (empirical Bayes: the nonparametric maximum
likelihood estimate of Kiefer & Wolfowitz, Ann. Math. Stat. 27, 1956, by EM on the grid),
mixed with a uniform prior by how many workers it rests on. A uniform prior spreads its mass
over every accuracy, so ten answers at chance still leave room for "a bit worse than the
crowd"; a real crowd is clustered (people who read, people who do not), and with the crowd's
prior the same ten answers say which cluster a worker is in. No accuracy is ever ruled out:
the uniform share keeps every value possible.

A known answer is a full test only where readers get it right. On a gold item most readers
miss, a miss is what a reader does too, so there a worker who is right with p is right with
c + (p - c) s, s in [0, 1] being how much of a reader's skill the item shows (the readers'
accuracy on it against their accuracy on the question's known answers, both above chance;
the answer's own worker left out). That is the likelihood above with the truth's q softened
to s q + (1 - s) c: without it, a hard gold item that every worker meets (served in one order)
counts against every careful worker who misses it as if they had missed an easy one.

Real tasks can be weighed the same way (`real_difficulty`, on for comparisons): there the
truth is unknown, so a task's readers' accuracy comes from how often the *other* answers agree
with one another, pairwise (the answer's own worker is in no pair, so a guess cannot make its
task look hard). A task readers split on (two close candidates) then tests less; one they all
agree on tests more than a typical task (s up to EASY_MAX), since a reader is right there
almost surely and a miss is nearly a guesser's; SLIP keeps such a label possible.

A random clicker's accuracy is the chance level (1/K, or the share of labels within
tolerance), whatever the crowd.

A worker no better than chance weighs nothing in the others' posteriors (their likelihood is
flat), so random clickers do not shape the consensus. The accuracies used as weights are
refitted a few times (EM), counting an agreement on a real item for less than a known answer:
a group answering alike props itself up where it meets, and gold cannot be talked into
agreeing.

A worker is judged against a threshold between chance and the crowd's level: threshold =
chance + margin * (crowd - chance), where crowd is the mean accuracy of the workers above
chance, weighted by their evidence and how far above chance they are. A worker credibly below
it is credibly closer to chance than to the crowd.

Example:
    >>> answers = [(f"t{i}/q", w, i % 3) for i in range(12) for w in ("a", "b", "c")]
    >>> answers += [(f"t{i}/q", "r", (i * 7 + 1) % 3) for i in range(12)]
    >>> model = CrowdAgreement().fit(answers)
    >>> round(model.agreement_["a"], 2), round(model.agreement_["r"], 2)
    (0.98, 0.03)
    >>> model.prob_below("r", model.threshold("r")) > 0.99
    True
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from qc.drift import Verdict, stopped_reading

# EM rounds: accuracies settle in a few.
_ROUNDS = 6
# A worker's accuracy before any evidence.
_START = 0.7
# Accuracies are kept off 0 and 1, so one label never decides a posterior outright.
_CLIP = (0.02, 0.98)
# A task whose chance level is at least this (every label counts as right) is not judged.
_ALL_RIGHT = 1 - 1e-9
# The accuracies a posterior is computed at (midpoints of 400 equal steps).
_GRID = (np.arange(400) + 0.5) / 400
_UNIFORM = np.full(len(_GRID), 1 / len(_GRID))
# How much an agreement on a real item counts, against an answer whose truth is known, in the
# accuracy that weighs a worker's labels in the others' posteriors.
REAL_WEIGHT = 0.3
# Readers' worth (a reader weighs 1 at most) of the question's accuracy on known answers that
# a gold item's own accuracy starts from (_Question._discrimination): an item few have
# answered is a full test.
DIFFICULTY_PRIOR = 3.0
# How much more of a reader's skill a real task everyone agrees on shows than a typical one,
# at most (_Question.weigh_real): there a reader is right almost surely, and a miss is
# nearly a guesser's.
EASY_MAX = 2.0
# A reader's slips: where a task's difficulty makes their miss (or their hit) nearly
# impossible, the likelihood of a label is kept at least this share of a guess's.
SLIP = 0.04
# The crowd's prior rests on its workers: with W of them it has weight W / (W + this), the
# uniform prior the rest, so a handful of workers barely move it.
PRIOR_WORKERS = 10
# EM rounds of the crowd's prior at most (it stops once a round moves it by under 1e-6).
_PRIOR_ROUNDS = 200


@dataclass
class CrowdAgreement:
    """Each worker's accuracy against the leave-one-out posterior of the truth (one coin each).

    Input: (task, worker, label) triples in answer-time order (the order sets the drift
    window; a worker's last answer per task counts); a task is an (item, question) pair and
    its question the text after its last "/". `truth` (task -> label) gives the known answers
    (gold items, attention checks). tolerance: labels this close to the truth count as right
    (0 for categories; ordinal labels must then be numbers); min_others: other answers a
    real task needs to count; window: the recent tasks the drift posterior reads; margin:
    where the threshold sits between chance (0) and the crowd (1). `labels` (question ->
    labels) declares a question's labels (K); by default the labels seen. real_difficulty:
    weigh real tasks of categorical labels by how hard readers find them
    (`_Question.weigh_real`), as known answers always are.

    Fitted: n_ (tasks judged per worker), real_n_ (those of them whose truth is unknown: real
    items, not gold or attention checks), items_ (items judged: the distinct text before a
    judged task's last "/"), agreement_ (the posterior mean of the worker's
    accuracy), chance_ (a random answer's accuracy on the same tasks), skill_ (the accuracy
    that weighs the worker in others' posteriors), consensus_ (task -> the most probable
    truth from every answer, or the known answer), crowd_ (the crowd's level), prior_ (the
    crowd's prior of an accuracy, on the grid `GRID`).
    """

    tolerance: float = 0
    min_others: int = 2
    window: int = 10
    margin: float = 0.5
    labels: Mapping[str, Iterable[Hashable]] | None = None
    real_difficulty: bool = False
    n_: dict[str, int] = field(default_factory=dict, init=False)
    items_: dict[str, int] = field(default_factory=dict, init=False)
    real_n_: dict[str, int] = field(default_factory=dict, init=False)
    agreement_: dict[str, float] = field(default_factory=dict, init=False)
    chance_: dict[str, float] = field(default_factory=dict, init=False)
    skill_: dict[str, float] = field(default_factory=dict, init=False)
    consensus_: dict[str, Hashable] = field(default_factory=dict, init=False)
    crowd_: float | None = field(default=None, init=False)
    prior_: np.ndarray = field(default_factory=lambda: _UNIFORM, init=False, repr=False)
    positions_: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False)
    _evidence: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False)

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

    def fit(
        self,
        answers: Iterable[tuple[str, str, Hashable]],
        truth: Mapping[str, Hashable] | None = None,
    ) -> CrowdAgreement:
        by_task: dict[str, dict[str, Hashable]] = {}
        order: list[tuple[str, str]] = []
        first: dict[tuple[str, str], int] = {}
        for at, (task, worker, label) in enumerate(answers):
            if self.tolerance and (isinstance(label, bool) or not isinstance(label, int | float)):
                raise ValueError(
                    f"task {task!r}: label {label!r} of worker {worker!r} is not a number; "
                    "ordinal agreement (tolerance > 0) needs numeric labels"
                )
            if worker not in by_task.setdefault(task, {}):
                order.append((task, worker))
                first[(task, worker)] = at
            by_task[task][worker] = label
        known = {task: label for task, label in (truth or {}).items() if task in by_task}
        workers = sorted({worker for given in by_task.values() for worker in given})
        index = {worker: i for i, worker in enumerate(workers)}
        blocks = [
            self._block(question, tasks, by_task, known, index)
            for question, tasks in _by_question(by_task).items()
        ]
        skill = np.full(len(workers), _START)
        for _ in range(_ROUNDS):
            judged_with = skill
            for block in blocks:
                block.judge(skill)
            skill = _update(blocks, skill)
        # The accuracies' updates read `own` only: the known answers' weighting is for the
        # evidence below, so it is done once, with the accuracies of the last judgement.
        for block in blocks:
            if self.real_difficulty:
                block.weigh_real(judged_with)
            block.weigh_known(judged_with)
        # Each worker's evidence in answer order, per judged task: (the posterior that their
        # label is right, the chance a uniform guess would be). A task where every label counts
        # as right (ordinal labels of which only the truth's neighbours have been given yet)
        # tests nobody: its chance is 1, and a threshold there would be 1 too.
        position = {key: n for n, key in enumerate(order)}
        rows = sorted(
            (position[(block.tasks[block.task[j]], workers[block.worker[j]])],
             block.worker[j], block.near[j], block.chance[j], block.truth[block.task[j]] < 0)
            for block in blocks
            for j in np.flatnonzero(block.judged & (block.chance < _ALL_RIGHT))
        )  # fmt: skip
        evidence: dict[int, list[tuple[float, float]]] = {}
        where: dict[int, list[int]] = {}
        items: dict[int, set[str]] = {}
        real: dict[int, int] = {}
        for n, w, q, chance, unknown in rows:
            evidence.setdefault(int(w), []).append((float(q), float(chance)))
            where.setdefault(int(w), []).append(first[order[n]])
            items.setdefault(int(w), set()).add(order[n][0].rsplit("/", 1)[0])
            real[int(w)] = real.get(int(w), 0) + bool(unknown)
        self._evidence = {workers[w]: np.array(e) for w, e in evidence.items()}
        self.positions_ = {workers[w]: np.array(a, dtype=int) for w, a in where.items()}
        self.prior_ = _crowd_prior([_likelihood(e) for e in self._evidence.values()])
        self.n_ = {w: len(e) for w, e in self._evidence.items()}
        self.items_ = {workers[w]: len(found) for w, found in items.items()}
        self.real_n_ = {workers[w]: real[w] for w in evidence}
        self.agreement_ = {w: float(self._posterior(e) @ _GRID) for w, e in self._evidence.items()}
        self.chance_ = {w: float(np.mean(e[:, 1])) for w, e in self._evidence.items()}
        self.skill_ = dict(zip(workers, map(float, skill), strict=True))
        lead = {w: (self.agreement_[w] - self.chance_[w]) * self.n_[w] for w in self.n_}
        ahead = {w: x for w, x in lead.items() if x > 0}
        total = sum(ahead.values())
        level = sum(x * self.agreement_[w] for w, x in ahead.items())
        self.crowd_ = level / total if total else None
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
        known: Mapping[str, Hashable],
        worker_index: Mapping[str, int],
    ) -> _Question:
        """The answers to one question as arrays; its labels declared, or those seen."""
        seen = {label for task in tasks for label in by_task[task].values()}
        seen |= {known[task] for task in tasks if task in known}
        declared = list((self.labels or {}).get(question) or [])
        labels = declared + sorted(seen - set(declared), key=repr)
        index = {label: i for i, label in enumerate(labels)}
        rows = [(t, worker_index[w], index[x]) for t, task in enumerate(tasks)
                for w, x in by_task[task].items()]  # fmt: skip
        task, worker, label = (np.array(column, dtype=int) for column in zip(*rows, strict=True))
        sizes = np.bincount(task, minlength=len(tasks))
        truth = np.array([index[known[t]] if t in known else -1 for t in tasks])
        judged = ((sizes[task] - 1 >= self.min_others) | (truth[task] >= 0)) & (len(labels) > 1)
        close = np.array([[self._near(a, b) for b in labels] for a in labels], dtype=float)
        return _Question(tasks, labels, close, task, worker, label, truth, judged)

    def _near(self, a: Hashable, b: Hashable) -> bool:
        if self.tolerance == 0:
            return a == b
        return abs(float(a) - float(b)) <= self.tolerance  # type: ignore[arg-type]

    def fit_predict(self, answers: Iterable[tuple[str, str, Hashable]]) -> dict[str, float]:
        return self.fit(answers).agreement_

    def threshold(self, worker: str) -> float:
        """The accuracy below which `worker` is closer to chance than to the crowd."""
        chance = self.chance_.get(worker, 0.0)
        crowd = self.crowd_ if self.crowd_ is not None else 1.0
        return chance + self.margin * max(crowd - chance, 0.0)

    def recent(self, worker: str) -> tuple[float | None, int]:
        """The posterior mean accuracy over the last `window` tasks, and how many there are."""
        evidence = self._evidence.get(worker)
        if evidence is None:
            return None, 0
        last = evidence[-self.window :]
        return float(self._posterior(last) @ _GRID), len(last)

    def prob_below(self, worker: str, threshold: float, recent: bool = False) -> float:
        """P(accuracy < threshold) under the posterior (of the recent window's tasks)."""
        evidence = self._evidence.get(worker, np.zeros((0, 2)))
        if recent:
            evidence = evidence[-self.window :]
        below = _GRID < threshold  # noqa: SIM300 (the grid's points below the threshold)
        return float(self._posterior(evidence)[below].sum())

    def stopped_reading(self, worker: str, checks: Sequence[tuple[int, bool]] = ()) -> Verdict:
        """P(the worker is not reading now) from their judged answers and `checks`, the
        attention checks as (index in the fitted answers, passed), in order (qc.drift)."""
        evidence = self._evidence.get(worker, np.zeros((0, 2)))
        placed = np.searchsorted(self.positions_.get(worker, np.zeros(0, dtype=int)),
                                 [at for at, _ in checks])  # fmt: skip
        loglik = _loglik(evidence[:, 0], evidence[:, 1])
        # A random answer is right with the chance level c: _loglik at p = c is log c.
        chance = np.log(np.clip(evidence[:, 1], 1e-6, 1 - 1e-6) + 1e-12)
        reading = _GRID >= self.threshold(worker)  # noqa: SIM300 (the grid's points)
        return stopped_reading(
            loglik, chance, self.prior_, reading,
            [(int(n), passed) for n, (_, passed) in zip(placed, checks, strict=True)],
        )  # fmt: skip

    def _posterior(self, evidence: np.ndarray) -> np.ndarray:
        """The posterior of an accuracy on the grid from (q, chance) rows: the crowd's prior
        times the rows' likelihood."""
        post = self.prior_ * _likelihood(evidence)
        return post / post.sum()


def _update(blocks: list[_Question], skill: np.ndarray) -> np.ndarray:
    """One EM step for the accuracies: the expected share of right answers, where an answer
    is right with probability q p / (q p + (1 - q)(1 - p)/(K - 1)); a Beta(1, 1) prior keeps
    a short record modest, and real items count REAL_WEIGHT of a known answer."""
    right, count = np.zeros(len(skill)), np.zeros(len(skill))
    for block in blocks:
        j = block.judged
        if block.k < 2 or not j.any():
            continue
        q, p, who = block.own[j], skill[block.worker[j]], block.worker[j]
        weight = np.where(block.truth[block.task[j]] >= 0, 1.0, REAL_WEIGHT)
        hit = q * p
        correct = hit / (hit + (1 - q) * (1 - p) / (block.k - 1))
        right += np.bincount(who, weights=weight * correct, minlength=len(skill))
        count += np.bincount(who, weights=weight, minlength=len(skill))
    return np.clip((right + 1) / (count + 2), *_CLIP)


def _loglik(near: np.ndarray, chance: np.ndarray) -> np.ndarray:
    """log P(label | accuracy) on the grid, up to a constant, per answer: near is the
    posterior that the label is (within tolerance of) the truth, chance the share of labels
    that would be, for a worker who is right with the grid's p and otherwise picks among the
    other labels evenly."""
    q, c = near[:, None], np.clip(chance, 1e-6, 1 - 1e-6)[:, None]
    like = q * _GRID + (1 - q) * (1 - _GRID) * c / (1 - c)
    # An easy task's q lies outside [0, 1] (weigh_real): keep its labels possible.
    sharp = (q < 0) | (q > 1)
    like = np.where(sharp, np.clip(like, SLIP * c / (1 - c), 1 - SLIP), like)
    return np.log(like + 1e-12)


def _likelihood(evidence: np.ndarray) -> np.ndarray:
    """The likelihood of an accuracy on the grid from (q, chance) rows, scaled to a maximum
    of 1 (flat without rows)."""
    if len(evidence) == 0:
        return np.ones(len(_GRID))
    loglik = _loglik(evidence[:, 0], evidence[:, 1]).sum(axis=0)
    return np.exp(loglik - loglik.max())


def _crowd_prior(likelihoods: list[np.ndarray]) -> np.ndarray:
    """The distribution of accuracies among workers with these likelihoods (the NPMLE, by EM:
    each round, the mean of the workers' posteriors under the last estimate), mixed with the
    uniform prior by weight W / (W + PRIOR_WORKERS).

    >>> at = lambda p: np.exp(-((_GRID - p) ** 2) / 0.002)
    >>> prior = _crowd_prior([at(0.25)] * 20 + [at(0.8)] * 20)
    >>> [round(float(prior[_GRID < 0.5].sum()), 2), round(float(prior[_GRID >= 0.5].sum()), 2)]
    [0.5, 0.5]
    >>> round(float(prior[(_GRID > 0.4) & (_GRID < 0.6)].sum()), 2)  # the uniform share
    0.04
    """
    if not likelihoods:
        return _UNIFORM
    like = np.array(likelihoods)
    crowd = _UNIFORM
    for _ in range(_PRIOR_ROUNDS):
        post = like * crowd
        new = (post / post.sum(axis=1, keepdims=True)).mean(axis=0)
        settled = np.abs(new - crowd).sum() < 1e-6
        crowd = new
        if settled:
            break
    weight = len(likelihoods) / (len(likelihoods) + PRIOR_WORKERS)
    return weight * crowd + (1 - weight) * _UNIFORM


@dataclass
class _Question:
    """One question's answers as arrays (one entry per answer), judged against the others'.

    judge(skill) sets, per answer, `own`: the posterior probability of its label from the
    other answers to its task (1 or 0 where the truth is known), `near`: the same for the
    labels within tolerance of it (where the truth is known, softened by `weigh_known` after
    the last judgement), `chance`: the share of labels a uniform guess would find near the
    truth there; and `consensus`, per task, the most probable truth from every answer.
    """

    tasks: list[str]
    labels: list[Hashable]
    close: np.ndarray  # close[a, b]: labels a and b are within tolerance
    task: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    truth: np.ndarray  # per task: the known label's index, or -1
    judged: np.ndarray
    own: np.ndarray = field(init=False)
    near: np.ndarray = field(init=False)
    chance: np.ndarray = field(init=False)
    consensus: np.ndarray = field(init=False)

    @property
    def k(self) -> int:
        return len(self.labels)

    def judge(self, skill: np.ndarray) -> None:
        k, n = self.k, len(self.label)
        if k == 1:
            self.own = self.near = self.chance = np.ones(n)
            self.consensus = np.zeros(len(self.tasks), dtype=int)
            return
        # A worker right with probability p gives the truth's label with p, each other with
        # (1 - p) / (k - 1); p is kept at or above chance: below it, a label says nothing.
        rate = np.clip(skill[self.worker], 1 / k, _CLIP[1])
        hit, miss = np.log(rate), np.log((1 - rate) / (k - 1))
        mine = np.repeat(miss[:, None], k, axis=1)
        mine[np.arange(n), self.label] = hit
        tasks = len(self.tasks)
        # Per task, the sum of its answers' rows (bincount: np.add.at is slow).
        total = np.bincount(self.task, weights=miss, minlength=tasks)[:, None] + np.bincount(
            self.task * k + self.label, weights=hit - miss, minlength=tasks * k
        ).reshape(tasks, k)
        self.consensus = np.where(self.truth >= 0, self.truth, total.argmax(axis=1))
        logits = total[self.task] - mine  # leave the answer's own label out
        posterior = np.exp(logits - logits.max(axis=1, keepdims=True))
        posterior /= posterior.sum(axis=1, keepdims=True)
        known = self.truth[self.task]
        clamped = known >= 0
        posterior[clamped] = 0.0
        posterior[clamped, known[clamped]] = 1.0
        self.own = posterior[np.arange(n), self.label]
        self.near = (posterior * self.close[self.label]).sum(axis=1)
        self.chance = posterior @ (self.close.sum(axis=0) / k)

    def weigh_real(self, skill: np.ndarray) -> None:
        """Weigh `near` on real tasks of categorical labels by how hard readers find each,
        after `judge` with the same accuracies, as `weigh_known` does where the truth is known.

        A task's readers' accuracy a_t comes from how often the *other* answers agree pairwise
        (two readers right with a agree with a^2 + (1 - a)^2 / (K - 1)), each pair weighed by
        both readers' skill above chance, shrunk towards the question's by DIFFICULTY_PRIOR
        readers' worth; the answer's own worker is in no pair, so a guess cannot make a task
        look hard. s = (a_t - c) / (a - c), at most EASY_MAX: a task every reader agrees on is
        a sharper test than a typical one, one readers split on a weaker one. A worker right
        with p on a typical task is right there with c + (p - c) s (kept off 0 and 1 by SLIP).
        """
        k = self.k
        real = self.judged & (self.truth[self.task] < 0)
        if k < 2 or not real.any() or not (self.close == np.eye(k)).all():
            return  # ordinal labels: agreement within tolerance is no such simple function
        tasks, t, x, c = len(self.tasks), self.task, self.label, 1 / k
        w = np.clip((skill[self.worker] - c) / (1 - c), 0.0, 1.0)
        total = np.bincount(t, weights=w, minlength=tasks)
        squares = np.bincount(t, weights=w * w, minlength=tasks)
        by_label = np.bincount(t * k + x, weights=w, minlength=tasks * k).reshape(tasks, k)
        agree_all = ((by_label**2).sum(axis=1) - squares) / 2
        pairs_all = (total**2 - squares) / 2
        is_real = np.bincount(t[real], minlength=tasks) > 0
        if pairs_all[is_real].sum() <= 0:
            return
        overall = _accuracy_of_agreement(agree_all[is_real].sum() / pairs_all[is_real].sum(), k)
        if overall <= c:
            return
        # Leave the answer's own worker out of every pair.
        agree = agree_all[t] - w * (by_label[t, x] - w)
        pairs = pairs_all[t] - w * (total[t] - w)
        share = np.divide(agree, pairs, out=np.full(len(t), c), where=pairs > 1e-12)
        readers = total[t] - w
        on_task = (readers * _accuracy_of_agreement(share, k) + DIFFICULTY_PRIOR * overall) / (
            readers + DIFFICULTY_PRIOR
        )
        s = np.clip((on_task - c) / (overall - c), 0.0, EASY_MAX)
        self.near[real] = s[real] * self.near[real] + (1 - s[real]) * self.chance[real]

    def weigh_known(self, skill: np.ndarray) -> None:
        """Soften `near` where the truth is known by how much of a reader's skill the task
        shows (`_discrimination`), after `judge` with the same accuracies."""
        known = self.truth[self.task]
        clamped = known >= 0
        if self.k > 1 and clamped.any():
            s = self._discrimination(skill, clamped, known)
            self.near[clamped] = s * self.near[clamped] + (1 - s) * self.chance[clamped]

    def _discrimination(
        self, skill: np.ndarray, clamped: np.ndarray, known: np.ndarray
    ) -> np.ndarray:
        """Per answer on a task of known truth, how much of a reader's skill that task shows:
        s = (a_t - c) / (a - c) in [0, 1], a_t being the readers' accuracy on the task (the
        answer's own worker left out, shrunk towards a by DIFFICULTY_PRIOR readers' worth) and a
        their accuracy over the question's known tasks, c the chance level.

        A worker right with p is then right on the task with c + (p - c) s: an item most
        readers get wrong says little about who gets it wrong too, one they all get right is
        a full test. That is the one-coin likelihood with the known truth's posterior q
        softened to s q + (1 - s) c, which is how it is applied. Readers weigh by how far
        their skill is above chance, so guessers, right at chance anywhere, do not make an
        item look hard.
        """
        task, worker, label = self.task[clamped], self.worker[clamped], self.label[clamped]
        c = self.chance[clamped]
        right = self.close[label, known[clamped]]
        # c = 1 (every label within tolerance of the truth): nobody shows skill there.
        weight = np.clip((skill[worker] - c) / np.maximum(1 - c, 1e-12), 0.0, 1.0)
        tasks = len(self.tasks)
        weights = np.bincount(task, weights=weight, minlength=tasks)
        rights = np.bincount(task, weights=weight * right, minlength=tasks)
        if weights.sum() <= 0:
            return np.ones(len(task))
        overall = rights.sum() / weights.sum()
        own_w, own_r = weights[task] - weight, rights[task] - weight * right
        on_task = (own_r + DIFFICULTY_PRIOR * overall) / (own_w + DIFFICULTY_PRIOR)
        spread = overall - c
        safe = np.where(spread > 0, spread, 1.0)
        return np.where(spread > 0, np.clip((on_task - c) / safe, 0.0, 1.0), 1.0)


def _accuracy_of_agreement(share: np.ndarray | float, k: int) -> np.ndarray:
    """The accuracy a at which two one-coin readers of K labels agree with `share`: the root
    above chance of a^2 + (1 - a)^2 / (K - 1) = share (chance itself below 1/K).

    >>> round(float(_accuracy_of_agreement(0.8**2 + 0.2**2 / 3, 4)), 3)
    0.8
    """
    inside = np.maximum((k - 1) * (k * np.asarray(share, dtype=float) - 1), 0.0)
    return (1 + np.sqrt(inside)) / k


def _by_question(by_task: Mapping[str, object]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for task in by_task:
        out.setdefault(task.rsplit("/", 1)[-1], []).append(task)
    return out
