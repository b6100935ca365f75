"""Gold items: how sure we are of a worker's accuracy, how often to test it, and new gold.

A worker's gold accuracy gets a Beta posterior, so a decision waits until the evidence is
credible instead of firing on one unlucky item; the same posterior sets how often gold is
served (gold tapers for workers credibly above "trusted", in the spirit of CrowdFlower's
adaptive test-question rates); and items on which trusted workers agree can become gold.

A gold item most readers miss is no full test: missing it is what a reader does too. Weighed
by difficulty (`GoldConfidence.fit_items`), a worker right with p on a typical gold item is
right on item g with c + (p - c) s_g, c being a random answer's accuracy and s_g in [0, 1] how
much of a reader's skill g shows (the readers' accuracy on g against their accuracy on all
gold, as `qc.agreement` weighs known answers against the crowd). With every s_g = 1 this is
the Beta posterior above.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy import stats
from scipy.special import xlogy

from qc.agreement import DIFFICULTY_PRIOR
from qc.config import GoldPolicy

# Where a HIT type's gold threshold sits between a random answer's accuracy (0) and a perfect
# one (1): far enough above chance that a random clicker is credibly below it after a few gold
# items, low enough that careful workers (well above it) are never judged by bad luck.
GOLD_MARGIN = 0.25
# The accuracies a difficulty-weighed posterior is computed at (midpoints of equal steps).
_GRID = (np.arange(1000) + 0.5) / 1000


def threshold_from_chance(chance: float, margin: float = GOLD_MARGIN) -> float:
    """The gold threshold for a type whose random answer scores `chance`: chance + margin * (1 -
    chance), rounded to 4 places.

    >>> threshold_from_chance(0.25), threshold_from_chance(0.28), threshold_from_chance(0.52)
    (0.4375, 0.46, 0.64)
    """
    _check_unit("chance", chance)
    _check_unit("margin", margin)
    return round(chance + margin * (1 - chance), 4)


def _check_prior(prior: tuple[float, float]) -> None:
    if len(prior) != 2 or not all(
        isinstance(p, int | float) and not isinstance(p, bool) and math.isfinite(p) and p > 0
        for p in prior
    ):
        raise ValueError("prior must be two positive numbers (alpha, beta), e.g. (1.0, 1.0)")


@dataclass
class GoldConfidence:
    """Beta-Bernoulli model of each worker's gold accuracy.

    Each gold answer is a Bernoulli trial with the worker's accuracy p, p ~ Beta(alpha0,
    beta0) a priori, so after s successes in n answers p ~ Beta(alpha0 + s, beta0 + n - s)
    (e.g. Gelman et al., Bayesian Data Analysis, ch. 2). A partly right answer (accuracy a in
    [0, 1], e.g. 2 of 3 spans) adds a fractional success: alpha += a, beta += 1 - a.

    Example:
        >>> model = GoldConfidence().fit([("a", 1.0), ("a", 0.0), ("a", 1.0), ("b", 0.0)])
        >>> model.alpha_["a"], model.beta_["a"], model.n_["a"]
        (3.0, 2.0, 3)
        >>> model.mean("a"), round(model.prob_below("b", 0.5), 2)
        (0.6, 0.75)

    `fit_items` weighs each answer by its item's difficulty; `chance` is then a random
    answer's accuracy (None: 0), and `shows_` gives per worker the rows (accuracy, s).
    """

    prior: tuple[float, float] = (1.0, 1.0)
    chance: float | None = None
    alpha_: dict[str, float] = field(default_factory=dict, init=False)
    beta_: dict[str, float] = field(default_factory=dict, init=False)
    n_: dict[str, int] = field(default_factory=dict, init=False)
    shows_: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.prior = tuple(self.prior)  # type: ignore[assignment]
        _check_prior(self.prior)
        if self.chance is not None:
            _check_unit("chance", self.chance)
            if self.chance >= 1:
                raise ValueError(f"chance must be below 1, got {self.chance!r}")

    def fit(self, results: Iterable[tuple[str, float]]) -> GoldConfidence:
        alpha0, beta0 = self.prior
        alpha: dict[str, float] = {}
        beta: dict[str, float] = {}
        n: dict[str, int] = {}
        for worker, accuracy in results:
            if (
                isinstance(accuracy, bool)
                or not isinstance(accuracy, int | float)
                or not 0 <= accuracy <= 1
            ):
                raise ValueError(
                    f"gold accuracy of worker {worker!r} is {accuracy!r}; "
                    "give a number in [0, 1] (1 = matches the gold answer)"
                )
            alpha[worker] = alpha.get(worker, float(alpha0)) + accuracy
            beta[worker] = beta.get(worker, float(beta0)) + 1 - accuracy
            n[worker] = n.get(worker, 0) + 1
        self.alpha_, self.beta_, self.n_ = alpha, beta, n
        self.shows_ = {}
        return self

    def fit_items(self, results: Iterable[tuple[str, Hashable, float]]) -> GoldConfidence:
        """`fit` from (worker, item, accuracy) triples, with each answer weighed by how much of
        a reader's skill its item shows: s = (r_g - c) / (r - c) in [0, 1], r_g being the
        readers' accuracy on the item (the answer's own worker left out, shrunk towards r by
        DIFFICULTY_PRIOR readers' worth) and r theirs over all gold. Readers weigh by how far
        their posterior mean is above chance, so guessers do not make an item look hard.

        >>> easy = [(w, "easy", 1.0) for w in "abcdefghijkl"]
        >>> hard = [(w, "hard", float(w in "ab")) for w in "abcdefghijkl"]
        >>> model = GoldConfidence(chance=0.25).fit_items(easy + hard)
        >>> [round(float(s), 2) for s in model.shows_["c"][:, 1]]  # the hard item counts less
        [1.0, 0.5]
        >>> round(model.weight("c"), 2), model.n_["c"]
        (1.5, 2)
        """
        results = list(results)
        self.fit((worker, accuracy) for worker, _, accuracy in results)
        c = 0.0 if self.chance is None else self.chance
        reader = {w: min(max((self.mean(w) - c) / (1 - c), 0.0), 1.0) for w in self.n_}
        weights: dict[Hashable, float] = {}
        rights: dict[Hashable, float] = {}
        # Each worker's own share of an item's figures, left out when judging them there (all
        # of it, should they have answered the item more than once).
        own: dict[tuple[str, Hashable], tuple[float, float]] = {}
        for worker, item, accuracy in results:
            weight = reader[worker]
            weights[item] = weights.get(item, 0.0) + weight
            rights[item] = rights.get(item, 0.0) + weight * accuracy
            mine = own.get((worker, item), (0.0, 0.0))
            own[(worker, item)] = (mine[0] + weight, mine[1] + weight * accuracy)
        total = sum(weights.values())
        overall = sum(rights.values()) / total if total > 0 else None
        rows: dict[str, list[tuple[float, float]]] = {}
        for worker, item, accuracy in results:
            shows = 1.0
            if overall is not None and overall > c:
                mine_w, mine_r = own[(worker, item)]
                on_item = (rights[item] - mine_r + DIFFICULTY_PRIOR * overall) / (
                    weights[item] - mine_w + DIFFICULTY_PRIOR
                )
                shows = min(max((on_item - c) / (overall - c), 0.0), 1.0)
            rows.setdefault(worker, []).append((float(accuracy), shows))
        self.shows_ = {worker: np.array(found) for worker, found in rows.items()}
        return self

    def weight(self, worker: str) -> float:
        """The worker's gold answers' worth in full tests (their count, unweighed)."""
        shows = self.shows_.get(worker)
        return float(shows[:, 1].sum()) if shows is not None else float(self.n_.get(worker, 0))

    def fit_predict(
        self,
        results: Iterable[tuple[str, float]],
        threshold: float = 0.5,
        credibility: float = 0.95,
        min_gold: int = 3,
    ) -> set[str]:
        return self.fit(results).credibly_below(threshold, credibility, min_gold)

    def posterior(self, worker: str) -> tuple[float, float]:
        """(alpha, beta) for `worker`; the prior's for a worker without gold answers."""
        if worker in self.alpha_:
            return self.alpha_[worker], self.beta_[worker]
        return float(self.prior[0]), float(self.prior[1])

    def mean(self, worker: str) -> float:
        alpha, beta = self.posterior(worker)
        return alpha / (alpha + beta)

    def prob_below(self, worker: str, threshold: float) -> float:
        """P(accuracy < threshold): the posterior Beta CDF at `threshold`, or, where
        `fit_items` found items that show less than a full test, the posterior on a grid."""
        _check_unit("threshold", threshold)
        shows = self.shows_.get(worker)
        if shows is None or bool((shows[:, 1] >= 1).all()):
            alpha, beta = self.posterior(worker)
            return float(stats.beta.cdf(threshold, alpha, beta))
        c = 0.0 if self.chance is None else self.chance
        alpha0, beta0 = self.prior
        grid = _GRID
        right = c + (grid[:, None] - c) * shows[:, 1]
        accuracy = shows[:, 0]
        # xlogy: a term whose weight is 0 is 0, even where its probability is 0.
        loglik = (xlogy(accuracy, right) + xlogy(1 - accuracy, 1 - right)).sum(axis=1)
        loglik += xlogy(alpha0 - 1, grid) + xlogy(beta0 - 1, 1 - grid)
        post = np.exp(loglik - loglik.max())
        return float(post[grid < threshold].sum() / post.sum())

    def credible_interval(self, worker: str, level: float = 0.95) -> tuple[float, float]:
        """The equal-tailed interval holding `level` of the posterior."""
        if not 0 < level < 1:
            raise ValueError(f"level must be between 0 and 1 (exclusive), got {level!r}")
        alpha, beta = self.posterior(worker)
        low, high = stats.beta.interval(level, alpha, beta)
        return float(low), float(high)

    def credibly_below(self, threshold: float, credibility: float, min_gold: int) -> set[str]:
        """Workers with at least `min_gold` answers and P(accuracy < threshold) >= credibility."""
        _check_unit("threshold", threshold)
        _check_unit("credibility", credibility)
        return {
            worker
            for worker, n in self.n_.items()
            if n >= min_gold and self.prob_below(worker, threshold) >= credibility
        }


