"""Form exports (JSONL, CSV one column per field) and imports of answers collected elsewhere.

CSV cells hold a field's value as text: a category as its values joined by "|", a rank as
indexes joined by ">" (best first), nothing for None; `parse_imported` reads them back.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from crowd.exceptions import InvalidConfig, InvalidItem
from tasks.form.analysis import DEFAULT_SCALE, value_text

FORMATS = ("jsonl", "csv")
COLUMNS = (
    "response_id", "worker", "rater_group", "item", "item_group", "kind", "created_at", "source",
)  # fmt: skip
FIELD_PREFIX = "field:"
CHOICE_SEPARATOR = "|"
RANK_SEPARATOR = ">"
DEFAULT_MAX_CHARACTERS = 1000


def cell(value: Any) -> str:
    """A field's value as one CSV cell."""
    if value is None:
        return ""
    if isinstance(value, list):
        # A category's values, or a rank's indexes (ints, best first).
        is_rank = all(isinstance(v, int) and not isinstance(v, bool) for v in value) and value
        separator = RANK_SEPARATOR if is_rank else CHOICE_SEPARATOR
        return separator.join(value_text(v) for v in value)
    return value_text(value)


def _field_order(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(str(name) for name in row.get("field_types") or {}))
        names.update(dict.fromkeys(str(name) for name in row.get("fields") or {}))
    return list(names)


