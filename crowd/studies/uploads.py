"""Item uploads in JSON lines or CSV: every line checked and shown before anything is stored.

`check_items` reads a file (crowd.studies.item_files: the CSV layout is described there and
in the README's item formats), validates each line with the study's HIT type, against the
file's other lines and the study's stored items, and returns a per-line preview;
`store_items` stores the same file all or none through crowd.studies.lifecycle.import_items,
naming the first bad line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.exceptions import InvalidItem, StudyNotOpen, ValidationError
from crowd.storage import Item, Study, StudyStatus
from crowd.studies.item_files import COLUMNS, Entry, decode, detect_format, read_entries
from crowd.studies.lifecycle import (
    MAX_ITEMS_PER_IMPORT,
    import_items,
    json_position,
    strict_json,
)
from tasks import HitType, ItemSpec, get_hit_type
from tasks.base import ITEM_KINDS

__all__ = [
    "check_items", "check_records", "decode", "detect_format", "store_items", "store_records",
]  # fmt: skip
SUMMARY_CHARS = 80
# The items table's limits (crowd.storage.studies.Item).
MAX_ID_CHARS, MAX_CATEGORY_CHARS = 200, 100
# Fields whose text stands for the item in a preview, in the order they are looked for.
SUMMARY_FIELDS = ("text", "query", "sentences", "word", "candidates")
QUOTED = re.compile(r"'([A-Za-z_][\w.]*)'")
NUMBERED = re.compile(r"\b(sentence|candidate|variant|policy) \d+")


def check_entries(session: Session, study: Study, entries: list[Entry]) -> None:
    """Validate each entry with the study's HIT type, against the others and the stored items."""
    if study.status == StudyStatus.COMPLETED:
        raise StudyNotOpen(f"study {study.id} is completed: create a new study for more items")
    hit = get_hit_type(study.hit_type)
    options = hit.validate_config(study.config)
    first_line: dict[str, int] = {}
    for entry in entries:
        if entry.record is None or entry.error is not None:
            continue
        try:
            spec = hit.validate_item(entry.record, f"line {entry.line}")
            # What the type checks against the study (e.g. Likert ratings within the scales).
            hit.plan_items([spec], options)
        except ValidationError as error:
            entry.fail(error.message, _field(error, entry.record, hit))
            continue
        entry.spec = spec
        if not _storable(entry):
            continue
        earlier = first_line.setdefault(spec.external_id, entry.line)
        if earlier != entry.line:
            entry.fail(f"id {spec.external_id!r} appears twice in this file: line {earlier} "
                       "has it too; give each item its own id", "id")  # fmt: skip
    stored = stored_ids(session, study, first_line)
    for entry in entries:
        if entry.spec is not None and entry.error is None and entry.spec.external_id in stored:
            entry.fail(f"id {entry.spec.external_id!r} is already in study {study.id}: give the "
                       "item another id, or leave it out of the file", "id")  # fmt: skip


def _storable(entry: Entry) -> bool:
    """What the items table holds, whatever a HIT type lets through (PostgreSQL refuses a
    longer text in the INSERT, after every check)."""
    spec = cast(ItemSpec, entry.spec)
    if len(spec.external_id) > MAX_ID_CHARS:
        entry.fail(f"an id is at most {MAX_ID_CHARS} characters", "id")
    elif spec.category is not None and (
        not isinstance(spec.category, str) or len(spec.category) > MAX_CATEGORY_CHARS
    ):
        entry.fail(f"'category' is text of at most {MAX_CATEGORY_CHARS} characters", "category")
    return entry.error is None


def stored_ids(session: Session, study: Study, ids: Iterable[str]) -> set[str]:
    """Which of `ids` the study's items already use (asked in chunks: SQLite bounds the
    number of parameters of a query)."""
    wanted, found = list(ids), set[str]()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        found.update(session.scalars(
            select(Item.external_id).where(Item.study_id == study.id, Item.external_id.in_(chunk))
        ))  # fmt: skip
    return found


def _field(error: ValidationError, record: Mapping[str, Any], hit: HitType) -> str | None:
    """The field a HIT type's error is about: named in `where` (taboo: "line 3.word") or
    quoted in the message ("'boundary' must be ...")."""
    where = error.where or ""
    rest = re.sub(r"^(line \d+|item)", "", where)
    if rest.startswith(".") and len(rest) > 1:
        return rest[1:]
    quoted = QUOTED.findall(error.message)
    if error.message.startswith("unknown") and quoted:
        return str(quoted[0])  # the first unknown key; the allowed ones follow
    fields = {pattern.split(".")[0] for pattern in COLUMNS.get(hit.name, {})} | set(record)
    for name in quoted:
        if name.split(".")[0] in fields:
            return str(name)
    numbered = NUMBERED.search(error.message)
    if numbered:
        return {"policy": "policies"}.get(numbered.group(1), numbered.group(1) + "s")
    for word in re.findall(r"[a-z_]+", error.message):
        if word in fields:
            return word
    return None