def _check_unit(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}")


def gold_rate(
    alpha: float, beta: float, policy: GoldPolicy, crowd_doubt: float | None = None
) -> float:
    """Probability of serving a gold item next, given the worker's Beta(alpha, beta) posterior
    of gold accuracy and, once they have been compared with the crowd, `crowd_doubt`: the
    probability that their accuracy is below the crowd's threshold (qc.agreement).

    rate = min_rate + (max_rate - min_rate) * doubt. Before any comparison with the crowd,
    doubt is P(gold accuracy < trusted): new workers see gold near max_rate, and workers
    credibly above `trusted` taper to min_rate. After it, doubt is the larger of crowd_doubt
    and P(gold accuracy < threshold): a worker the crowd vouches for does real work, one it
    doubts meets gold (each a full test) until the rules can decide, and one whose gold
    answers are poor keeps meeting gold whatever the crowd says. The posterior here counts
    every gold answer in full, where the gold rule weighs them by difficulty (`fit_items`):
    a worker whose misses were on hard items meets more gold, which settles their case.

    With the policy's `vouch_after` (0 by default), the crowd's vouching counts only once
    the worker has answered that many gold items; before, their doubt is the larger of
    crowd_doubt and the gold-alone P(gold accuracy < trusted). Early vouching rests on two or
    three real items, and workers who answer alike vouch for each other where they meet: in
    the QC benchmark a ring of colluders who met on the same real items stood at 0.7
    against the crowd while guessing, and one of them met one gold item in its first 20
    answers. More gold early also means more gold misses early for careful workers: the
    benchmark measured both sides (benchmarks/RESULTS.md, fourteenth look), so it is a
    study's choice.

    >>> policy = GoldPolicy()
    >>> round(gold_rate(1, 1, policy), 3), round(gold_rate(21, 1, policy), 3)
    (0.61, 0.056)
    >>> round(gold_rate(4, 2, policy, crowd_doubt=0.01), 3)  # 3 of 4 gold right, crowd agrees
    0.181
    >>> round(gold_rate(4, 2, policy, crowd_doubt=0.7), 3)
    0.54
    >>> round(gold_rate(2, 1, GoldPolicy(vouch_after=3), crowd_doubt=0.01), 3)  # 1 of 3 in
    0.498
    """
    _check_prior((alpha, beta))
    if crowd_doubt is not None:
        _check_unit("crowd_doubt", crowd_doubt)
    # alpha and beta start from policy.prior, and each gold answer adds 1 to their sum (its
    # accuracy to alpha, the rest to beta); vouch_after 0 never counts them.
    answered = alpha + beta - sum(policy.prior)
    vouched = policy.vouch_after == 0 or answered >= policy.vouch_after - 1e-9
    if crowd_doubt is not None and vouched:
        doubt = max(crowd_doubt, float(stats.beta.cdf(policy.threshold, alpha, beta)))
    else:  # no comparison with the crowd yet, or too few gold answers for its vouching
        doubt = max(crowd_doubt or 0.0, float(stats.beta.cdf(policy.trusted, alpha, beta)))
    return policy.min_rate + (policy.max_rate - policy.min_rate) * doubt


