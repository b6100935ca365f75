"""A study's QC settings: gold policy, qualification gate, anomaly thresholds, rules, and how
agreement with the crowd and collusion are judged.

The settings live in the study's JSON under "qc"; `parse_qc_config` checks them once so the
rest of `qc` can trust plain attributes. Every field is optional, unknown keys are refused
(a misspelt key would otherwise silently fall back to its default), and `QcConfig.to_json`
gives back a dict that `parse_qc_config` accepts.

Every setting applies to every rater group: live workers and the raters of imported answers
(an old MTurk batch, the RoFT release, an LLM) get the same evidence and the same rules. A
rule of "rules" may say `"live_only": true` (default false) to judge live workers only;
see `qc.rules.Rule`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeGuard

from qc.rules import (
    DEFAULT_RULES,
    GOLD_VOUCH,
    MIN_ANSWERS,
    MIN_REAL_ANSWERS,
    Rule,
    default_rules,
)


def _is_number(value: object) -> TypeGuard[float]:
    # bool is an int subclass, but `true` for a threshold is a mistake, not 1.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_share(name: str, value: object, *, open_low: bool = False) -> None:
    if not _is_number(value) or not (0 <= value <= 1) or (open_low and value == 0):
        low = "greater than 0" if open_low else "between 0"
        rest = " and at most 1" if open_low else " and 1"
        raise ValueError(f"{name} must be a number {low}{rest}")


def _check_positive(name: str, value: object) -> None:
    if not _is_number(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number")


def _check_count(name: str, value: object, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be a whole number of {low} or more")


@dataclass(frozen=True)
class GoldPolicy:
    """When gold answers say a worker is below par, and how often to serve gold items.

    threshold: lowest acceptable gold accuracy; credibility: posterior probability needed to
    call a worker below threshold (the default gold rule's at least 0.98,
    `qc.rules.GOLD_CREDIBILITY`); min_gold: gold answers needed before any decision;
    trusted: accuracy above which gold serving tapers (until the crowd has judged the worker,
    and with vouch_after until that many gold answers are in: then their doubt against the
    crowd sets the rate, see `qc.gold.gold_rate`); vouch_after: gold answers a worker needs
    before the crowd's vouching may lower their gold rate (0: from the crowd's first
    comparison; before, the crowd can raise the rate, not lower it);
    min_rate/max_rate: bounds of the gold serving rate; prior: Beta prior (alpha, beta) on a
    worker's gold accuracy; shared_order: serve the unseen gold item most workers answered
    or hold (ties at random), so workers meet the same gold and collusion is tested on
    items whose truth is known; false: any unseen gold item at random (an item every
    worker meets is easier for a forum to spot); easy_first: in that shared order, the gold
    items their readers got right most often come first (each item's share of right
    answers, each weighed by its reader's agreement with the crowd above chance
    (`crowd.quality.tally`), shrunk towards the study's share by
    `crowd.work.serving.EASY_PRIOR` readers; an item nobody answered is taken to be
    typical), so the first gold a worker meets tells
    a reader from a guesser and careful workers are not judged by the hardest;
    by_difficulty: weigh each gold answer by how much of a reader's skill its item shows, so
    a hard item most readers miss counts less
    (`qc.gold.GoldConfidence.fit_items`); chance: a random answer's gold accuracy, which that
    weighing needs (the HIT type's; None: 0).
    """

    threshold: float = 0.5
    credibility: float = 0.95
    min_gold: int = 3
    trusted: float = 0.8
    min_rate: float = 0.05
    max_rate: float = 0.75
    prior: tuple[float, float] = (1.0, 1.0)
    shared_order: bool = True
    easy_first: bool = True
    by_difficulty: bool = True
    chance: float | None = None
    vouch_after: int = 0

    def __post_init__(self) -> None:
        _check_share("qc.gold.threshold", self.threshold)
        _check_share("qc.gold.credibility", self.credibility, open_low=True)
        _check_count("qc.gold.min_gold", self.min_gold, 1)
        _check_count("qc.gold.vouch_after", self.vouch_after, 0)
        _check_share("qc.gold.trusted", self.trusted)
        _check_share("qc.gold.min_rate", self.min_rate)
        _check_share("qc.gold.max_rate", self.max_rate)
        if self.min_rate > self.max_rate:
            raise ValueError("qc.gold.min_rate must not exceed qc.gold.max_rate")
        prior = self.prior
        if (
            not isinstance(prior, tuple)
            or len(prior) != 2
            or not all(_is_number(p) and p > 0 for p in prior)
        ):
            raise ValueError("qc.gold.prior must be two positive numbers [alpha, beta]")
        if not isinstance(self.shared_order, bool):
            raise ValueError("qc.gold.shared_order must be true or false")
        if not isinstance(self.easy_first, bool):
            raise ValueError("qc.gold.easy_first must be true or false")
        if not isinstance(self.by_difficulty, bool):
            raise ValueError("qc.gold.by_difficulty must be true or false")
        if self.chance is not None:
            _check_share("qc.gold.chance", self.chance)
            if self.chance >= 1:
                raise ValueError("qc.gold.chance must be below 1")


@dataclass(frozen=True)
class Qualification:
    """Pass a worker into the study once this share of training items is answered correctly."""

    min_accuracy: float = 0.75

    def __post_init__(self) -> None:
        _check_share("qc.qualification.min_accuracy", self.min_accuracy)


@dataclass(frozen=True)
class AnomalyThresholds:
    """Limits past which a single response looks careless (see `qc.anomalies`)."""

    reading_chars_per_second: float = 40.0
    min_seconds: float = 1.0
    run_length: int = 5
    typing_chars_per_second: float = 15.0
    paste_share: float = 0.5
    min_explanation_chars: int = 10

    def __post_init__(self) -> None:
        _check_positive("qc.anomalies.reading_chars_per_second", self.reading_chars_per_second)
        if not _is_number(self.min_seconds) or self.min_seconds < 0:
            raise ValueError("qc.anomalies.min_seconds must be a number of 0 or more")
        # A "run" of one answer is every answer; 2 is the shortest run that means anything.
        _check_count("qc.anomalies.run_length", self.run_length, 2)
        _check_positive("qc.anomalies.typing_chars_per_second", self.typing_chars_per_second)
        _check_share("qc.anomalies.paste_share", self.paste_share)
        # 0 would count every blank explanation as a repeat of the others.
        _check_count("qc.anomalies.min_explanation_chars", self.min_explanation_chars, 1)


@dataclass(frozen=True)
class CrowdPolicy:
    """How agreement with the crowd and collusion are judged (see `qc.agreement`, `qc.collusion`).

    margin: where a worker's threshold sits between chance (0) and the crowd's agreement (1);
    window: the recent tasks whose agreement shows drift; min_others: other answers a task
    needs before it tests a worker's agreement; collusion_alpha: the family-wise chance of
    calling an independent pair colluders; collusion_min_shared: tasks a pair must share;
    replace_excluded: ask other workers again for the real answers of a live worker who is
    excluded (by a rule or a reviewer) or blocked, so each item still gets its target of
    answers that count; doubt_checks: while QC doubts a worker is reading (qc.drift's
    posterior at least 0.5), the chance of an extra attention check next is doubt_checks x
    that posterior (less for each check passed since the switch), on top of the study's
    attention_rate (0: none; see `qc.attention.doubt_check_rate`); early_answers: judged
    answers after which the `below_crowd_early` rule stops a worker whose accuracy against
    the crowd is below the threshold at early_credibility, before `below_crowd`'s 10 (None:
    no such rule; a HIT type sets it where careful workers' early posteriors stay clear of
    it, see `tasks.base.HitType.crowd_early_answers`); min_answers: judged tasks
    `below_crowd` waits for (10; a HIT type sets fewer where careful workers' posteriors
    after fewer stay as far from the rule as after 10, see
    `tasks.base.HitType.crowd_min_answers`); min_real_answers: of those, the answers to real
    items (not gold or attention checks) `below_crowd` and `below_crowd_early` wait for
    (MIN_REAL_ANSWERS; 0: none); before them `below_crowd_known` judges the same posterior at
    the gold rule's bar, so a record of mostly known answers meets the bar the gold rule
    holds such answers to; min_items: judged items (not tasks: a form's fields or a Likert
    item's attributes are tasks of one item) `below_crowd` also waits for, beside its
    min_answers tasks (None: those alone; a HIT type sets it where an item's fields swing a
    careful worker's early posterior, see `tasks.base.HitType.crowd_min_items`). Like the
    gold policy's credibility, these shape the default rules only: a config that lists its
    rules keeps them.
    real_difficulty: weigh each real task of categorical labels by how hard readers find it
    (how often the other answers agree), as gold is weighed: a task readers split on tests
    less, one they all agree on more (`qc.agreement`, `_Question.weigh_real`).
    gold_vouch: the rules that judge a worker against the crowd (stopped_reading,
    below_crowd, below_crowd_early, drifted) wait while the worker's gold vouches for them,
    P(gold accuracy below the gold threshold) under gold_vouch: the consensus is wrong where
    the crowd is, gold is the truth (0: gold never vouches; a worker without gold has none).
    """

    margin: float = 0.5
    window: int = 10
    min_others: int = 2
    collusion_alpha: float = 1e-3
    collusion_min_shared: int = 4
    replace_excluded: bool = True
    doubt_checks: float = 0.8
    early_answers: int | None = None
    early_credibility: float = 0.99
    min_answers: int = MIN_ANSWERS
    min_real_answers: int = MIN_REAL_ANSWERS
    min_items: int | None = None
    real_difficulty: bool = False
    gold_vouch: float = GOLD_VOUCH

    def __post_init__(self) -> None:
        _check_share("qc.crowd.margin", self.margin)
        _check_share("qc.crowd.gold_vouch", self.gold_vouch)
        _check_share("qc.crowd.early_credibility", self.early_credibility, open_low=True)
        if self.early_answers is not None:
            _check_count("qc.crowd.early_answers", self.early_answers, 1)
        _check_count("qc.crowd.min_answers", self.min_answers, 1)
        _check_count("qc.crowd.min_real_answers", self.min_real_answers, 0)
        if self.min_items is not None:
            _check_count("qc.crowd.min_items", self.min_items, 1)
        _check_share("qc.crowd.doubt_checks", self.doubt_checks)
        _check_count("qc.crowd.window", self.window, 1)
        _check_count("qc.crowd.min_others", self.min_others, 1)
        if not _is_number(self.collusion_alpha) or not 0 < self.collusion_alpha < 1:
            raise ValueError("qc.crowd.collusion_alpha must be a number between 0 and 1")
        _check_count("qc.crowd.collusion_min_shared", self.collusion_min_shared, 1)
        for name in ("replace_excluded", "real_difficulty"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"qc.crowd.{name} must be true or false")


@dataclass(frozen=True)
class QcConfig:
    """All of a study's QC settings; build it with `parse_qc_config`.

    >>> config = parse_qc_config({"gold": {"threshold": 0.6}, "qualification": None})
    >>> config.gold.threshold, config.qualification, config.gold.min_gold
    (0.6, None, 3)
    >>> parse_qc_config(config.to_json()) == config
    True
    """

    gold: GoldPolicy = field(default_factory=GoldPolicy)
    qualification: Qualification | None = None
    anomalies: AnomalyThresholds = field(default_factory=AnomalyThresholds)
    rules: tuple[Rule, ...] = DEFAULT_RULES
    crowd: CrowdPolicy = field(default_factory=CrowdPolicy)

    def to_json(self) -> dict[str, Any]:
        gold = asdict(self.gold)
        gold["prior"] = list(self.gold.prior)
        return {
            "gold": gold,
            "qualification": asdict(self.qualification) if self.qualification else None,
            "anomalies": asdict(self.anomalies),
            "rules": [rule.to_json() for rule in self.rules],
            "crowd": asdict(self.crowd),
        }


def _section(raw: Mapping[str, Any], key: str, cls: type) -> dict[str, Any]:
    """The keys of `raw[key]` as constructor arguments of `cls`, refusing unknown keys."""
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"qc.{key} must be an object of settings")
    known = [f.name for f in fields(cls)]
    for name in value:
        if name not in known:
            raise ValueError(f"qc.{key}.{name} is not a setting; use one of: {', '.join(known)}")
    return dict(value)


_SECTIONS = ("gold", "qualification", "anomalies", "rules", "crowd")


def parse_qc_config(raw: Mapping[str, Any] | None) -> QcConfig:
    """Check a study's "qc" settings and fill in defaults; ValueError names the bad field.

    Without "rules", the default rules are built from the gold policy (its credibility and
    min_gold); a "rules" list replaces them entirely.

    >>> parse_qc_config({"gold": {"threshold": 2}})
    Traceback (most recent call last):
    ...
    ValueError: qc.gold.threshold must be a number between 0 and 1
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ValueError("qc must be an object with any of: " + ", ".join(_SECTIONS))
    for key in raw:
        if key not in _SECTIONS:
            raise ValueError(f"qc.{key} is not a QC setting; use one of: {', '.join(_SECTIONS)}")

    gold_args = _section(raw, "gold", GoldPolicy)
    prior = gold_args.get("prior")
    if isinstance(prior, list):
        gold_args["prior"] = tuple(prior)
    gold = GoldPolicy(**gold_args)

    qualification = None
    if raw.get("qualification") is not None:
        qualification = Qualification(**_section(raw, "qualification", Qualification))

    anomalies = AnomalyThresholds(**_section(raw, "anomalies", AnomalyThresholds))
    crowd = CrowdPolicy(**_section(raw, "crowd", CrowdPolicy))

    if "rules" not in raw:
        rules = default_rules(gold, crowd)
    else:
        raw_rules = raw["rules"]
        if not isinstance(raw_rules, list | tuple):
            raise ValueError("qc.rules must be a list of rules (use [] for none)")
        parsed: list[Rule] = []
        for i, raw_rule in enumerate(raw_rules):
            try:
                parsed.append(Rule.from_json(raw_rule))
            except ValueError as error:
                raise ValueError(f"qc.rules[{i}]: {error}") from None
        names = [rule.name for rule in parsed]
        for name in names:
            if names.count(name) > 1:
                # Names are the ids in reports and the audit log, so they must be unique.
                raise ValueError(f"qc.rules: the name {name!r} is used twice; rename one")
        rules = tuple(parsed)

    return QcConfig(
        gold=gold, qualification=qualification, anomalies=anomalies, rules=rules, crowd=crowd
    )
