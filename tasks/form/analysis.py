"""Per-field analyses of form answers, on the full and the filtered set.

Each field is analysed over the items that declare it (a study's fields, or an item's own):
- rating: a histogram over the scale, mean and sd; Krippendorff's alpha ordinal (interval
  beside it);
- category: how often each value was chosen; with one choice, alpha nominal on the value;
  with several, alpha nominal on each choice's selected/not (binary), per choice and pooled;
- rank: each candidate's mean rank and share ranked first; alpha ordinal on each candidate's
  position, per candidate and pooled over (item, candidate) units;
- text: length statistics (no agreement: free text never matches exactly by design).
Exact agreement is the share of pairs of answers to the same item that are equal. Each rater
group (crowd, expert, llm:...) gets the same statistics, and two groups are compared by how
often their answers to the same item agree, and for ratings and ranks by Kendall's tau
between their per-item means (`tasks.likert.analysis`, whose helpers this reuses).

A statistic undefined on the data is None with a note saying why, never NaN. Attention and
training rows feed only the attention summary.

Example:
    >>> types = {"q": {"type": "rating", "title": "Q", "scale": [1, 5]}}
    >>> rows = [
    ...     {"response_id": n, "worker": w, "item": i, "kind": "real", "fields": {"q": v},
    ...      "field_types": types}
    ...     for n, (w, i, v) in enumerate([("a", "x", 4), ("b", "x", 4), ("a", "y", 2)])
    ... ]
    >>> field = analyze(rows, set(), {})["full"]["fields"][0]
    >>> field["distribution"]["mean"], field["agreement"]["exact"]
    (3.3333, 1.0)
"""

from __future__ import annotations

import math
import warnings
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal, cast

import krippendorff
import numpy as np

from qc.attention import attention_summary
from qc.filtering import full_and_filtered
from tasks.base import rater_group
from tasks.form.config import DEFAULT_SCALE, FIELD_TYPES, value_text
from tasks.likert.analysis import NO_GROUP, SCORED_KINDS, Rating, describe, tau_between_groups

Row = Mapping[str, Any]

Level = Literal["nominal", "ordinal", "interval"]

LEVELS: dict[str, Level] = {"rating": "ordinal", "category": "nominal", "rank": "ordinal"}
ORDINAL_ONLY = frozenset({"ordinal_mean"})  # aggregation methods for rating fields only
_DIGITS = 4
_REQUIRED = ("response_id", "worker", "item", "kind", "fields", "field_types")


