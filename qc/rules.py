"""QC rules: a threshold on one per-worker metric, guarded by minimum evidence, and an action.

Rules run over the per-worker dicts of `qc.evidence.worker_evidence`. A rule fires for a
worker when every `min_evidence` metric reaches its minimum (so one unlucky answer cannot
decide) and `metric op threshold` holds; a metric that is None (no data) never fires. Each
firing is a `Decision` with a sentence a reviewer can read and the numbers behind it.

Rules judge every rater, whatever their rater group: live workers and the raters of
imported answers alike. A rule with `live_only` judges live workers only (a worker whose
evidence says `"source": "imported"` is left alone), e.g. a speed rule for a crowd whose
imported annotators answered on paper.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class Action(StrEnum):
    FLAG = "flag"  # for a person to review; nothing changes for the worker
    STOP = "stop"  # no more items; the data so far is kept
    SOFT_BLOCK = "soft_block"  # no more items and left out of the filtered set; still paid


# The evidence's "source" of a worker whose answers were imported (ResponseSource's value).
IMPORTED = "imported"

# The numeric keys of `worker_evidence`; a rule on anything else could never fire.
METRICS: tuple[str, ...] = (
    "responses",
    "too_fast_n",
    "too_fast_share",
    "constant_n",
    "constant_share",
    "longest_run",
    "repeated_explanations",
    "pasted_n",
    "typed_too_fast_n",
    "attention_checks",
    "attention_failed",
    "attention_fail_prob",
    "gold_n",
    "gold_accuracy",
    "gold_weight",
    "gold_mean",
    "gold_below_prob",
    "gold_doubt",
    "gold_rate",
    "agreement_n",
    "agreement_real_n",
    "agreement_items",
    "agreement",
    "agreement_below_prob",
    "recent_agreement",
    "recent_below_prob",
    "collusion_partners",
    "stopped_reading_prob",
    "stopped_reading_n",
)

OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}

_KEYS = (
    "name", "metric", "op", "threshold", "action", "min_evidence", "description", "live_only",
)  # fmt: skip
_REQUIRED = ("name", "metric", "op", "threshold", "action")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Rule:
    """`action` for workers whose `metric op threshold`, once `min_evidence` is reached.

    `live_only` (default False: the rule applies to every rater group) limits the rule to
    live workers, leaving the raters of imported answers alone.

    >>> rule = Rule.from_json({"name": "slow", "metric": "too_fast_share", "op": ">=",
    ...                        "threshold": 0.5, "action": "flag"})
    >>> rule.action, Rule.from_json(rule.to_json()) == rule
    (<Action.FLAG: 'flag'>, True)
    """

    name: str
    metric: str
    op: str
    threshold: float
    action: Action
    min_evidence: dict[str, float] = field(default_factory=dict)
    description: str = ""
    live_only: bool = False

    def __post_init__(self) -> None:
        where = f"rule {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("rule name must be a non-empty string")
        if self.metric not in METRICS:
            raise ValueError(
                f"{where}: metric {self.metric!r} is unknown; use one of: {', '.join(METRICS)}"
            )
        if self.op not in OPS:
            raise ValueError(f"{where}: op {self.op!r} is unknown; use one of: {', '.join(OPS)}")
        if not _is_number(self.threshold):
            raise ValueError(f"{where}: threshold must be a number")
        if not isinstance(self.action, Action):
            raise ValueError(
                f"{where}: action must be one of: {', '.join(a.value for a in Action)}"
            )
        if not isinstance(self.min_evidence, dict):
            raise ValueError(f"{where}: min_evidence must map metric names to minimums")
        for metric, minimum in self.min_evidence.items():
            if metric not in METRICS:
                raise ValueError(
                    f"{where}: min_evidence metric {metric!r} is unknown; "
                    f"use one of: {', '.join(METRICS)}"
                )
            if not _is_number(minimum):
                raise ValueError(f"{where}: min_evidence[{metric!r}] must be a number")
        if not isinstance(self.description, str):
            raise ValueError(f"{where}: description must be a string")
        if not isinstance(self.live_only, bool):
            raise ValueError(f"{where}: live_only must be true or false")

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Rule:
        if not isinstance(raw, Mapping):
            raise ValueError("a rule must be an object with keys " + ", ".join(_REQUIRED))
        for key in raw:
            if key not in _KEYS:
                raise ValueError(f"rule key {key!r} is unknown; use some of: {', '.join(_KEYS)}")
        missing = [key for key in _REQUIRED if key not in raw]
        if missing:
            raise ValueError(f"rule {raw.get('name')!r} lacks {', '.join(missing)}")
        action = raw["action"]
        try:
            action = Action(action)
        except ValueError:
            raise ValueError(
                f"rule {raw['name']!r}: action {action!r} is unknown; "
                f"use one of: {', '.join(a.value for a in Action)}"
            ) from None
        min_evidence = raw.get("min_evidence", {})
        return cls(
            name=raw["name"],
            metric=raw["metric"],
            op=raw["op"],
            threshold=raw["threshold"],
            action=action,
            min_evidence=dict(min_evidence) if isinstance(min_evidence, Mapping) else min_evidence,
            description=raw.get("description", ""),
            live_only=raw.get("live_only", False),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "op": self.op,
            "threshold": self.threshold,
            "action": self.action.value,
            "min_evidence": dict(self.min_evidence),
            "description": self.description,
            "live_only": self.live_only,
        }


class GoldSettings(Protocol):
    """What the gold rule reads of a gold policy (qc.config.GoldPolicy, which imports us)."""

    @property
    def credibility(self) -> float: ...

    @property
    def min_gold(self) -> int: ...


class CrowdSettings(Protocol):
    """What the default crowd rules read of a crowd policy (qc.config.CrowdPolicy)."""

    @property
    def early_answers(self) -> int | None: ...

    @property
    def min_answers(self) -> int: ...

    @property
    def min_real_answers(self) -> int: ...

    @property
    def min_items(self) -> int | None: ...

    @property
    def early_credibility(self) -> float: ...

    @property
    def gold_vouch(self) -> float: ...


# The gold rule's credibility at least (the study's qc.gold.credibility where higher).
GOLD_CREDIBILITY = 0.98
# The default qc.crowd.min_answers: the judged tasks below_crowd waits for.
MIN_ANSWERS = 10
# The default qc.crowd.min_real_answers: of those, the answers to real items (not gold or
# attention checks) below_crowd and below_crowd_early wait for. Known answers count in the
# crowd's judgement too, but a record of mostly known answers is what the gold and attention
# rules judge, at firmer bars: at 0.95 on 7 gold answers and one real one, below_crowd
# stopped a careful reader the gold rule put at 0.87 (RESULTS.md, twenty-fourth look).
# Before them, below_crowd_known acts on the same posterior at the gold rule's bar.
MIN_REAL_ANSWERS = 3
# The default qc.crowd.gold_vouch: gold vouches for a worker while P(gold accuracy below the
# threshold) is under it.
GOLD_VOUCH = 0.2


def default_rules(
    gold: GoldSettings | None = None, crowd: CrowdSettings | None = None
) -> tuple[Rule, ...]:
    """The standard rules; the gold rule takes its credibility and min_gold from `gold`, and
    `crowd` adds `below_crowd_early` where its early_answers is set and makes `below_crowd`
    wait for its min_answers judged tasks (10 without it), min_real_answers of them on real
    items (3), and min_items judged items; below_crowd_early waits for the real ones too, and
    below_crowd_known judges the same evidence without them at the gold rule's bar.

    `DEFAULT_RULES` is this with the default policies (credibility 0.95, min_gold 3, no early
    crowd rule); `parse_qc_config` calls it with the study's own when the study sets no rules.

    >>> from qc.config import CrowdPolicy
    >>> [r.name for r in default_rules(crowd=CrowdPolicy(early_answers=6)) if "crowd" in r.name]
    ['below_crowd', 'below_crowd_early', 'below_crowd_known']
    """
    credibility = 0.95 if gold is None else gold.credibility
    min_gold = 3 if gold is None else gold.min_gold
    soft, flag = Action.SOFT_BLOCK, Action.FLAG
    # Drift is tested anew on every refresh, over a short window: it needs stronger evidence
    # than a test of the whole record, or careful workers would trip it by the many looks.
    drift = 1 - (1 - credibility) / 5
    # The crowd rules judge a worker against the consensus, which is wrong where the crowd
    # is (a half-bad crowd at 3 answers an item often is); gold is the truth. While the
    # worker's gold says they read (P(accuracy below the threshold) under gold_vouch) those
    # rules wait, and the consensus is more likely wrong than the worker. A worker without
    # gold has a gold_doubt of 1: nothing vouches.
    vouch = {"gold_doubt": GOLD_VOUCH if crowd is None else crowd.gold_vouch}
    real = {"agreement_real_n": MIN_REAL_ANSWERS if crowd is None else crowd.min_real_answers}
    below: dict[str, float] = {
        "agreement_n": MIN_ANSWERS if crowd is None else crowd.min_answers, **vouch
    }
    if crowd is not None and crowd.min_items is not None:
        below["agreement_items"] = crowd.min_items
    table: list[tuple[str, str, float, Action, dict[str, float], str]] = [
        # name, metric (compared with >=), threshold, action, min_evidence, description
        # A failure rate credibly above careful people's slips, and four failures at least,
        # not RoFT's one: careful people slip on a check now and then, and a rate, not a
        # count, so a careful worker is not caught in the end by the slips of a long record.
        # At 0.99 (or the study's credibility, if higher) that is 4 failures in at most 6
        # checks: at one slip in 30, about one careful worker in 50,000 (3 failures at 0.95,
        # in up to 6 checks, came to about one in 1,500: a few percent of a benchmark table's
        # careful workers; benchmarks/RESULTS.md, twenty-first look), while a worker who
        # does not read fails most checks and meets more of them while in doubt
        # (qc.attention.doubt_check_rate).
        ("attention_failed", "attention_fail_prob", max(credibility, 0.99), soft,
         {"attention_failed": 4},
         "Failed attention checks credibly more often than careful people slip."),
        # Gold is looked at after every answer, over the whole record, like the attention
        # checks: at 0.95 about one careful best-of-4 reader in 1,250 crossed it on a
        # study's 40 gold items of mixed difficulty, at 0.98 one in 40,000, while a random
        # clicker still crosses it after 6 misses running (benchmarks/qc_gold_tail.py;
        # RESULTS.md, twenty-third look).
        ("gold_below_threshold", "gold_below_prob", max(credibility, GOLD_CREDIBILITY), soft,
         {"gold_n": min_gold},
         "Gold accuracy credibly below the study's threshold."),
        # Collusion first: it names the group, where the others would see only a bad record.
        ("collusion", "collusion_partners", 1, soft, {},
         "Shares answers (or explanations) with other workers far beyond chance."),
        # Every answer and check at once, with a possible switch from reading to not: what
        # the rules above and below see apart (qc.drift). At least 6 events: on 4 the prior
        # (the crowd's share of non-readers) decides as much as the worker. A careful reader
        # who slipped on a check and met a wrong consensus on 3 answers crossed 0.99 on 4;
        # replayed on 32 studies where nobody was stopped, 6 kept every careful worker that
        # fewer events stopped, and bad workers' median answers before a stop did not move
        # (benchmarks/RESULTS.md, twentieth look). And at least 6 answers: each of a task's
        # questions is an event (a form's fields, a Likert item's attributes), so 6 events
        # could be two failed checks and two gold forms, on which a careful form reader who
        # slipped twice and rated one step off the key crossed 0.999 (twenty-sixth look).
        ("stopped_reading", "stopped_reading_prob", drift, soft,
         {"stopped_reading_n": 6, "responses": 6, **vouch},
         "Answers and attention checks together: credibly not reading now."),
        ("below_crowd", "agreement_below_prob", credibility, soft, {**below, **real},
         "Accuracy against the crowd credibly closer to chance than to the crowd's."),
        # The same before min_real_answers real items, at the gold rule's bar: such a record
        # is mostly gold and checks, which the crowd's posterior then judges again.
        ("below_crowd_known", "agreement_below_prob", max(credibility, GOLD_CREDIBILITY), soft,
         below,
         "Accuracy against the crowd and the known answers credibly closer to chance than "
         "to the crowd's, at the gold rule's bar."),
        # The recent window alone, looked at on every refresh: firmer still, since
        # stopped_reading covers the same ground with the attention checks too.
        ("drifted", "recent_below_prob", 1 - (1 - credibility) / 25, soft,
         {"agreement_n": 10, **vouch},
         "Recent answers credibly closer to chance than to the crowd: stopped reading."),
        # Counted over the answers the worker chose (real and gold items; an attention check
        # dictates its answer), so a few choices among many checks never look constant. At
        # least 12 of them: a careful reader of a best-of-4, whose picks fall on the four
        # shuffled positions alike, clicks one position in 8 of 8, 9 of 10 or 10 of 11 about
        # once in 6,500 workers, and in 11 of 12 or more about once in 100,000.
        ("constant_answers", "constant_share", 0.9, soft, {"constant_n": 12},
         "Gave the same answer almost every time."),
        ("too_fast", "too_fast_share", 0.5, soft, {"responses": 5},
         "Answered at least half the items faster than the text can be read."),
        ("identical_run", "longest_run", 5, flag, {},
         "A long run of identical consecutive answers."),
        ("repeated_explanations", "repeated_explanations", 2, flag, {},
         "The same explanation given for different items."),
        ("pasted_text", "pasted_n", 1, flag, {}, "Explanation pasted in."),
        ("typed_too_fast", "typed_too_fast_n", 1, flag, {},
         "Explanation appeared faster than it can be typed."),
    ]  # fmt: skip
    if crowd is not None and crowd.early_answers is not None:
        # Sooner on firmer evidence, where the HIT type sets it: a careful worker's posterior
        # swings most over the first few answers, which below_crowd's min_answers waits out.
        early: dict[str, float] = {"agreement_n": crowd.early_answers, **real, **vouch}
        at = next(i for i, entry in enumerate(table) if entry[0] == "below_crowd") + 1
        table.insert(at, ("below_crowd_early", "agreement_below_prob", crowd.early_credibility,
                          soft, early, "Accuracy against the crowd far closer to chance than "
                          "to the crowd's, within a few answers."))  # fmt: skip
    return tuple(
        Rule(
            name,
            metric,
            ">=",
            threshold,
            action,
            min_evidence,
            description,
            live_only=name in CROWD_RULES,
        )  # fmt: skip
        for name, metric, threshold, action, min_evidence, description in table
    )


# The rules that compare a worker with the crowd judge live workers only: an imported rater
# group (experts, an LLM, an old batch) that disagrees with the crowd is what a rater-group
# comparison is there to show, not a bad worker.
CROWD_RULES = frozenset(
    {"collusion", "stopped_reading", "below_crowd", "below_crowd_known", "below_crowd_early",
     "drifted"}
)


DEFAULT_RULES: tuple[Rule, ...] = default_rules()


@dataclass(frozen=True)
class Decision:
    """A rule that fired for a worker: what to do, why in words, and the numbers used."""

    worker: str
    rule: str
    action: Action
    reason: str
    evidence: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "rule": self.rule,
            "action": self.action.value,
            "reason": self.reason,
            "evidence": dict(self.evidence),
        }


def _pct(value: Any) -> str:
    return "?" if value is None else f"{value:.0%}"


# How each metric reads in a reason, and which other metrics the sentence quotes.
_PHRASES: dict[str, tuple[tuple[str, ...], Callable[[Mapping[str, Any]], str]]] = {
    "attention_failed": (
        ("attention_checks",),
        lambda e: f"failed {e['attention_failed']} of {e['attention_checks']} attention checks",
    ),
    "attention_fail_prob": (
        ("attention_failed", "attention_checks"),
        lambda e: (
            f"failed {e['attention_failed']} of {e['attention_checks']} attention checks; "
            f"probability they fail more than 1 in 5 {e['attention_fail_prob']:.2f}"
        ),
    ),
    "gold_below_prob": (
        ("gold_n", "gold_accuracy"),
        lambda e: (
            f"gold accuracy {_pct(e['gold_accuracy'])} on {e['gold_n']} gold items"
            + _worth(e)
            + f"; probability it is below the threshold {e['gold_below_prob']:.2f}"
        ),
    ),
    "constant_share": (
        ("constant_value", "constant_n"),
        lambda e: (
            f"gave the same answer ({e['constant_value']!r}) "
            f"in {_pct(e['constant_share'])} of {e['constant_n']} answers of their own choice"
        ),
    ),
    "too_fast_share": (
        ("too_fast_n", "responses"),
        lambda e: f"answered {e['too_fast_n']} of {e['responses']} items too fast to read",
    ),
    "agreement_below_prob": (
        ("agreement", "agreement_threshold", "agreement_chance", "agreement_n"),
        lambda e: (
            f"accuracy against the crowd {_pct(e['agreement'])} over {e['agreement_n']} answers "
            f"(chance {_pct(e['agreement_chance'])}, threshold {_pct(e['agreement_threshold'])}); "
            f"probability it is below the threshold {e['agreement_below_prob']:.2f}"
        ),
    ),
    "recent_below_prob": (
        ("recent_agreement", "agreement_threshold"),
        lambda e: (
            f"accuracy against the crowd {_pct(e['recent_agreement'])} over the latest answers "
            f"(threshold {_pct(e['agreement_threshold'])}); "
            f"probability it is below the threshold {e['recent_below_prob']:.2f}"
        ),
    ),
    "collusion_partners": (
        ("collusion_group",),
        lambda e: (
            f"shares answers with {e['collusion_partners']} other worker(s) beyond chance "
            f"(group {', '.join(map(str, e['collusion_group']))})"
        ),
    ),
    "stopped_reading_prob": (
        ("stopped_reading_n", "stopped_reading_since"),
        lambda e: (
            f"probability they are not reading now {e['stopped_reading_prob']:.3f}, from "
            f"{e['stopped_reading_n']} judged answers and attention checks together"
            + (
                " (at random from the start)"
                if e["stopped_reading_since"] == 0
                else f" (most probably at random after the first {e['stopped_reading_since']})"
            )
        ),
    ),
    "longest_run": ((), lambda e: f"gave the same answer {e['longest_run']} times in a row"),
    "repeated_explanations": (
        (),
        lambda e: f"reused an explanation on {e['repeated_explanations']} responses",
    ),
    "pasted_n": ((), lambda e: f"pasted the explanation on {e['pasted_n']} responses"),
    "typed_too_fast_n": (
        (),
        lambda e: f"typed the explanation implausibly fast on {e['typed_too_fast_n']} responses",
    ),
}


# Figures a reason gives where it has them (evidence from before they were kept has not).
_ALSO: dict[str, tuple[str, ...]] = {"gold_below_prob": ("gold_weight",)}


def _worth(e: Mapping[str, Any]) -> str:
    """What hard gold items were worth, where they were worth less than full tests."""
    weight = e.get("gold_weight")
    if weight is None or weight >= e["gold_n"] - 0.05:
        return ""
    return f" (worth {weight:.1f} full tests: hard items count less)"


def _reason(rule: Rule, values: Mapping[str, Any]) -> str:
    context, phrase = _PHRASES.get(rule.metric, ((), None))
    text = f"{rule.metric} is {values[rule.metric]}"
    if phrase is not None and all(values.get(key) is not None for key in context):
        text = phrase(values)
    return f"{text} (rule {rule.name}: {rule.metric} {rule.op} {rule.threshold:g})"


def evaluate(evidence: Mapping[str, Mapping[str, Any]], rules: Sequence[Rule]) -> list[Decision]:
    """The decisions of `rules` over per-worker `evidence`, by worker then rule order.

    A `live_only` rule skips workers whose evidence has `"source": "imported"` (evidence
    without a source is a live worker's).

    >>> rule = Rule("attention_failed", "attention_failed", ">=", 1, Action.SOFT_BLOCK,
    ...             {"attention_checks": 1})
    >>> evidence = {"a": {"attention_failed": 1, "attention_checks": 2},
    ...             "b": {"attention_failed": 0, "attention_checks": 2}}
    >>> [(d.worker, d.reason) for d in evaluate(evidence, [rule])]
    [('a', 'failed 1 of 2 attention checks (rule attention_failed: attention_failed >= 1)')]
    """
    decisions: list[Decision] = []
    for worker in sorted(evidence):
        metrics = evidence[worker]
        imported = metrics.get("source") == IMPORTED
        for rule in rules:
            if rule.live_only and imported:
                continue
            if not _enough_evidence(worker, metrics, rule):
                continue
            value = _number(worker, metrics, rule.metric)
            if value is None or not OPS[rule.op](value, rule.threshold):
                continue
            context = _PHRASES.get(rule.metric, ((), None))[0]
            used = [rule.metric, *rule.min_evidence, *context, *_ALSO.get(rule.metric, ())]
            values = {key: metrics.get(key) for key in dict.fromkeys(used)}
            decisions.append(
                Decision(str(worker), rule.name, rule.action, _reason(rule, values), values)
            )
    return decisions


def _number(worker: str, metrics: Mapping[str, Any], metric: str) -> float | None:
    value = metrics.get(metric)
    if value is not None and not _is_number(value):
        raise ValueError(
            f"worker {worker!r}: metric {metric!r} is {value!r}, not a number; "
            "pass the output of worker_evidence"
        )
    return value


def _enough_evidence(worker: str, metrics: Mapping[str, Any], rule: Rule) -> bool:
    for metric, minimum in rule.min_evidence.items():
        value = _number(worker, metrics, metric)
        if value is None or value < minimum:
            return False
    return True


def excluded_by_rule(decisions: Iterable[Decision]) -> dict[str, set[str]]:
    """Rule name -> workers it soft-blocked: the workers left out of the filtered set."""
    out: dict[str, set[str]] = {}
    for decision in decisions:
        if decision.action is Action.SOFT_BLOCK:
            out.setdefault(decision.rule, set()).add(decision.worker)
    return out
