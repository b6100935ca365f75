"""How the review's evidence, answers and audit log read to a person.

QC stores numbers (qc.evidence, qc.anomalies): shares, seconds, counts and lists of evidence
entries. Here each becomes a phrase: shares as percentages, seconds as "12.3 s", counts as
whole numbers, nothing as "–", an evidence entry as a sentence about its item (with the
response it points at), an answer in its HIT type's terms (HitType.describe_answer). Keys
this module does not know still read as "label: value" lines, never as Python's repr.

Pure: plain data in, text out, for the reviewer's pages and the CLI alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tasks.base import HitType

NOTHING = "–"
# Metrics whose values are shares of 1, shown as percentages (besides the *_share, *_rate,
# *_prob and *accuracy keys).
_SHARES = frozenset({"share", "gold_mean", "threshold", "agreement", "recent_agreement"})
# What a key reads as, where its name alone would not say it well.
LABELS: dict[str, str] = {
    "gold_mean": "estimated accuracy",
    "gold_below_prob": "chance the accuracy is below the threshold",
    "gold_rate": "chance the next item is gold",
    "check_rate": "chance of an extra attention check next",
    "agreement_below_prob": "chance the accuracy against the crowd is below the threshold",
    "recent_below_prob": "chance the recent accuracy is below the threshold",
    "recent_agreement": "recent accuracy against the crowd",
    "constant_n": "answers of their own choice",
    "attention_fail_prob": "chance they fail checks more often than careful people slip",
    "min_seconds_for_text": "time the text needs",
    "chars_shown": "characters shown",
    "typing_ms": "typing time",
}
ACTION_NAMES: dict[str, str] = {
    "approve": "Approve: pay their submitted work and keep them",
    "reject": "Reject: refuse their submitted work and leave their answers out",
    "soft_reject": "Soft-reject: pay their work, leave their answers out",
    "block": "Block them from all your studies",
    "unblock": "Unblock",
    "bonus": "Pay a bonus",
    "note": "Add a note to the audit trail",
    "notify": "Send them a message",
    "qualify": "Grant a platform qualification",
}


# -- single values -----------------------------------------------------------------------------
def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def count(value: Any) -> str:
    """A whole number with thousands separated: 1234 -> "1,234"; None -> "–"."""
    if not _is_number(value) or not math.isfinite(value):
        return NOTHING if value is None else str(value)
    return f"{round(value):,}"


def percent(value: Any) -> str:
    """A share of 1 as a percentage: 0.41000000000000003 -> "41%", 0.004 -> "0.4%"."""
    if not _is_number(value) or not math.isfinite(value):
        return NOTHING if value is None else str(value)
    share = 100 * value
    if share != 0 and abs(share) < 1:
        return f"{share:.1f}%"
    return f"{share:.0f}%"


def seconds(value: Any) -> str:
    """A duration: 12.345 -> "12.3 s", 0.4 -> "0.4 s", 135 -> "2 min 15 s"."""
    if not _is_number(value) or not math.isfinite(value):
        return NOTHING if value is None else str(value)
    if abs(value) < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def number(value: Any) -> str:
    """Any other number, rounded to what a person reads: 0.41000000000000003 -> "0.41"."""
    if not _is_number(value) or not math.isfinite(value):
        return NOTHING if value is None else str(value)
    if value == int(value):
        return count(value)
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.01:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.2g}"


def when(value: Any) -> str:
    """A time as a person reads it, in UTC to the minute: "2025-03-04 14:05 UTC"."""
    moment = value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
    if not isinstance(moment, datetime):
        return NOTHING if value is None else str(value)
    if moment.tzinfo is None:  # the database keeps UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def label(key: str) -> str:
    """A key as words: "assignments_paid" -> "assignments paid"."""
    return LABELS.get(key, key.replace("_", " "))


def title(key: str) -> str:
    """A key as the heading of a line: "gold_rate" -> "Chance the next item is gold"."""
    words = label(key)
    return words[:1].upper() + words[1:]


def value_of(key: str, value: Any) -> str:
    """A value formatted by what its key says it is: shares as percentages, seconds,
    milliseconds and times as durations and dates, lists as lists; None as "–"."""
    if value is None:
        return NOTHING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return "; ".join(f"{label(str(k))}: {value_of(str(k), v)}" for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(value_of(key, v) for v in value) or "none"
    if _is_number(value):
        if key in _SHARES or key.endswith(("_share", "_rate", "_prob", "accuracy")):
            return percent(value)
        if "seconds" in key:
            return seconds(value)
        if key.endswith("_ms"):
            return seconds(value / 1000)
        return number(value)
    if isinstance(value, str) and (key == "at" or key.endswith("_at")):
        return when(value)
    return str(value)


def lines(mapping: Mapping[str, Any]) -> list[str]:
    """A dict as "label: value" lines, the generic rendering of evidence and details; an
    "evidence" dict inside (a rule's numbers) gives its own lines."""
    out: list[str] = []
    for key, value in mapping.items():
        if key == "evidence" and isinstance(value, Mapping):
            out.extend(lines(value))
        else:
            out.append(f"{label(str(key))}: {value_of(str(key), value)}")
    return out


def inline(mapping: Mapping[str, Any]) -> str:
    """A dict on one line: "guess: 3 · all human: no"."""
    return " · ".join(lines(mapping)) or NOTHING


# -- answers in the HIT type's terms -----------------------------------------------------------
# What a stored answer may lack (an old or imported one) or hold of the wrong type.
_UNREADABLE = (KeyError, TypeError, ValueError, IndexError, AttributeError)


def describe_answer(
    hit: HitType, answer: Mapping[str, Any], content: Mapping[str, Any], config: Mapping[str, Any]
) -> str:
    """The answer as its HIT type tells it; its fields as "label: value" if the type cannot."""
    try:
        return hit.describe_answer(answer, content, config)
    except _UNREADABLE:
        return inline(answer)


def describe_expected(
    hit: HitType, expected: Mapping[str, Any], content: Mapping[str, Any], config: Mapping[str, Any]
) -> str | None:
    """The item's expected answer as its HIT type tells it; None when it has none."""
    if not expected:
        return None
    try:
        return hit.describe_expected(expected, content, config)
    except _UNREADABLE:
        return inline(expected)


# -- the worker's evidence ---------------------------------------------------------------------
@dataclass(frozen=True)
class Figure:
    """One line of a worker's evidence: what it is and its value in words."""

    key: str
    label: str
    text: str


@dataclass(frozen=True)
class Line:
    """One piece of evidence about one answer: the item, what happened, and the response."""

    text: str
    item: str | None = None
    response_id: int | None = None


@dataclass(frozen=True)
class Section:
    """A signal with its evidence lines, e.g. every answer given too fast to read."""

    key: str
    title: str
    about: str
    lines: list[Line] = field(default_factory=list)
    # How many the signal found, when QC kept only the latest of them (lines).
    found: int | None = None


def _of(part: int | None, whole: int | None) -> str:
    return f"{count(part)} of {count(whole)}"


def figures(evidence: Mapping[str, Any], alike: Callable[[str], str] | None = None) -> list[Figure]:
    """The worker's QC figures in words, in the order a reviewer reads them.

    `alike` tells what a surface (the answer as the page showed it) means, for the worker's
    most common answer. Keys this function does not know come last as "label: value".
    """
    e = dict(evidence)
    used = {"evidence", "evidence_counts", "constant_value", "too_fast_n", "attention_checks",
            "gold_n", "gold_weight"}  # fmt: skip
    out: list[Figure] = []

    def add(key: str, heading: str, text: str) -> None:
        used.add(key)
        out.append(Figure(key, heading, text))

    if "responses" in e:
        add("responses", "Responses", count(e["responses"]))
    if "attention_failed" in e:
        checks, failed = e.get("attention_checks") or 0, e["attention_failed"] or 0
        text = (
            "none answered yet" if not checks
            else f"failed {_of(failed, checks)}" if failed
            else f"passed all {count(checks)}"
        )  # fmt: skip
        add("attention_failed", "Attention checks", text)
    if "gold_accuracy" in e or "gold_n" in e:
        n = e.get("gold_n") or 0
        weight = e.get("gold_weight")
        # Hard items (most readers miss them) count less: say so where they did.
        worth = (f" (worth {weight:.1f} full tests)"
                 if n and weight is not None and weight < n - 0.05 else "")  # fmt: skip
        text = (
            f"{count(n)} answered{worth}, {percent(e.get('gold_accuracy'))} right on average"
            if n and e.get("gold_accuracy") is not None
            else f"{count(n)} answered{worth}" if n else "none answered yet"
        )  # fmt: skip
        add("gold_accuracy", "Gold items", text)
    if "gold_mean" in e:
        how = "from gold answers and the prior" if e.get("gold_n") else "the prior alone"
        add("gold_mean", title("gold_mean"), f"{percent(e['gold_mean'])} ({how})")
    if "gold_below_prob" in e:
        prob = e["gold_below_prob"]
        add("gold_below_prob", title("gold_below_prob"),
            "no gold answered yet" if prob is None else percent(prob))  # fmt: skip
    if "gold_rate" in e:
        add("gold_rate", title("gold_rate"), percent(e["gold_rate"]))
    if "check_rate" in e:
        add("check_rate", title("check_rate"), percent(e["check_rate"]))
    if "agreement" in e:
        used.update(("agreement_n", "agreement_real_n", "agreement_chance",
                     "agreement_threshold"))  # fmt: skip
        text = "no answers shared with enough others yet"
        if e["agreement"] is not None:
            # Known answers (gold, checks) are judged too; say how many were real items.
            real = e.get("agreement_real_n")
            of_real = "" if real is None else f"{count(real)} of them on real items; "
            text = (
                f"{percent(e['agreement'])} over {count(e.get('agreement_n'))} answers ({of_real}"
                f"chance {percent(e.get('agreement_chance'))}, "
                f"threshold {percent(e.get('agreement_threshold'))})"
            )
        add("agreement", "Accuracy against the crowd", text)
    for key in ("agreement_below_prob", "recent_agreement", "recent_below_prob"):
        if key in e:
            add(key, title(key), value_of(key, e[key]))
    if "stopped_reading_prob" in e:
        used.update(("stopped_reading_n", "stopped_reading_since"))
        prob, since = e["stopped_reading_prob"], e.get("stopped_reading_since")
        text = "no answers or checks judged yet"
        if prob is not None:
            when = (
                "most probably reading" if since is None
                else "at random from the start" if since == 0
                else f"most probably at random after the first {count(since)}"
            )  # fmt: skip
            text = (
                f"probability {prob:.3f}, from {count(e.get('stopped_reading_n'))} judged answers "
                f"and attention checks together ({when})"
            )
        add("stopped_reading_prob", "Not reading now", text)
    if "collusion_partners" in e:
        used.update(("collusion_group", "collusion_pairs"))
        group = e.get("collusion_group") or []
        text = "none found"
        if group:
            text = (
                f"shares answers with {count(e['collusion_partners'])} other worker(s) beyond "
                f"chance; group of workers {', '.join(map(str, group))}"
            )
        add("collusion_partners", "Collusion", text)
    if "too_fast_share" in e:
        share, n = e["too_fast_share"], e.get("too_fast_n")
        text = NOTHING if share is None else f"{_of(n, e.get('responses'))} ({percent(share)})"
        add("too_fast_share", "Too fast to read", text)
    if "constant_share" in e:
        share, value = e["constant_share"], e.get("constant_value")
        text = NOTHING
        if share is not None:
            shown = (alike or _quoted)(str(value)) if value is not None else NOTHING
            n = e.get("constant_n")
            over = "answers" if n is None else f"{count(n)} answers"
            text = f"{percent(share)} of {over} alike: {shown}"
        add("constant_share", "Most common answer", text)
    if "longest_run" in e:
        run = e["longest_run"]
        add("longest_run", "Longest run of one answer",
            NOTHING if run is None else f"{count(run)} in a row")  # fmt: skip
    for key, heading in (
        ("repeated_explanations", "Reused explanations"),
        ("pasted_n", "Pasted explanations"),
        ("typed_too_fast_n", "Explanations typed implausibly fast"),
    ):
        if key in e:
            add(key, heading, "none" if not e[key] else f"{count(e[key])} answers")
    if "source" in e:
        add("source", "Answers", "imported" if e["source"] == "imported" else "given here (live)")
    if "rater_groups" in e:
        add("rater_groups", "Rater groups", value_of("rater_groups", e["rater_groups"]) or NOTHING)
    for key, value in e.items():
        if key not in used:
            out.append(Figure(key, title(key), value_of(key, value)))
    return out


def _quoted(surface: str) -> str:
    return f"“{surface}”"


def _typed(entry: Mapping[str, Any]) -> str:
    speed = entry.get("chars_per_second")
    how = "no typing time recorded" if speed is None else f"{number(speed)} characters a second"
    typing = seconds((entry.get("typing_ms") or 0) / 1000)
    return (
        f"{count(entry.get('typed_chars'))} characters typed in {typing} ({how}), "
        f"{count(entry.get('keys'))} keystrokes"
    )


# Each signal of qc.anomalies: its title, what it means, and one entry as a sentence.
SIGNALS: dict[str, tuple[str, str, Callable[[Mapping[str, Any], Callable[[str], str]], str]]] = {
    "too_fast": (
        "Answered too fast to read",
        "answered before the text shown could be read at a fast reading speed",
        lambda e, _: (
            f"answered in {seconds(e.get('seconds'))}; its {count(e.get('chars_shown'))} "
            f"characters take at least {seconds(e.get('min_seconds_for_text'))}"
        ),
    ),
    "pasted": (
        "Pasted explanations",
        "most of the explanation was pasted rather than typed",
        lambda e, _: (
            f"{count(e.get('pasted_chars'))} of the explanation's "
            f"{count(e.get('explanation_chars'))} characters pasted "
            f"({count(e.get('pastes'))} paste{'' if e.get('pastes') == 1 else 's'})"
        ),
    ),
    "typed_too_fast": (
        "Explanations typed implausibly fast",
        "more characters came in than a person types, or with too few keystrokes",
        lambda e, _: _typed(e),
    ),
    "identical_run": (
        "The same answer many times in a row",
        "a long run of identical answers, as from someone not reading",
        lambda e, alike: (
            f"{count(e.get('length'))} answers in a row alike, from this one: "
            + (alike(str(e["value"])) if e.get("value") is not None else NOTHING)
        ),
    ),
    "repeated_explanation": (
        "Explanation reused on other items",
        "the same explanation given on several items",
        lambda e, _: f"“{e.get('text', '')}” on items {value_of('items', e.get('items') or [])}",
    ),
}
_ENTRY_KEYS = ("response_id", "item")


def sections(
    signals: Mapping[str, Any] | None,
    alike: Callable[[str], str] | None = None,
    counts: Mapping[str, Any] | None = None,
) -> list[Section]:
    """The worker's evidence entries by signal, each entry a sentence about its answer;
    `counts` (signal -> entries found) says where QC kept only the latest.

    Signals with no entries are left out; an unknown signal's entries read as their fields.
    """
    out: list[Section] = []
    for key, entries in (signals or {}).items():
        if not entries:
            continue
        if not isinstance(entries, list):
            entries = [entries]
        heading, about, sentence = SIGNALS.get(
            key, (title(key), "", lambda e, _: inline(_fields_of(e)))
        )
        found: list[Line] = []
        for entry in entries:
            if not isinstance(entry, Mapping):
                found.append(Line(value_of(key, entry)))
                continue
            try:
                text = sentence(entry, alike or _quoted)
            except _UNREADABLE:
                text = inline(_fields_of(entry))
            item = entry.get("item")
            response = entry.get("response_id")
            found.append(Line(text, None if item is None else str(item),
                              response if isinstance(response, int) else None))  # fmt: skip
        total = (counts or {}).get(key)
        more = total if isinstance(total, int) and total > len(found) else None
        out.append(Section(key, heading, about, found, more))
    return out


def _fields_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in _ENTRY_KEYS}