def promote_gold(
    answers: Iterable[tuple[str, str, Hashable]],
    trusted: set[str],
    min_agreeing: int = 3,
    min_share: float = 1.0,
) -> dict[str, Hashable]:
    """Items whose trusted workers agree enough to serve them as gold: item -> label.

    From (item, worker, label) answers, only trusted workers' count (one vote each: a
    worker's last answer). An item is promoted when at least `min_agreeing` trusted workers
    gave its most common label and that label has a share of at least `min_share` of the
    trusted votes; a tie for most common label never promotes.

    >>> answers = [("x", "a", 1), ("x", "b", 1), ("x", "c", 1), ("x", "spam", 0),
    ...            ("y", "a", 1), ("y", "b", 0), ("y", "c", 1)]
    >>> promote_gold(answers, {"a", "b", "c"})
    {'x': 1}
    """
    if isinstance(min_agreeing, bool) or not isinstance(min_agreeing, int) or min_agreeing < 1:
        raise ValueError(f"min_agreeing must be a whole number of 1 or more, got {min_agreeing!r}")
    if not 0 < min_share <= 1:
        raise ValueError(f"min_share must be greater than 0 and at most 1, got {min_share!r}")
    votes: dict[str, dict[str, Hashable]] = {}
    for item, worker, label in answers:
        if worker in trusted:
            votes.setdefault(item, {})[worker] = label
    promoted: dict[str, Hashable] = {}
    for item in sorted(votes):
        counts = Counter(votes[item].values()).most_common()
        label, top = counts[0]
        if len(counts) > 1 and counts[1][1] == top:
            continue
        if top >= min_agreeing and top / len(votes[item]) >= min_share:
            promoted[item] = label
    return promoted