def export(rows: list[dict[str, Any]], fmt: str, handle: TextIO) -> int:
    """One line (JSONL) or row (CSV, a column `field:<id>` per field) per response."""
    if fmt not in FORMATS:
        raise InvalidConfig(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
    if fmt == "jsonl":
        for row in rows:
            line = {key: row.get(key) for key in COLUMNS}
            line["fields"] = dict(row.get("fields") or {})
            handle.write(json.dumps(line, sort_keys=True) + "\n")
        return len(rows)
    names = _field_order(rows)
    writer = csv.writer(handle)
    writer.writerow([*COLUMNS, *(FIELD_PREFIX + name for name in names)])
    for row in rows:
        values = row.get("fields") or {}
        writer.writerow(
            [
                *("" if row.get(key) is None else str(row.get(key)) for key in COLUMNS),
                *(cell(values.get(name)) for name in names),
            ]
        )
    return len(rows)


# -- answers collected elsewhere ---------------------------------------------------------------
def _choices(field: Mapping[str, Any]) -> list[str]:
    return [
        value_text(c.get("value", c.get("label")) if isinstance(c, Mapping) else c)
        for c in field.get("choices") or []
    ]


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _rating(field: Mapping[str, Any], value: Any, where: str) -> int:
    low, high = field.get("scale") or DEFAULT_SCALE
    number: Any = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if (
        isinstance(number, bool)
        or not isinstance(number, int | float)
        or not float(number).is_integer()
        or not low <= number <= high
    ):
        raise InvalidItem(f"{value!r} is not a whole number from {low} to {high}", where)
    return int(number)


def _category(field: Mapping[str, Any], value: Any, where: str) -> list[str]:
    choices = _choices(field)
    if isinstance(value, str) and value.strip() not in choices:
        given = [part.strip() for part in value.split(CHOICE_SEPARATOR) if part.strip()]
    elif isinstance(value, list):
        given = [value_text(v).strip() if isinstance(v, str) else value_text(v) for v in value]
    else:
        given = [value_text(value).strip() if isinstance(value, str) else value_text(value)]
    unknown = [v for v in given if v not in choices]
    if unknown:
        raise InvalidItem(f"{unknown[0]!r} is not a choice: use one of {', '.join(choices)}", where)
    if len(set(given)) != len(given):
        raise InvalidItem("a value is chosen twice", where)
    low, high = int(field.get("min_choices", 1)), int(field.get("max_choices", 1))
    if not low <= len(given) <= high:
        raise InvalidItem(f"{len(given)} values chosen: choose {low} to {high}", where)
    return [c for c in choices if c in given]  # the declaration's order


def _rank(field: Mapping[str, Any], value: Any, where: str, n_attachments: int | None) -> list[int]:
    parts: list[Any] = value.split(RANK_SEPARATOR) if isinstance(value, str) else value
    if not isinstance(parts, list):
        raise InvalidItem(f"{value!r} is not a ranking: give indexes best first, e.g. 2>0>1", where)
    indexes = []
    for part in parts:
        text = part.strip() if isinstance(part, str) else part
        if isinstance(text, str) and text.isdigit():
            text = int(text)
        if isinstance(text, bool) or not isinstance(text, int):
            raise InvalidItem(
                f"{part!r} is not an index: give indexes best first, e.g. 2>0>1", where
            )
        indexes.append(text)
    k = len(_choices(field)) or n_attachments or len(indexes)
    if sorted(indexes) != list(range(k)):
        raise InvalidItem(
            f"{value!r} does not rank each of the {k} things once: give a permutation of "
            f"0..{k - 1}, best first",
            where,
        )
    return indexes


def _text(field: Mapping[str, Any], value: Any, where: str) -> str | None:
    if not isinstance(value, str):
        raise InvalidItem(f"{value!r} is not text", where)
    text = value.strip()
    low = int(field.get("min_characters", 0))
    high = int(field.get("max_characters", DEFAULT_MAX_CHARACTERS))
    if text and not low <= len(text) <= high:
        raise InvalidItem(f"{len(text)} characters: write {low} to {high}", where)
    return text or None


def parse_value(
    field: Mapping[str, Any], value: Any, where: str, n_attachments: int | None = None
) -> Any:
    """One field's value, native or as CSV text, checked against its declaration; None if blank."""
    kind = field["type"]
    if value == [] and kind == "category":
        return _category(field, value, where)  # nothing chosen: an answer where min is 0
    if _blank(value) or value == []:
        return None
    if kind == "rating":
        return _rating(field, value, where)
    if kind == "category":
        return _category(field, value, where)
    if kind == "rank":
        return _rank(field, value, where, n_attachments)
    return _text(field, value, where)


def _shown(field: Mapping[str, Any], answers: Mapping[str, Any]) -> bool:
    """Whether a show_if condition on an earlier field's answer holds."""
    condition = field.get("show_if")
    if not condition:
        return True
    given = answers.get(str(condition["field"]))
    if given is None:
        return False
    wanted = [condition["equals"]] if "equals" in condition else list(condition.get("in") or [])
    values = given if isinstance(given, list) else [given]
    texts = {value_text(v) for v in wanted}
    return any(value_text(v) in texts for v in values)


def parse_imported(
    raw: Mapping[str, Any], fields: list[dict[str, Any]], n_attachments: int | None = None
) -> dict[str, Any]:
    """An answer from elsewhere ({"fields": {...}} or CSV columns) as {"fields": {...}}.

    CSV columns are `field:<id>` or the bare id; this module's own export columns (kind,
    source, ...) are ignored so an export imports back. Every declared field is present in
    the result, None where not given. A value for a field its condition hides is refused,
    as is a record that answers nothing. `n_attachments` is the number of things a rank
    field without choices orders.
    """
    known = {str(field["id"]): field for field in fields}
    if "fields" in raw:
        extra = sorted(set(raw) - {"fields"})
        if extra:
            raise InvalidItem(
                f"unknown answer keys {extra}: give {{'fields': {{field id: value}}}}", "answer"
            )
        values = raw["fields"]
        prefix = "fields."
        if not isinstance(values, Mapping):
            raise InvalidItem("'fields' must be an object {field id: value}", "fields")
    else:
        prefix = FIELD_PREFIX
        values = {}
        for column, value in raw.items():
            name = str(column)
            if name in COLUMNS:
                continue
            if name.startswith(FIELD_PREFIX) and name not in known:
                name = name[len(FIELD_PREFIX) :]
            if name in values:
                raise InvalidItem("the field is given twice (with and without 'field:')", name)
            values[name] = value
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise InvalidItem(
            f"unknown field {unknown[0]!r}: this form asks {', '.join(known)}",
            f"{prefix}{unknown[0]}",
        )
    answers: dict[str, Any] = {}
    for name, field in known.items():
        where = f"{prefix}{name}"
        value = parse_value(field, values.get(name), where, n_attachments)
        if value is not None and not _shown(field, answers):
            raise InvalidItem(
                f"answered, but the field is hidden unless {field['show_if']['field']!r} "
                "has one of the values it names: leave it empty",
                where,
            )
        answers[name] = value
    if all(value is None for value in answers.values()):
        raise InvalidItem(
            f"no field answered: answer at least one of {', '.join(known)}", prefix + "*"
        )
    return {"fields": answers}