def signal_names(keys: Iterable[str]) -> str:
    """Signal keys as words, e.g. "too fast, pasted"."""
    return ", ".join(label(key) for key in keys)


# -- one worker's page ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """One answer as the worker page lists it."""

    number: int
    response_id: int
    item: str
    kind: str
    text: str
    expected: str | None
    seconds: str
    gold: str
    attention: str
    signals: str
    explanation: str
    at: str


@dataclass(frozen=True)
class AuditLine:
    """One audit entry in words; `at_iso` stays exact for the page's <time> element."""

    at: str
    at_iso: str
    actor: str
    action: str
    worker_id: int | None
    reason: str
    details: list[str]


def answers(
    rows: Iterable[Mapping[str, Any]],
    items: Mapping[int, tuple[Mapping[str, Any], Mapping[str, Any]]],
    hit: HitType,
    config: Mapping[str, Any],
) -> list[Answer]:
    """The worker's answers (crowd.review.worker_history's) in the HIT type's terms, with the
    expected answer of gold, attention and training items."""
    out = []
    for number_, row in enumerate(rows, start=1):
        content, expected = items.get(row["response_id"], ({}, {}))
        passed = row.get("attention_passed")
        out.append(
            Answer(
                number=number_,
                response_id=row["response_id"],
                item=str(row["item"]),
                kind=str(row["kind"]),
                text=describe_answer(hit, row.get("answer") or {}, content, config),
                expected=(
                    None
                    if row["kind"] == "real"
                    else describe_expected(hit, expected, content, config)
                ),  # fmt: skip
                seconds=seconds(row.get("seconds")),
                gold="" if row.get("gold_accuracy") is None else percent(row["gold_accuracy"]),
                attention="" if passed is None else "passed" if passed else "failed",
                signals=signal_names(row.get("signals") or []),
                explanation=row.get("explanation") or "",
                at=when(row.get("created_at")),
            )
        )
    return out


