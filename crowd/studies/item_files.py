"""Item files as entries: JSON lines or CSV read line by line, each with what reading it found.

CSV: one row per item, a column per top-level item field (see COLUMNS). A cell that is empty
is a field not given; a cell is read without the spaces around it. Numbers written as text
become numbers where the field wants one. A list cell is a JSON array (`["a", "b"]`), or its
entries one per line of the cell, or, on one line, separated by `|`. An object cell is a
JSON object. Dotted columns fill nested fields (`meta.generator`, `expected_ratings.fluency`),
and a number in the path is a place in a list counted from 0 (`sentences.0`,
`candidates.1.policy`). The header line decides the delimiter: comma, semicolon or tab.
Lines are the file's own: the header is line 1, and a row whose quoted cell holds newlines
starts on the line the row starts on.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from crowd.exceptions import InvalidItem, ValidationError
from crowd.studies.lifecycle import MAX_ITEMS_PER_IMPORT, strict_json
from tasks import HitType, ItemSpec

FORMATS = ("jsonl", "csv")
MAX_INT = 2**63 - 1
# Numbered columns (sentences.0, candidates.3.text): more places than any HIT type's list.
MAX_PLACES = 1000
# Kinds of cell: how a CSV cell's text becomes the field's value.
TEXT, INT, NUMBER, TEXTS, NUMBERS, OBJECT, VALUE = (
    "text", "int", "number", "texts", "numbers", "object", "value",
)  # fmt: skip
# The columns each HIT type's items take, by path: `*` is any name, `#` any place in a list.
# A column that is not listed but starts with a listed field is a VALUE (JSON or text).
COLUMNS: dict[str, dict[str, str]] = {
    "boundary": {
        "id": TEXT, "kind": TEXT, "category": TEXT, "sentences": TEXTS, "sentences.#": TEXT,
        "boundary": INT, "generator": TEXT, "decoding": OBJECT, "decoding.strategy": TEXT,
        "decoding.value": NUMBER, "prompt_source": TEXT, "prompt_index": INT,
        "meta": OBJECT, "meta.*": VALUE,
    },
    "likert": {
        "id": TEXT, "kind": TEXT, "text": TEXT, "prompt": TEXT, "reference": TEXT,
        "group": TEXT, "expected_rating": INT, "expected_ratings": OBJECT,
        "expected_ratings.*": INT, "meta": OBJECT, "meta.*": VALUE,
    },
    "comparison": {
        "id": TEXT, "kind": TEXT, "query": TEXT, "candidates": TEXTS, "candidates.#": TEXT,
        "candidates.#.text": TEXT, "candidates.#.policy": TEXT, "policies": TEXTS,
        "policies.#": TEXT, "best": INT, "category": TEXT, "meta": OBJECT,
        "meta.utility": NUMBERS, "meta.utility.#": NUMBER, "meta.*": VALUE,
    },
    "form": {
        "id": TEXT, "kind": TEXT, "text": TEXT, "attachments": VALUE, "attachments.#.type": TEXT,
        "attachments.#.content": TEXT, "attachments.#.alt": TEXT, "fields": VALUE,
        "expected": OBJECT, "expected.*": VALUE, "tolerance": OBJECT, "tolerance.*": NUMBER,
        "meta": OBJECT, "meta.*": VALUE,
    },
    "taboo": {
        "id": TEXT, "kind": TEXT, "word": TEXT, "variants": TEXTS, "variants.#": TEXT,
        "concreteness": NUMBER, "category": TEXT,
    },
}  # fmt: skip
INTEGER = re.compile(r"[+-]?\d+")


@dataclass
class Entry:
    """One item of an upload (a JSON line, a CSV row) and what the checks found."""

    line: int
    record: dict[str, Any] | None
    text: str = ""
    error: str | None = None
    field: str | None = None
    spec: ItemSpec | None = None

    def fail(self, message: str, field: str | None = None) -> None:
        if self.error is None:  # the first problem of a line is the one to fix first
            self.error, self.field = message, field


class CellError(ValueError):
    """A cell whose text is not a value of its column's kind; `field` names the column."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def decode(data: bytes) -> str:
    """A file's bytes as text: UTF-8 (a byte-order mark is fine), no NUL characters."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValidationError("the file is UTF-16: save it as UTF-8 (CSV UTF-8 in Excel)", "line 1")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValidationError(f"not UTF-8 ({error.reason}): save the file as UTF-8",
                              f"line {line}") from None  # fmt: skip
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ValidationError("holds a NUL character (\\u0000): remove it", f"line {line}")
    return text


def detect_format(text: str, filename: str | None = None) -> str:
    """ "jsonl" or "csv": by the file name's extension, else by the first line that is not
    blank (a JSON object starts with `{`)."""
    name = (filename or "").lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".tsv", ".txt")):
        return "csv"
    for line in text.removeprefix("\ufeff").split("\n"):
        if line.strip():
            return "jsonl" if line.lstrip().startswith("{") else "csv"
    return "jsonl"


def _format(text: str, fmt: str, filename: str | None) -> str:
    if fmt == "auto":
        return detect_format(text, filename)
    if fmt not in FORMATS:
        raise ValidationError(f"must be auto, {' or '.join(FORMATS)}", "format")
    return fmt


def read_jsonl(text: str, loads: Callable[[str], Any] = strict_json) -> list[Entry]:
    """One entry per line that is not blank; lines end at "\\n" only (not at the Unicode
    separators generated text holds inside strings)."""
    entries = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        entry = Entry(number, None, text=line.strip())
        try:
            value = loads(line)
        except json.JSONDecodeError as error:
            entry.fail(f"not valid JSON ({error.msg})")
        except ValidationError as error:  # what the web's checks refuse (depth, 64 bits)
            entry.fail(f"not valid JSON here: {error.message}", error.where)
        except (ValueError, RecursionError) as error:  # NaN, past Python's digit limit
            entry.fail(f"not valid JSON ({error})" if isinstance(error, ValueError)
                       else "not valid JSON (nested too deeply)")  # fmt: skip
        else:
            if isinstance(value, dict):
                entry.record = value
            else:
                entry.fail('each line must be a JSON object: {"id": ..., ...}')
        entries.append(entry)
    return entries


def _delimiter(header_line: str) -> str:
    counts = {mark: header_line.count(mark) for mark in (",", ";", "\t")}
    best = max(counts, key=lambda mark: counts[mark])
    return best if counts[best] else ","


def _path(column: str) -> tuple[str | int, ...]:
    return tuple(int(part) if part.isascii() and part.isdigit() else part
                 for part in column.split("."))  # fmt: skip


def _kind_of(path: tuple[str | int, ...], columns: Mapping[str, str] | None) -> str | None:
    """The cell kind of a column; None when the HIT type takes no such field."""
    if columns is None:
        return VALUE
    for pattern, kind in columns.items():
        parts = pattern.split(".")
        if len(parts) == len(path) and all(
            want == part or (want == "#" and isinstance(part, int))
            or (want == "*" and isinstance(part, str))
            for want, part in zip(parts, path, strict=True)
        ):  # fmt: skip
            return kind
    return VALUE if str(path[0]) in columns else None


def read_csv(text: str, hit: HitType, loads: Callable[[str], Any] = strict_json) -> list[Entry]:
    """One entry per row that is not blank; a bad header refuses the whole file."""
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    first = next((n for n, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise ValidationError("the file is empty: it needs a header line and one row per item")
    # strict: a quote left open is an error rather than a cell that takes the rest of the file.
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(lines[first]),
                        strict=True)  # fmt: skip
    try:
        header: list[str] | None = []
        while header is not None and not any(cell.strip() for cell in header):
            header = next(reader, None)
        if header is None:
            raise ValidationError("the CSV has no header: its first line names the columns")
        header_line = reader.line_num
        columns = _header(header, header_line, hit)
        entries = []
        last = reader.line_num
        for cells in reader:
            line, last = last + 1, reader.line_num
            if any(cell.strip() for cell in cells):
                entries.append(_row(line, cells, columns, loads))
    except csv.Error as error:
        message = str(error)
        if "field larger than field limit" in message:
            message = f"a cell is longer than {csv.field_size_limit()} characters (check quotes)"
        raise InvalidItem(f"not readable as CSV: {message}", f"line {reader.line_num}") from None
    return entries


@dataclass(frozen=True)
class Column:
    name: str
    path: tuple[str | int, ...]
    kind: str


def _header(names: list[str], line: int, hit: HitType) -> list[Column | None]:
    known = COLUMNS.get(hit.name)
    columns: list[Column | None] = []
    seen: set[str] = set()
    for raw in names:
        name = raw.strip()
        where = f"line {line}, column {name!r}"
        if not name:
            columns.append(None)  # a spreadsheet's empty trailing column: its cells must be too
            continue
        if name in seen:
            raise InvalidItem("this column appears twice in the header", where)
        seen.add(name)
        path = _path(name)
        if any(part == "" for part in path) or isinstance(path[0], int):
            raise InvalidItem("not a field name: write e.g. meta.source or sentences.0", where)
        if any(isinstance(part, int) and part >= MAX_PLACES for part in path):
            raise InvalidItem(f"places in a list count from 0 to {MAX_PLACES - 1}", where)
        kind = _kind_of(path, known)
        if kind is None:
            fields = sorted({pattern.split(".")[0] for pattern in known or {}})
            raise InvalidItem(
                f"{hit.name} items have no field {path[0]!r}: the columns are "
                f"{', '.join(fields)} (and dotted ones inside them, e.g. meta.source)",
                where,
            )
        columns.append(Column(name, path, kind))
    if not any(columns):
        raise InvalidItem("the header names no column", f"line {line}")
    return columns


def _row(
    line: int, cells: list[str], columns: list[Column | None], loads: Callable[[str], Any]
) -> Entry:
    entry = Entry(line, None, text=" | ".join(cell.strip() for cell in cells if cell.strip()))
    extra = cells[len(columns) :]
    if any(cell.strip() for cell in extra):
        entry.fail(f"{len(cells)} cells but the header has {len(columns)} columns: quote a cell "
                   "that holds the delimiter")  # fmt: skip
    record: dict[str, Any] = {}
    given = sorted(
        ((column, cell) for column, cell in zip(columns, cells, strict=False) if cell.strip()),
        key=lambda pair: len(pair[0].path) if pair[0] else 0,
    )
    for column, cell in given:
        if column is None:
            entry.fail("a cell under a column with no name: name the column or empty the cell")
            continue
        try:
            _put(record, column.path, cell_value(column.kind, cell, loads))
        except CellError as error:
            entry.fail(str(error), column.name)
    try:
        entry.record = _lists(record, ())
    except CellError as error:
        entry.fail(str(error), error.field)
        entry.record = record
    return entry


def cell_value(kind: str, cell: str, loads: Callable[[str], Any] = strict_json) -> Any:
    """The value of one CSV cell of `kind` (see the module docstring)."""
    text = cell.strip()
    if kind == TEXT:
        return text
    if kind == INT:
        return _int(text)
    if kind == NUMBER:
        return _number(text)
    if kind in (TEXTS, NUMBERS):
        if text.startswith("["):
            value = _json(text, loads, "a JSON array")
            if not isinstance(value, list):
                raise CellError("starts with '[' but is not a JSON array")
            return value
        parts = text.split("\n") if "\n" in text else text.split("|")
        entries = [part.strip() for part in parts if part.strip()]
        return [_number(entry) for entry in entries] if kind == NUMBERS else entries
    if kind == OBJECT:
        if not text.startswith("{"):
            raise CellError('must be a JSON object, e.g. {"source": "web"}, or use dotted '
                            "columns (meta.source)")  # fmt: skip
        return _json(text, loads, "a JSON object")
    if text.startswith(("[", "{")):
        return _json(text, loads, "JSON")
    return text


def _json(text: str, loads: Callable[[str], Any], what: str) -> Any:
    try:
        return loads(text)
    except ValidationError as error:
        raise CellError(f"{what} we cannot take: {error.message}") from None
    except (ValueError, RecursionError):
        raise CellError(f"starts like {what} but is not valid JSON: fix it, or see the "
                        "README's item formats for the plain form") from None  # fmt: skip


def _int(text: str) -> int:
    value: int | float
    if INTEGER.fullmatch(text):
        if len(text.lstrip("+-")) > 19:
            raise CellError(f"{text[:30]} is out of range (64-bit)")
        value = int(text)
    else:
        try:
            value = _number(text)
        except CellError:
            raise CellError(f"{text!r} is not a whole number") from None
        if value != int(value):
            raise CellError(f"{text!r} is not a whole number")
        value = int(value)
    if not -MAX_INT - 1 <= value <= MAX_INT:
        raise CellError(f"{text} is out of range (64-bit)")
    return value


def _number(text: str) -> int | float:
    if INTEGER.fullmatch(text) and len(text) < 20:
        return int(text)
    try:
        value = float(text)
    except ValueError:
        comma = " (write the decimal point as '.')" if "," in text else ""
        raise CellError(f"{text!r} is not a number{comma}") from None
    if not math.isfinite(value):
        raise CellError(f"{text!r} is not a finite number")
    return value


def _put(record: dict[Any, Any], path: tuple[str | int, ...], value: Any) -> None:
    node: dict[Any, Any] = record
    for depth, part in enumerate(path[:-1]):
        child = node.setdefault(part, {})
        if isinstance(child, list):  # a list cell filled in part by numbered columns
            child = node[part] = dict(enumerate(child))
        if not isinstance(child, dict):
            where = ".".join(str(p) for p in path[: depth + 1])
            raise CellError(f"{where} is given whole in another column: use one of the two")
        node = child
    if path[-1] in node:
        raise CellError("this field is given in another column too: use one of the two")
    node[path[-1]] = value


def _lists(node: Any, path: tuple[str | int, ...]) -> Any:
    """Numbered parts (dicts keyed 0, 1, ...) become lists, with no place left out."""
    if not isinstance(node, dict):
        return node
    done = {key: _lists(value, (*path, key)) for key, value in node.items()}
    numbered = [key for key in done if isinstance(key, int)]
    if not numbered:
        return done
    name = ".".join(str(p) for p in path)
    if len(numbered) != len(done):
        raise CellError(f"{name} has both numbered and named parts", name)
    missing = sorted(set(range(max(numbered) + 1)) - set(numbered))
    if missing:
        raise CellError(f"{name}.{missing[0]} is empty but a later place is given: number "
                        "the places from 0 without gaps", name)  # fmt: skip
    return [done[index] for index in range(len(numbered))]


def read_entries(
    text: str,
    hit: HitType,
    fmt: str = "auto",
    filename: str | None = None,
    loads: Callable[[str], Any] = strict_json,
) -> tuple[str, list[Entry]]:
    """The file's format and its entries, each with the problem reading it found (if any)."""
    text = text.removeprefix("\ufeff")
    fmt = _format(text, fmt, filename)
    entries = read_jsonl(text, loads) if fmt == "jsonl" else read_csv(text, hit, loads)
    if not entries:
        raise ValidationError(
            "the file holds no items: one JSON object per line, or a CSV header and a row per item"
        )
    if len(entries) > MAX_ITEMS_PER_IMPORT:
        raise ValidationError(f"at most {MAX_ITEMS_PER_IMPORT} items per import: split the file")
    return fmt, entries
