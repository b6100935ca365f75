"""The truth's posterior on a task with a few workers left out, cheaply (qc.collusion).

Collusion's tests ask, task by task, what the *other* workers say the truth is: for a pair,
everyone but the pair; for a worker against a group, everyone outside both. Recomputing that
from the task's answers for each of hundreds of pairs was the costliest part of a QC refresh;
kept per task, with each worker's share, leaving a worker out is one subtraction.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping

# How strongly a task's wrong labels lean to the question's labels before any is seen there
# (pseudo-counts, spread over the labels).
PRIOR = 1.0


class LeaveOut:
    """Per task, the one-coin evidence for each label being the truth and the count of each
    label given, so that the truth's posterior with a few workers left out costs O(k) per
    worker left out, not a pass over the task's workers (the screen tests every pair).

    Under the one-coin model a worker of accuracy r (clamped to [1/k, 0.98]) who gave label
    i multiplies label i's odds of being the truth by r (k - 1) / (1 - r), the others' by 1.
    A known truth (gold) is the posterior itself.
    """

    def __init__(
        self,
        by_task: Mapping[str, Mapping[str, Hashable]],
        labels: Mapping[str, list[Hashable]],
        skill: Mapping[str, float],
        known: Mapping[str, Hashable],
    ) -> None:
        self.options: dict[str, list[Hashable]] = {}
        self.weight: dict[str, list[float]] = {}
        self.counts: dict[str, list[float]] = {}
        self.given: dict[str, dict[str, tuple[int, float]]] = {}
        self.known: dict[str, int] = {}
        for task, given in by_task.items():
            options = labels[task.rsplit("/", 1)[-1]]
            k = len(options)
            index = {x: i for i, x in enumerate(options)}
            weight = [0.0] * k
            counts = [PRIOR / k] * k
            own: dict[str, tuple[int, float]] = {}
            for worker, label in given.items():
                i = index[label]
                rate = min(max(skill[worker], 1 / k), 0.98) if k > 1 else 1.0
                w = math.log(rate * (k - 1) / (1 - rate)) if k > 1 else 0.0
                weight[i] += w
                counts[i] += 1
                own[worker] = (i, w)
            self.options[task], self.weight[task] = options, weight
            self.counts[task], self.given[task] = counts, own
            if task in known and known[task] in index:
                self.known[task] = index[known[task]]

    def _without(self, task: str, left_out: Iterable[str]) -> tuple[list[float], list[float], int]:
        """The truth's posterior and the label counts on `task` without `left_out`, and how
        many workers that leaves."""
        weight, counts = list(self.weight[task]), list(self.counts[task])
        own = self.given[task]
        gone = 0
        for worker in left_out:
            if worker in own:
                i, w = own[worker]
                weight[i] -= w
                counts[i] -= 1
                gone += 1
        k = len(weight)
        if task in self.known:
            post = [0.0] * k
            post[self.known[task]] = 1.0
        else:
            top = max(weight)
            post = [math.exp(x - top) for x in weight]
            norm = sum(post)
            post = [x / norm for x in post]
        return post, counts, len(own) - gone

    def pair_chance(self, task: str, a: str, b: str, p_a: float, p_b: float) -> float:
        """P(two independent workers of accuracies p_a and p_b give the same label on the
        task), the truth's posterior and the wrong labels' shares from the others."""
        if len(self.options[task]) < 2:
            return 1.0
        post, counts, _ = self._without(task, (a, b))
        total = sum(counts)
        squares = sum(c * c for c in counts)
        chance = 0.0
        for z, q in enumerate(post):
            spread = total - counts[z]
            same_wrong = (squares - counts[z] ** 2) / (spread * spread)
            chance += q * (p_a * p_b + (1 - p_a) * (1 - p_b) * same_wrong)
        return chance

    def give_chance(
        self, task: str, left_out: Collection[str], p: float, label: Hashable
    ) -> float | None:
        """P(an independent worker of accuracy p gives `label` on the task), from the workers
        outside `left_out`; None where fewer than two of them answered and the truth is
        not known (their posterior would be little more than the prior)."""
        options = self.options[task]
        if len(options) < 2:
            return 1.0
        post, counts, outside = self._without(task, left_out)
        if outside < 2 and task not in self.known:
            return None
        target = options.index(label)
        total = sum(counts)
        chance = 0.0
        for z, q in enumerate(post):
            if z == target:
                chance += q * p
            else:
                chance += q * (1 - p) * counts[target] / (total - counts[z])
        return chance
