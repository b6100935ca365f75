"""Collusion: workers who share their answers, found by agreeing more than their skills allow.

Two careful workers agree because both are often right; two colluders (or two workers pasting
one language model's output) agree whether or not they are right. So a pair is judged on how
often it gives the same label, against what two *independent* workers of their skills would.
For categories:
worker w gives the truth z with their accuracy p_w (from `qc.agreement.CrowdAgreement`) and
otherwise one of the other labels in the proportions the rest of the crowd chose them on that
task (smoothed towards the question's labels), so hard items, where careful workers err
alike, raise the expected agreement on their own; the truth's posterior comes from the other
workers' answers (the pair left out) under the same one-coin model. Summed over the pair's
shared tasks, the matches are tested against the Poisson-binomial law of those chances
(exact, by dynamic programming), Bonferroni-corrected over the pairs tested. For ordinal
labels (ratings, boundary guesses; `ordinal=True`) a worker's habits are offsets from the
consensus (a lenient rater answers one point above it), so two independent workers match on
a task with probability sum_d f_a(d) f_b(d), f_w being the worker's offset distribution
(smoothed towards the crowd's): two lenient raters agree often without colluding. Identical
explanations on the same item are evidence of their own, tested against how often two
independent writers of this crowd would match there: on a task, the chance that two of the
other workers' explanations there match (the pair left out), shrunk towards the same chance
over the whole study's explanations. People who
write their own words almost never match, so two matches convict; a crowd that writes from
a few stock phrases ("Sentence 3 repeats itself.") matches often, and needs many more.

A ring of four who each answer a third of the items shares too few with any one partner for
a pair to be convicted once the level is corrected for hundreds of pairs. So each worker is
also tested against groups: the components of a loose screen (pairs improbable at
`screen_alpha`, uncorrected) formed among the *other* workers, the worker left out, so the
group does not depend on the worker's own answers. Over every task the worker shares with
any member, a match is giving the group's label, and its chance is what the worker would give
independently (the one-coin model, the truth's posterior from the workers outside the group
and the worker; tasks with fewer than two such witnesses and no known truth are left out).
The family, Bonferroni-corrected, is the (worker, group) pairs that can be tested: tens, where
the pairs are hundreds. A ring member against the rest of the ring shares about all of their
tasks: 25 matches in 25 at a chance near 0.3 is p near 1e-13. Because a screened group can be
careful workers of like habits (the one-coin model does not know that careful people read an
item alike), each group's chances are calibrated by how far the crowd outside it matches it
beyond the model, and a conviction needs the group's label on nearly every shared task
(`copied`): copying gives all of them. A form's rating fields are read as scales
(`ordinal_questions`), as a rating type's are. Known answers (gold) are the truth's
posterior where given.

Pairs and group tests found are joined into groups (connected components), so a reviewer
sees who works together.

Example:
    >>> truth = {f"t{i}/best": i % 4 for i in range(20)}
    >>> answers = [(t, w, z) for t, z in truth.items() for w in "abcdef"]
    >>> answers += [(t, w, (z + 1 + i % 3) % 4) for i, (t, z) in enumerate(truth.items())
    ...             for w in ("x", "y")]
    >>> skills = {**{w: 0.95 for w in "abcdef"}, "x": 0.05, "y": 0.05}
    >>> model = Collusion().fit(answers, skills=skills)
    >>> model.groups_, sorted(model.partners_)
    ([['x', 'y']], ['x', 'y'])
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from qc.leave_out import LeaveOut

# A worker's accuracy where none is given.
_DEFAULT_SKILL = 0.7
# Answers' worth of the crowd's offsets that a worker's own offset distribution starts from.
_OFFSET_PRIOR = 4.0
# Explanations' worth of the study's texts that a task's own explanation distribution starts
# from (a task has a dozen explanations at most; the study has hundreds).
_TEXT_PRIOR = 4.0
# Workers outside a group a group test's calibration needs (Collusion._test_groups).
_REFERENCES = 3


@dataclass
class Collusion:
    """Pairs and groups of workers whose agreement is improbable for independent workers.

    Input: (task, worker, label) triples (a worker's last answer per task counts); a task is
    an (item, question) pair and its question is the text after its last "/".
    `explanations`: (task, worker) -> normalized explanation text, optional. `skills`:
    worker -> probability of giving the true label (`CrowdAgreement.skill_`). `consensus`:
    task -> the most probable truth (`CrowdAgreement.consensus_`), which ordinal offsets are
    measured from (ordinal: numeric labels; matches still mean equal labels).
    min_shared: tasks a pair must share to be tested; alpha: the family-wise level over the
    pairs tested; min_excess: matches beyond the expected a pair needs at least;
    min_same_explanations: identical explanations on shared items that convict on their own,
    when also improbable at `alpha` (Bonferroni) for independent writers of this crowd.
    ordinal_questions: questions (the text after a task's last "/") read as ordinal where
    `ordinal` is False (a form's rating fields beside its categories).
    `focus`: report only pairs with a worker in it, and test only its workers against
    groups (None: everyone); every pair is still tested for the screen. `truth`: task ->
    known answer. screen_alpha: the uncorrected level of the screen that forms the groups;
    max_group: the largest group tested (a large component is the crowd, not a ring);
    copied: the least share of the shared tasks on which a worker gives a group's label for
    the group test to convict (copying gives all of them; like habits, most).

    Fitted: pairs_ (one dict per convicted pair: workers, shared, matches, expected,
    p_value, same_explanations, same_expected, same_p_value), group_tests_ (one dict per
    worker convicted against a group: worker, group, shared, matches, expected, p_value),
    partners_ (worker -> sorted partners: of a convicted pair, or the group a worker was
    convicted against), groups_ (sorted lists of workers), tested_ (pairs sharing enough
    tasks, focus or not).
    """

    ordinal: bool = False
    min_shared: int = 4
    alpha: float = 1e-3
    min_excess: float = 3.0
    min_same_explanations: int = 2
    screen_alpha: float = 1e-3
    max_group: int = 8
    copied: float = 0.9
    ordinal_questions: frozenset[str] = frozenset()
    pairs_: list[dict[str, Any]] = field(default_factory=list, init=False)
    partners_: dict[str, list[str]] = field(default_factory=dict, init=False)
    groups_: list[list[str]] = field(default_factory=list, init=False)
    tested_: int = field(default=0, init=False)
    group_tests_: list[dict[str, Any]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        for name, least in (("min_shared", 1), ("min_same_explanations", 1), ("max_group", 2)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be a whole number of {least} or more, got {value!r}")
        if (
            isinstance(self.copied, bool)
            or not isinstance(self.copied, int | float)
            or not (0 <= self.copied <= 1)
        ):
            raise ValueError(f"copied must be between 0 and 1, got {self.copied!r}")
        if not isinstance(self.ordinal_questions, frozenset) or not all(
            isinstance(q, str) for q in self.ordinal_questions
        ):
            raise ValueError("ordinal_questions must be a frozenset of question names")
        for name in ("alpha", "screen_alpha"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
                raise ValueError(f"{name} must be between 0 and 1 (exclusive), got {value!r}")
        if isinstance(self.min_excess, bool) or not isinstance(self.min_excess, int | float):
            raise ValueError(f"min_excess must be a number, got {self.min_excess!r}")

    def fit(
        self,
        answers: Iterable[tuple[str, str, Hashable]],
        explanations: Mapping[tuple[str, str], str] | None = None,
        skills: Mapping[str, float] | None = None,
        focus: Collection[str] | None = None,
        consensus: Mapping[str, Hashable] | None = None,
        truth: Mapping[str, Hashable] | None = None,
    ) -> Collusion:
        by_task: dict[str, dict[str, Hashable]] = {}
        for task, worker, label in answers:
            by_task.setdefault(task, {})[str(worker)] = label
        universe: dict[str, set[Hashable]] = {}
        for task, given in by_task.items():
            universe.setdefault(_question(task), set()).update(given.values())
        labels = {q: sorted(v, key=repr) for q, v in universe.items()}
        skill = {w: (skills or {}).get(w, _DEFAULT_SKILL) for g in by_task.values() for w in g}
        known = {t: z for t, z in (truth or {}).items() if t in by_task}
        tasks_of: dict[str, set[str]] = {}
        for task, given in by_task.items():
            for worker in given:
                tasks_of.setdefault(worker, set()).add(task)
        texts = {key: text for key, text in (explanations or {}).items() if text}
        writing = _Writing(texts)
        centre = {**(consensus or {}), **known}
        scaled = {t for t in by_task if self._ordinal(t)}
        offsets = _offsets({t: by_task[t] for t in scaled}, centre) if scaled else {}
        board = LeaveOut(by_task, labels, skill, known)
        # Tasks each pair shares, counted task by task (no pair that shares none is visited).
        together: Counter[tuple[str, str]] = Counter()
        for given in by_task.values():
            together.update(combinations(sorted(given), 2))
        candidates = sorted(pair for pair, n in together.items() if n >= self.min_shared)
        self.tested_ = len(candidates)
        wanted = None if focus is None else {str(w) for w in focus}
        # Every pair is tested, focus or not: the loose screen below needs them all.
        self.pairs_ = []
        screen: dict[str, set[str]] = {}
        for a, b in candidates:
            shared = sorted(tasks_of[a] & tasks_of[b])
            found = self._test(a, b, shared, by_task, board, skill, writing, offsets)
            if found.pop("screened"):
                screen.setdefault(a, set()).add(b)
                screen.setdefault(b, set()).add(a)
            if found.pop("convicted") and (wanted is None or a in wanted or b in wanted):
                self.pairs_.append(found)
        partners: dict[str, set[str]] = {}
        for pair in self.pairs_:
            a, b = pair["workers"]
            partners.setdefault(a, set()).add(b)
            partners.setdefault(b, set()).add(a)
        self.group_tests_ = self._test_groups(
            screen, wanted, tasks_of, by_task, board, skill, offsets, centre
        )
        for found in self.group_tests_:
            partners.setdefault(found["worker"], set()).update(found["group"])
        self.partners_ = {w: sorted(p) for w, p in sorted(partners.items())}
        self.groups_ = _components(partners)
        return self

    def _ordinal(self, task: str) -> bool:
        return self.ordinal or _question(task) in self.ordinal_questions

    def _test_groups(
        self,
        screen: Mapping[str, set[str]],
        wanted: set[str] | None,
        tasks_of: Mapping[str, set[str]],
        by_task: Mapping[str, Mapping[str, Hashable]],
        board: LeaveOut,
        skill: Mapping[str, float],
        offsets: Mapping[str, Mapping[float, float]],
        centre: Mapping[str, Hashable],
    ) -> list[dict[str, Any]]:
        """Each worker against the groups the loose screen finds among the *other* workers
        (so a group does not depend on the worker's own answers): on every task the worker
        shares with the group, a match is giving the group's label (its members' most
        common), and its chance is what the worker would give independently, with the
        truth's posterior from the workers outside the group and the worker. Bonferroni over
        every (worker, group) pair testable.

        The one-coin model leaves out that careful people read an item alike (two careful
        raters of a 3.5 both say 4), so a group of careful workers, screened in by that,
        would find every careful worker matching it beyond the model. Each group's chances
        are therefore calibrated by the crowd outside it: the upper quartile, over the
        other workers tested against the group's screen component, of their matches over
        the model's expected ones (at least 1; at least `_REFERENCES` such workers, or the
        group is not tested). Colluders match their group far beyond anyone else; a careful
        worker matches a careful group as the other careful workers do."""
        components = [g for g in _components(screen) if len(g) >= 2]
        plans: list[tuple[str, list[str], int, list[str]]] = []
        for worker in sorted(tasks_of):
            for key, component in enumerate(components):
                if worker not in component:
                    groups = [component]
                else:  # the worker's own component, the worker left out
                    rest = {w: screen[w] - {worker} for w in component if w != worker}
                    groups = [g for g in _components(rest) if len(g) >= 2]
                for group in groups:
                    if len(group) > self.max_group:
                        continue
                    near = set[str]().union(*(tasks_of[g] for g in group)) & tasks_of[worker]
                    if len(near) >= self.min_shared:
                        plans.append((worker, group, key, sorted(near)))
        level = self.alpha / max(len(plans), 1)
        tallies = []
        for worker, group, key, shared in plans:
            chances, matches = self._against(worker, group, shared, by_task, board, skill,
                                             offsets, centre)  # fmt: skip
            tallies.append((worker, group, key, chances, matches))
        outside: dict[int, list[tuple[str, float]]] = {}
        for worker, _, key, chances, matches in tallies:
            if worker not in components[key] and sum(chances) > 0:
                outside.setdefault(key, []).append((worker, matches / sum(chances)))
        found: list[dict[str, Any]] = []
        for worker, group, key, chances, matches in tallies:
            if wanted is not None and worker not in wanted:
                continue
            ratios = [r for w, r in outside.get(key, []) if w != worker]
            if len(ratios) < _REFERENCES:
                continue
            scale = max(1.0, float(np.quantile(ratios, 0.75)))
            scaled = [min(1.0, c * scale) for c in chances]
            expected = sum(scaled)
            if matches - expected < self.min_excess or matches < self.copied * len(chances):
                continue
            p_value = _upper_tail(scaled, matches)
            if p_value <= level:
                found.append({"worker": worker, "group": group, "shared": len(chances),
                              "matches": matches, "expected": round(expected, 3),
                              "calibration": round(scale, 3), "p_value": p_value})  # fmt: skip
        return found

    def _against(
        self,
        worker: str,
        group: list[str],
        shared: list[str],
        by_task: Mapping[str, Mapping[str, Hashable]],
        board: LeaveOut,
        skill: Mapping[str, float],
        offsets: Mapping[str, Mapping[float, float]],
        centre: Mapping[str, Hashable],
    ) -> tuple[list[float], int]:
        """The chance, on each task the worker shares with `group` that can be judged, that
        the worker gives the group's label independently; and how often they did."""
        left_out = {*group, worker}
        chances: list[float] = []
        matches = 0
        for task in shared:
            given = by_task[task]
            theirs = Counter(given[g] for g in group if g in given)
            label = max(theirs, key=lambda x: (theirs[x], repr(x)))
            chance: float | None = None
            if not self._ordinal(task):  # None: too few outside the group to say what is true
                chance = board.give_chance(task, left_out, skill[worker], label)
            elif task in centre:
                d = float(label) - float(centre[task])  # type: ignore[arg-type]
                chance = offsets.get(worker, {}).get(d, 0.0)
            if chance is None:
                continue
            chances.append(chance)
            matches += given[worker] == label
        return chances, matches

    def _test(
        self,
        a: str,
        b: str,
        shared: list[str],
        by_task: Mapping[str, Mapping[str, Hashable]],
        board: LeaveOut,
        skill: Mapping[str, float],
        writing: _Writing,
        offsets: Mapping[str, Mapping[float, float]],
    ) -> dict[str, Any]:
        """The pair's evidence, with `convicted` (at the Bonferroni level) and `screened`
        (at the loose screen's, uncorrected)."""
        chances: list[float] = []
        f_a, f_b = offsets.get(a, {}), offsets.get(b, {})
        same_offset = min(1.0, sum(p * f_b.get(d, 0.0) for d, p in f_a.items()))
        matches = 0
        same_explanations = 0
        text_chances: list[float] = []
        study_texts = writing.without(a, b)
        for task in shared:
            given = by_task[task]
            text, other = writing.texts.get((task, a)), writing.texts.get((task, b))
            if text is not None and other is not None:
                text_chances.append(writing.match_chance(task, a, b, study_texts))
                same_explanations += text == other
            if self._ordinal(task):
                chances.append(same_offset)
            else:
                chances.append(board.pair_chance(task, a, b, skill[a], skill[b]))
            matches += given[a] == given[b]
        expected = sum(chances)
        level = self.alpha / max(self.tested_, 1)
        p_value = _upper_tail(chances, matches)
        same_p = _upper_tail(text_chances, same_explanations)
        excess = matches - expected >= self.min_excess
        worded = same_explanations >= self.min_same_explanations
        return {
            "workers": [a, b],
            "shared": len(shared),
            "matches": matches,
            "expected": round(expected, 3),
            "p_value": p_value,
            "same_explanations": same_explanations,
            "same_expected": round(sum(text_chances), 4),
            "same_p_value": same_p,
            "convicted": (excess and p_value <= level) or (worded and same_p <= level),
            "screened": (excess and p_value <= self.screen_alpha)
            or (worded and same_p <= self.screen_alpha),
        }


class _Writing:
    """The study's explanations, counted per task and over the study, so the chance that
    two independent writers match on a task comes cheaply with any pair left out.

    Over the study only pairs of texts by two different workers count: a worker who writes
    "Fine." under every item matches nobody by it.
    """

    def __init__(self, texts: Mapping[tuple[str, str], str]) -> None:
        self.texts = dict(texts)
        self.on_task: dict[str, Counter[str]] = {}
        self.of_worker: dict[str, Counter[str]] = {}
        self.study: Counter[str] = Counter()
        for (task, worker), text in self.texts.items():
            self.on_task.setdefault(task, Counter())[text] += 1
            self.of_worker.setdefault(worker, Counter())[text] += 1
            self.study[text] += 1
        self.squares = sum(n * n for n in self.study.values())
        self.own = {w: _own(mine) for w, mine in self.of_worker.items()}
        self.own_squares = sum(squares for squares, _ in self.own.values())
        self.own_totals = sum(total * total for _, total in self.own.values())

    def without(self, a: str, b: str) -> tuple[int, int]:
        """Over the study less the pair's own texts: the ordered pairs of texts by two
        different workers that match, and all such pairs."""
        mine = self.of_worker.get(a, Counter()) + self.of_worker.get(b, Counter())
        squares = self.squares - sum(self.study[x] ** 2 - (self.study[x] - n) ** 2
                                     for x, n in mine.items())  # fmt: skip
        own = [self.own.get(w, (0, 0)) for w in (a, b)]
        own_squares = self.own_squares - sum(squares for squares, _ in own)
        own_totals = self.own_totals - sum(total * total for _, total in own)
        total = self.study.total() - mine.total()
        return squares - own_squares, total * total - own_totals

    def match_chance(self, task: str, a: str, b: str, study: tuple[int, int]) -> float:
        """P(two independent writers match on `task`): the unbiased collision estimate
        sum c(c - 1) / (n (n - 1)) of the task's texts by the others, shrunk towards the
        share of matching pairs of texts by two different workers over the study (the pair
        left out), with the weight of `_TEXT_PRIOR` explanations (the plug-in sum (c / n)^2
        would call six different texts a 1-in-6 match)."""
        matching, pairs = study
        global_chance = matching / pairs if pairs > 0 else 0.0
        here = Counter(self.on_task.get(task, Counter()))
        for worker in (a, b):
            text = self.texts.get((task, worker))
            if text is not None:
                here[text] -= 1
        n = sum(c for c in here.values() if c > 0)
        if n < 2:
            return global_chance
        local = sum(c * (c - 1) for c in here.values() if c > 1) / (n * (n - 1))
        return (n * local + _TEXT_PRIOR * global_chance) / (n + _TEXT_PRIOR)


def _own(texts: Counter[str]) -> tuple[int, int]:
    """One worker's texts: the sum of their squared counts, and how many."""
    return sum(n * n for n in texts.values()), texts.total()


def _offsets(
    by_task: Mapping[str, Mapping[str, Hashable]], consensus: Mapping[str, Hashable]
) -> dict[str, dict[float, float]]:
    """Each worker's distribution of label - consensus, smoothed towards the crowd's (with
    the weight of `_OFFSET_PRIOR` answers), so a short record is not mistaken for a habit."""
    counts: dict[str, dict[float, int]] = {}
    crowd: dict[float, int] = {}
    for task, given in by_task.items():
        if task not in consensus:
            continue
        for worker, label in given.items():
            d = float(label) - float(consensus[task])  # type: ignore[arg-type]
            counts.setdefault(worker, {})
            counts[worker][d] = counts[worker].get(d, 0) + 1
            crowd[d] = crowd.get(d, 0) + 1
    total = sum(crowd.values())
    out: dict[str, dict[float, float]] = {}
    for worker, mine in counts.items():
        n = sum(mine.values())
        out[worker] = {
            d: (mine.get(d, 0) + _OFFSET_PRIOR * c / total) / (n + _OFFSET_PRIOR)
            for d, c in crowd.items()
        }
    return out


def _upper_tail(probabilities: list[float], k: int) -> float:
    """P(X >= k) for X the number of successes of independent trials with these chances.

    The dynamic programme over the count of successes, one numpy step per trial (in pure
    Python its n^2 steps were the costliest part of a QC refresh at a few thousand answers).
    Counts of k or more are pooled in one cell: only whether X reaches k matters.
    """
    if k <= 0:
        return 1.0
    if k > len(probabilities):
        return 0.0
    dist = np.zeros(k + 1)  # dist[j] = P(j successes so far), dist[k] = P(k or more)
    dist[0] = 1.0
    for p in probabilities:
        reached = dist[k] + dist[k - 1] * p
        dist[1:k] = dist[1:k] * (1 - p) + dist[0 : k - 1] * p
        dist[0] *= 1 - p
        dist[k] = reached
    return float(min(1.0, max(0.0, dist[k])))


def _components(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The connected components of a graph given as worker -> neighbours, an edge joining
    both ends whichever side names it (a worker convicted against a group names the group;
    the group's members need not name the worker)."""
    linked: dict[str, set[str]] = {}
    for worker, others in edges.items():
        linked.setdefault(worker, set()).update(others)
        for other in others:
            linked.setdefault(other, set()).add(worker)
    seen: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(linked):
        if start in seen:
            continue
        stack, group = [start], set()
        while stack:
            worker = stack.pop()
            if worker in group:
                continue
            group.add(worker)
            stack.extend(linked[worker])
        seen |= group
        groups.append(sorted(group))
    return groups


def _question(task: str) -> str:
    return task.rsplit("/", 1)[-1]