def misses(rows: Iterable[Mapping[str, Any]], shown: list[Answer]) -> list[Section]:
    """Gold answers short of full credit and failed attention checks, each as "answered X,
    expected Y" about its item."""
    by_id = {answer.response_id: answer for answer in shown}
    gold: list[Line] = []
    attention: list[Line] = []
    for row in rows:
        answer = by_id[row["response_id"]]
        expected = answer.expected or "no expected answer stored"
        accuracy = row.get("gold_accuracy")
        if row["kind"] in ("gold", "training") and accuracy is not None and accuracy < 1:
            text = f"answered {answer.text}; expected {expected} ({percent(accuracy)} credit)"
            gold.append(Line(text, answer.item, answer.response_id))
        if row["kind"] == "attention" and row.get("attention_passed") is False:
            text = f"answered {answer.text}; the check asked for {expected}"
            attention.append(Line(text, answer.item, answer.response_id))
    out = []
    if attention:
        about = "items whose text told the worker what to answer"
        out.append(Section("attention_failed", "Attention checks failed", about, attention))
    if gold:
        about = "items with a known answer, answered short of full credit"
        out.append(Section("gold_missed", "Gold items missed", about, gold))
    return out


def audit_lines(rows: Iterable[Mapping[str, Any]]) -> list[AuditLine]:
    """Audit entries (crowd.review.audit_row's) in words: the time, the action, the details."""
    return [
        AuditLine(
            at=when(row["at"]),
            at_iso=str(row["at"]),
            actor=str(row["actor"]),
            action=str(row["action"]).replace("_", "-"),
            worker_id=row.get("worker_id"),
            reason=row.get("reason") or "",
            details=lines(row.get("details") or {}),
        )
        for row in rows
    ]


def worker_view(
    history: Mapping[str, Any],
    items: Mapping[int, tuple[Mapping[str, Any], Mapping[str, Any]]],
    hit: HitType,
    config: Mapping[str, Any],
) -> dict[str, Any]:
    """Everything the worker page shows of crowd.review.worker_history, in words."""
    rows = list(history["answers"])
    shown = answers(rows, items, hit, config)
    by_surface: dict[str, Answer] = {}
    for row, answer in zip(rows, shown, strict=True):
        if row.get("surface") is not None:
            by_surface.setdefault(str(row["surface"]), answer)

    def alike(surface: str) -> str:
        answer = by_surface.get(surface)
        return _quoted(surface) if answer is None else f"{answer.text} (as on item {answer.item})"

    evidence = history.get("evidence") or {}
    return {
        "figures": figures(evidence, alike),
        "sections": misses(rows, shown)
        + sections(evidence.get("evidence"), alike, evidence.get("evidence_counts")),
        "answers": shown,
        "audit": audit_lines(history.get("audit") or []),
        "bonuses": [
            {**bonus, "at": when(bonus.get("at"))} for bonus in history.get("bonuses") or []
        ],
    }