def _num(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return round(number, _DIGITS) if math.isfinite(number) else None


def _choice_values(choices: Any) -> list[str]:
    return [
        value_text(c.get("value", c.get("label")) if isinstance(c, Mapping) else c)
        for c in choices or []
    ]


def field_types_of(
    fields: Sequence[Mapping[str, Any]], n_attachments: int | None = None
) -> dict[str, dict[str, Any]]:
    """The analysis row's `field_types` from field declarations (the item's or the study's).

    A rank field without choices ranks the item's attachments: `n_attachments` of them.
    """
    out: dict[str, dict[str, Any]] = {}
    for field in fields:
        kind = str(field["type"])
        entry: dict[str, Any] = {"type": kind, "title": str(field.get("title") or field["id"])}
        if kind == "rating":
            entry["scale"] = list(field.get("scale") or DEFAULT_SCALE)
        elif kind == "category":
            entry["choices"] = _choice_values(field.get("choices"))
            entry["max_choices"] = int(field.get("max_choices", 1))
        elif kind == "rank":
            if field.get("choices"):
                entry["choices"] = _choice_values(field["choices"])
            elif n_attachments is not None:
                entry["choices"] = [str(index) for index in range(n_attachments)]
        out[str(field["id"])] = entry
    return out


def analysis_row(row: Mapping[str, Any], field_types: Mapping[str, Any]) -> dict[str, Any]:
    """One stored response as the analysis row of the design's section 1."""
    answer = row.get("answer") or {}
    meta = row.get("meta") or {}
    flags = row.get("qc_flags") or {}
    return {
        "response_id": row["response_id"],
        "worker": row["worker"],
        "rater_group": rater_group(row),
        "item": row["item"],
        "kind": row["kind"],
        "item_group": meta.get("group"),
        "fields": dict(answer.get("fields") or {}),
        # The declarations travel with the answer, so reports and exports need no config.
        "field_types": {str(key): dict(value) for key, value in field_types.items()},
        "attention_passed": flags.get("attention_passed"),
        "score": row.get("score"),
        "position": row.get("position"),
        "created_at": row.get("created_at"),
        "source": row.get("source", "live"),
    }


def label_applies(method: str, question: str, field_types: Mapping[str, Any]) -> bool:
    """Whether an aggregation method fits a field: ordinal_mean only averages ratings.

    A field the mapping does not know (an item's own) gets the methods for categories.
    """
    if method not in ORDINAL_ONLY:
        return True
    return (field_types.get(question) or {}).get("type") == "rating"


# -- agreement ---------------------------------------------------------------------------------
def alpha(units: Mapping[Any, Sequence[Hashable]], level: Level) -> tuple[float | None, str | None]:
    """Krippendorff's alpha over the units with two or more values, and why if undefined.

    Alpha depends only on which values each unit got, not on who gave them, so the value
    counts per unit go to `krippendorff.alpha` directly. Ordinal and interval levels order
    the values as numbers; nominal treats them as unordered labels.
    """
    pairable = [list(values) for values in units.values() if len(values) >= 2]
    if not pairable:
        return None, "no item has two answers, so there is nothing to agree on"
    seen = {value for values in pairable for value in values}
    if len(seen) < 2:
        return None, "every answer is the same, so no disagreement is expected: undefined"
    # Ordered levels compare numbers (ratings, positions); nominal labels any hashable.
    domain = sorted(seen, key=repr if level == "nominal" else lambda v: float(cast(float, v)))
    column = {value: index for index, value in enumerate(domain)}
    counts = np.zeros((len(pairable), len(domain)))
    for row, values in enumerate(pairable):
        for value in values:
            counts[row, column[value]] += 1
    value_domain = (
        list(range(len(domain))) if level == "nominal" else [float(cast(float, v)) for v in domain]
    )
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = krippendorff.alpha(
            value_counts=counts, value_domain=value_domain, level_of_measurement=level
        )
    return _num(result), None


def exact_agreement(units: Mapping[Any, Sequence[Hashable]]) -> dict[str, Any]:
    """The share of pairs of answers to the same unit that are equal (None without pairs)."""
    pairs = agreeing = 0
    for values in units.values():
        n = len(values)
        pairs += n * (n - 1) // 2
        agreeing += sum(c * (c - 1) // 2 for c in Counter(values).values())
    return {"exact": _num(agreeing / pairs) if pairs else None, "n_pairs": pairs}


@dataclass(frozen=True)
class Answer:
    """One non-missing answer to one field."""

    worker: str
    rater_group: str
    item: str
    item_group: str
    value: Any


@dataclass
class Field:
    """A field as the rows declare it, with every answer it got."""

    id: str
    type: str
    title: str
    spec: dict[str, Any]
    answers: list[Answer]
    n_missing: int = 0

    @property
    def multi(self) -> bool:
        if "max_choices" in self.spec:
            return int(self.spec["max_choices"]) > 1
        return any(len(a.value) != 1 for a in self.answers)

    def choices(self) -> list[str]:
        """Declared choices, then any value answered that the declarations lack."""
        names = list(self.spec.get("choices") or [])
        if self.type not in ("category", "rank"):
            return []
        if self.type == "category":
            extra = [v for a in self.answers for v in a.value if v not in names]
        else:  # rank: indexes into the choices (or the attachments)
            k = max([len(a.value) for a in self.answers] + [len(names)])
            extra = [str(index) for index in range(len(names), k)]
        return names + list(dict.fromkeys(extra))


def _label(field: Field, value: Any) -> Hashable:
    """An answer as one comparable value: a rating, a category set, a ranking."""
    if field.type in ("category", "rank"):
        return tuple(value)
    return value


def _units(field: Field, answers: Iterable[Answer]) -> dict[Any, list[Hashable]]:
    """The values alpha compares: per item, or per (item, choice) for multi and rank."""
    units: dict[Any, list[Hashable]] = defaultdict(list)
    choices = field.choices() if field.type in ("category", "rank") else []
    for a in answers:
        if field.type == "rating":
            units[a.item].append(a.value)
        elif field.type == "category" and not field.multi:
            units[a.item].append(a.value[0] if a.value else "")
        elif field.type == "category":
            for choice in choices:
                units[(a.item, choice)].append(int(choice in a.value))
        elif field.type == "rank":
            for position, index in enumerate(a.value):
                units[(a.item, choices[index])].append(position + 1)
    return units


def _agreement(field: Field, answers: Sequence[Answer]) -> dict[str, Any]:
    by_item: dict[str, list[Hashable]] = defaultdict(list)
    for a in answers:
        by_item[a.item].append(_label(field, a.value))
    out: dict[str, Any] = {
        "n_items": len(by_item),
        "n_items_multi": sum(1 for values in by_item.values() if len(values) >= 2),
    }
    if field.type == "text":
        return {**out, "level": None, "alpha": None, "alpha_note": "free text", "exact": None}
    out.update(exact_agreement(by_item))
    level = LEVELS[field.type]
    units = _units(field, answers)
    out["level"] = level
    out["alpha"], out["alpha_note"] = alpha(units, level)
    if field.type == "rating":
        out["alpha_interval"], _ = alpha(units, "interval")
    if field.type == "rank" or (field.type == "category" and field.multi):
        per_choice = []
        for choice in field.choices():
            part = {key[0]: values for key, values in units.items() if key[1] == choice}
            value, note = alpha(part, level)
            per_choice.append({"choice": choice, "alpha": value, "alpha_note": note})
        out["per_choice"] = per_choice
    return out


def _distribution(field: Field, answers: Sequence[Answer]) -> dict[str, Any]:
    n = len(answers)
    if field.type == "rating":
        low, high = field.spec.get("scale") or DEFAULT_SCALE
        counts = Counter(a.value for a in answers)
        values = sorted(set(range(int(low), int(high) + 1)) | set(counts))
        return {
            **describe([a.value for a in answers]),
            "histogram": [{"value": v, "count": counts.get(v, 0)} for v in values],
        }
    if field.type == "category":
        counts = Counter(v for a in answers for v in a.value)
        return {
            "n": n,
            "multi": field.multi,
            "n_none": sum(1 for a in answers if not a.value),
            "choices": [
                {"value": c, "count": counts.get(c, 0), "rate": _num(counts[c] / n) if n else None}
                for c in field.choices()
            ],
        }
    if field.type == "rank":
        positions: dict[str, list[int]] = defaultdict(list)
        choices = field.choices()
        for a in answers:
            for position, index in enumerate(a.value):
                positions[choices[index]].append(position + 1)
        return {
            "n": n,
            "choices": [
                {
                    "value": c,
                    "mean_rank": _num(np.mean(positions[c])) if positions[c] else None,
                    "first": _num(positions[c].count(1) / n) if n else None,
                }
                for c in choices
            ],
        }
    lengths = [len(a.value) for a in answers]
    words = [len(a.value.split()) for a in answers]
    return {
        **describe(lengths),
        "median": _num(np.median(lengths)) if lengths else None,
        "min": min(lengths) if lengths else None,
        "max": max(lengths) if lengths else None,
        "mean_words": _num(np.mean(words)) if words else None,
    }


def _modal(labels: Sequence[Hashable]) -> Hashable:
    counts = Counter(labels)
    top = max(counts.values())
    return min((label for label, c in counts.items() if c == top), key=repr)


def _between(field: Field, groups: Sequence[str]) -> list[dict[str, Any]]:
    """Per pair of rater groups: on the items both answered, how often their answers agree."""
    by_group: dict[str, dict[str, list[Hashable]]] = defaultdict(lambda: defaultdict(list))
    for a in field.answers:
        by_group[a.rater_group][a.item].append(_label(field, a.value))
    taus: dict[tuple[str, str], dict[str, Any]] = {}
    if field.type in ("rating", "rank"):
        # Units are items (ratings) or (item, candidate) (ranks): tau between the groups'
        # mean rating of each item, or mean position of each candidate.
        units = [
            Rating(a.worker, a.rater_group, str(key), a.item_group, field.id, float(cast(int, v)))
            for a in field.answers
            for key, values in _units(field, [a]).items()
            for v in values
        ]
        for t in tau_between_groups(units, groups, [field.id]):
            taus[(t["group_a"], t["group_b"])] = t
    out = []
    for first, second in combinations(groups, 2):
        a_items, b_items = by_group[first], by_group[second]
        common = sorted(set(a_items) & set(b_items))
        pairs = agreeing = 0
        for item in common:
            for x in a_items[item]:
                pairs += len(b_items[item])
                agreeing += sum(1 for y in b_items[item] if x == y)
        entry: dict[str, Any] = {
            "group_a": first,
            "group_b": second,
            "n_items": len(common),
            "exact": _num(agreeing / pairs) if pairs and field.type != "text" else None,
            "modal_agreement": _num(
                sum(_modal(a_items[i]) == _modal(b_items[i]) for i in common) / len(common)
            )
            if common and field.type != "text"
            else None,
        }
        tau = taus.get((first, second))
        if tau is not None:
            entry.update(tau=tau["tau"], p=tau["p"], tau_units=tau["n_items"], note=tau["note"])
        out.append(entry)
    return out


def _field_summary(field: Field) -> dict[str, Any]:
    groups = sorted({a.rater_group for a in field.answers})
    return {
        "id": field.id,
        "type": field.type,
        "title": field.title,
        **{key: field.spec[key] for key in ("scale", "choices") if key in field.spec},
        "n_answers": len(field.answers),
        "n_missing": field.n_missing,
        "n_workers": len({a.worker for a in field.answers}),
        "distribution": _distribution(field, field.answers),
        "agreement": _agreement(field, field.answers),
        "by_rater_group": [
            {
                "rater_group": group,
                "n_answers": len(part),
                "n_workers": len({a.worker for a in part}),
                "distribution": _distribution(field, part),
                "agreement": _agreement(field, part),
            }
            for group in groups
            for part in [[a for a in field.answers if a.rater_group == group]]
        ],
        "between_groups": _between(field, groups),
    }


def _check_rows(rows: Sequence[Row]) -> None:
    for index, row in enumerate(rows):
        missing = [key for key in _REQUIRED if key not in row]
        if missing:
            raise ValueError(
                f"row {index} (response {row.get('response_id')!r}) lacks {', '.join(missing)}; "
                f"every row needs {', '.join(_REQUIRED)} (use form's analysis_row)"
            )
        for name, spec in (row["field_types"] or {}).items():
            if (spec or {}).get("type") not in FIELD_TYPES:
                raise ValueError(
                    f"row {index} (response {row['response_id']!r}) declares field {name!r} "
                    f"as {(spec or {}).get('type')!r}; use one of {', '.join(FIELD_TYPES)}"
                )


def _value(kind: str, value: Any) -> Any:
    """A stored value as the analysis compares it (category texts, rank indexes)."""
    if kind == "category":
        return [value_text(v) for v in (value if isinstance(value, list) else [value])]
    if kind == "rank":
        return [int(v) for v in value]
    if kind == "text":
        return str(value)
    return value


def fields_of(rows: Sequence[Row], config: Mapping[str, Any]) -> list[Field]:
    """Every field the rows declare, the study's first (in its order), with their answers."""
    found: dict[tuple[str, str], Field] = {}
    declared = field_types_of(config.get("fields") or [])
    for name, spec in declared.items():
        found[(name, spec["type"])] = Field(name, spec["type"], spec["title"], dict(spec), [])
    for row in rows:
        if row["kind"] not in SCORED_KINDS:
            continue
        values = row["fields"] or {}
        for name, spec in (row["field_types"] or {}).items():
            key = (str(name), str(spec["type"]))
            field = found.get(key)
            if field is None:
                title = str(spec.get("title") or name)
                field = found[key] = Field(key[0], key[1], title, dict(spec), [])
            value = values.get(name)
            if value is None or (key[1] == "text" and value == ""):
                field.n_missing += 1
                continue
            field.answers.append(
                Answer(
                    str(row["worker"]),
                    rater_group(row),
                    str(row["item"]),
                    str(row.get("item_group") or NO_GROUP),
                    _value(key[1], value),
                )
            )
    return list(found.values())


def summarize(rows: Sequence[Row], config: Mapping[str, Any]) -> dict[str, Any]:
    """Every statistic over the real and gold rows of one set."""
    scored = [row for row in rows if row["kind"] in SCORED_KINDS]
    groups = sorted({rater_group(row) for row in scored})
    gold = [
        float(row["score"])
        for row in scored
        if row["kind"] == "gold" and row.get("score") is not None
    ]
    return {
        "counts": {
            "n_responses": len(scored),
            "n_workers": len({(rater_group(row), str(row["worker"])) for row in scored}),
            "n_items": len({str(row["item"]) for row in scored}),
            "by_rater_group": {
                group: {
                    "n_responses": len(part),
                    "n_workers": len({str(row["worker"]) for row in part}),
                    "n_items": len({str(row["item"]) for row in part}),
                }
                for group in groups
                for part in [[row for row in scored if rater_group(row) == group]]
            },
        },
        "gold": {"n": len(gold), "mean_score": _num(np.mean(gold)) if gold else None},
        "rater_groups": groups,
        "fields": [_field_summary(field) for field in fields_of(scored, config)],
    }


def analyze(
    rows: list[dict[str, Any]], excluded_workers: set[str], config: Mapping[str, Any]
) -> dict[str, Any]:
    """Full-set and filtered-set statistics per field, plus attention checks and exclusions."""
    _check_rows(rows)
    # A check the platform could not judge (no verdict stored) counts neither way.
    judged = [row for row in rows if row.get("attention_passed") is not None]
    attention = attention_summary(judged, lambda row: bool(row["attention_passed"]))
    checks = attention["n_checks"]
    attention["pass_rate"] = _num(1 - attention["n_failed_checks"] / checks) if checks else None
    return {
        **full_and_filtered(rows, excluded_workers, lambda part: summarize(part, config)),
        "attention": attention,
    }