def _where(entry: Entry) -> str:
    return f"line {entry.line}" + (f", {entry.field}" if entry.field else "")


def _clip(text: str, limit: int = SUMMARY_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _summary(entry: Entry) -> str:
    record = entry.record or {}
    for key in SUMMARY_FIELDS:
        value = record.get(key)
        if isinstance(value, list):
            parts = [part.get("text") if isinstance(part, dict) else part for part in value]
            value = " ".join(part for part in parts if isinstance(part, str))
        if isinstance(value, str) and value.strip():
            return _clip(value)
    return _clip(entry.text)


def line_json(entry: Entry) -> dict[str, Any]:
    """One line of the preview (crowd.web.schemas.studies.CheckedLine)."""
    record = entry.record or {}
    external_id: Any = entry.spec.external_id if entry.spec else record.get("id")
    if isinstance(external_id, bool) or not isinstance(external_id, str | int):
        external_id = None
    kind = entry.spec.kind if entry.spec else record.get("kind", "real")
    return {
        "line": entry.line,
        "id": None if external_id is None else _clip(str(external_id), 200),
        "kind": kind if isinstance(kind, str) and kind in ITEM_KINDS else None,
        "ok": entry.error is None,
        "error": entry.error,
        "field": entry.field,
        "summary": _summary(entry),
    }


def preview(fmt: str, entries: list[Entry]) -> dict[str, Any]:
    invalid = sum(1 for entry in entries if entry.error is not None)
    return {
        "format": fmt,
        "total": len(entries),
        "valid": len(entries) - invalid,
        "invalid": invalid,
        "lines": [line_json(entry) for entry in entries],
    }


def check_items(
    session: Session,
    study: Study,
    text: str,
    fmt: str = "auto",
    filename: str | None = None,
    *,
    loads: Callable[[str], Any] = strict_json,
) -> dict[str, Any]:
    """Validate every line of a file WITHOUT storing it: the per-line preview.

    A file that cannot be read at all (an unknown column, CSV it cannot parse) raises,
    naming the line. `loads` may check more of the JSON (the web passes crowd.web.bodies'
    checks: depth, 64-bit integers)."""
    fmt, entries = read_entries(text, get_hit_type(study.hit_type), fmt, filename, loads)
    check_entries(session, study, entries)
    return preview(fmt, entries)


def check_records(session: Session, study: Study, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The same preview for items given as JSON objects: `line` is the item's place from 1."""
    entries = [Entry(index + 1, dict(record)) for index, record in enumerate(records)]
    if len(entries) > MAX_ITEMS_PER_IMPORT:
        raise ValidationError(f"at most {MAX_ITEMS_PER_IMPORT} items per import: split the file")
    check_entries(session, study, entries)
    return preview("json", entries)


def store_records(session: Session, study: Study, records: list[dict[str, Any]]) -> int:
    """Store items given as JSON objects, all or none; InvalidItem names the first bad one
    by its place (items[2].boundary)."""
    entries = [Entry(index + 1, dict(record)) for index, record in enumerate(records)]
    check_entries(session, study, entries)
    bad = next((entry for entry in entries if entry.error is not None), None)
    if bad is not None:
        field = f".{bad.field}" if bad.field else ""
        raise InvalidItem(str(bad.error), f"{json_position(bad.line - 1)}{field}")
    return import_items(session, study, records, json_position)


def store_items(
    session: Session,
    study: Study,
    text: str,
    fmt: str = "auto",
    filename: str | None = None,
    *,
    loads: Callable[[str], Any] = strict_json,
) -> int:
    """Store every item of a file, or none: InvalidItem names the first bad line."""
    fmt, entries = read_entries(text, get_hit_type(study.hit_type), fmt, filename, loads)
    check_entries(session, study, entries)
    bad = [entry for entry in entries if entry.error is not None]
    if bad:
        more = (f" ({len(bad) - 1} more lines have problems: `crowd study import --check` or "
                f"POST /api/studies/{study.id}/items/check lists them all)")  # fmt: skip
        raise InvalidItem(str(bad[0].error) + (more if len(bad) > 1 else ""), _where(bad[0]))
    records = [entry.record for entry in entries if entry.record is not None]
    return import_items(session, study, records, lambda index: f"line {entries[index].line}")
