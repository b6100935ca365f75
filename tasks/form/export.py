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
from tasks.form.answers import check_answer
from tasks.form.config import VALUE_SEPARATOR, value_text

FORMATS = ("jsonl", "csv")
COLUMNS = (
    "response_id", "worker", "rater_group", "item", "item_group", "kind", "created_at", "source",
)  # fmt: skip
FIELD_PREFIX = "field:"
CHOICE_SEPARATOR = VALUE_SEPARATOR
RANK_SEPARATOR = ">"


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
def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value == []


def _whole(value: Any) -> Any:
    """A rating's "4" or 4.0 as 4; anything else as given, for the answer check to refuse."""
    number = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return value
    if isinstance(number, float) and number.is_integer():
        return int(number)
    return number


def _index(part: Any) -> Any:
    text = part.strip() if isinstance(part, str) else part
    return int(text) if isinstance(text, str) and text.isdigit() else text


def native_value(field: Mapping[str, Any], value: Any) -> Any:
    """One field's value from a CSV cell or JSON in the shape a worker's page sends (None if
    blank); whether it is a valid answer is the answer check's to say."""
    kind = field["type"]
    if kind == "category" and value == []:
        return []  # nothing chosen: an answer where min_choices is 0
    if _blank(value):
        return None
    if kind == "rating":
        return _whole(value)
    if kind == "category":
        if isinstance(value, str):  # no value holds "|" (tasks.form.config)
            return [part.strip() for part in value.split(CHOICE_SEPARATOR) if part.strip()]
        if isinstance(value, list):
            return [v.strip() if isinstance(v, str) else v for v in value]
        return [value]
    if kind == "rank":
        parts = value.split(RANK_SEPARATOR) if isinstance(value, str) else value
        return [_index(part) for part in parts] if isinstance(parts, list) else parts
    return value


def parse_imported(
    raw: Mapping[str, Any], fields: list[dict[str, Any]], n_attachments: int = 0
) -> dict[str, Any]:
    """An answer from elsewhere ({"fields": {...}} or CSV columns) as {"fields": {...}},
    checked by the check a worker's answer goes through (tasks.form.answers), except that
    fields may be left unanswered -- but not all of them.

    CSV columns are `field:<id>` or the bare id; this module's own export columns (kind,
    source, ...) are ignored so an export imports back. `fields` are normalised declarations;
    `n_attachments` is the number of things a rank field without choices orders.
    """
    known = {str(field["id"]): field for field in fields}
    if "fields" in raw:
        extra = sorted(set(raw) - {"fields"})
        if extra:
            raise InvalidItem(
                f"unknown answer keys {extra}: give {{'fields': {{field id: value}}}}", "answer"
            )
        values = raw["fields"]
        where, path = "fields", "fields.{}"
        if not isinstance(values, Mapping):
            raise InvalidItem("'fields' must be an object {field id: value}", "fields")
    else:
        where, path = FIELD_PREFIX, FIELD_PREFIX + "{}"
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
    native = {
        name: native_value(known[name], value) if name in known else value
        for name, value in values.items()
    }
    native = {name: value for name, value in native.items() if value is not None}
    answer = check_answer(
        fields, native, n_attachments, InvalidItem, where=where, path=path, require=False
    )
    if all(value is None for value in answer["fields"].values()):
        raise InvalidItem(
            f"no field answered: answer at least one of {', '.join(known)}", path.format("*")
        )
    return answer
