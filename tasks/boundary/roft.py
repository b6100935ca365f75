"""Export to and import from the public RoFT dataset CSV layout (Dugan et al., AAAI 2023)."""

from __future__ import annotations

import ast
import csv
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from tasks.boundary.reasons import REASON_TAGS

ROFT_COLUMNS: tuple[str, ...] = (
    "date", "model", "dataset", "annotator", "group", "dec_strat_value",
    "predicted_boundary_index", "true_boundary_index", "points", "reason", "prompt",
    "prompt_body", "generation", "gen_body", "recipe_familiarity", "news_familiarity",
    "stories_familiarity", "gen_familiarity", "native_speaker", "read_guide",
)  # fmt: skip
SEP = "_SEP_"
NO_ANSWER = "-1"
REASON_JOIN = "; "
_SURVEY_COLUMNS = (
    "recipe_familiarity", "news_familiarity", "stories_familiarity", "gen_familiarity",
    "native_speaker", "read_guide",
)  # fmt: skip
# Import needs only these; group, prompt, generation and the survey answers are not kept.
_IMPORT_COLUMNS = (
    "date", "model", "dataset", "annotator", "dec_strat_value", "predicted_boundary_index",
    "true_boundary_index", "points", "reason", "prompt_body", "gen_body",
)  # fmt: skip
_MISSING = frozenset({"", "nan", "NaN", "None"})
_MAX_LIST_REASON = 10_000


def _optional(value: Any) -> str:
    # `is None` rather than truthiness: p = 0.0 (greedy) and prompt 0 are real values.
    return "" if value is None else str(value)


def _number(value: Any) -> str:
    if value is None:
        return ""
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def _date(value: Any) -> str:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return _optional(value)


def _reason(tags: Iterable[str], explanation: str | None) -> str:
    parts = [str(tag) for tag in tags]
    text = (explanation or "").strip()
    if text:
        parts.append(text)
    return REASON_JOIN.join(parts) or NO_ANSWER


def _index(row: Mapping[str, Any], name: str, n: int) -> int:
    value = int(row[name])
    if not 1 <= value <= n:
        raise ValueError(
            f"response {row.get('response_id')!r}: {name} {value} is outside 1..{n} "
            f"for a passage of {n} sentences; fix the stored row before exporting"
        )
    return value


def to_roft_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Convert analysis rows to RoFT CSV records (indices become 0-based last-human indices)."""
    records = []
    for row in rows:
        sentences = [str(s) for s in row["sentences"]]
        guess = _index(row, "guess", len(sentences))
        boundary = _index(row, "boundary", len(sentences))
        if any(SEP in sentence for sentence in sentences):
            raise ValueError(
                f"response {row.get('response_id')!r}: a sentence contains {SEP!r}, which RoFT "
                "uses between sentences; remove it from the item text before exporting"
            )
        record = {
            "date": _date(row.get("created_at")),
            "model": _optional(row.get("generator")),
            "dataset": _optional(row.get("category")),
            "annotator": str(row["worker"]),
            "group": "",
            "dec_strat_value": _optional(row.get("decoding_value")),
            # RoFT names the last human sentence, 0-based; ours names the first machine
            # sentence 0-based (= last human, 1-based), so both shift down by one.
            "predicted_boundary_index": str(guess - 1),
            "true_boundary_index": str(boundary - 1),
            "points": _number(row.get("points")),
            "reason": _reason(row.get("reasons") or [], row.get("explanation")),
            "prompt": _optional(row.get("prompt_index")),
            # The split follows the true boundary: prompt_body is what a human wrote.
            "prompt_body": SEP.join(sentences[:boundary]),
            "generation": str(row["response_id"]),
            "gen_body": SEP.join(sentences[boundary:]),
            **{column: NO_ANSWER for column in _SURVEY_COLUMNS},
        }
        records.append({column: record[column] for column in ROFT_COLUMNS})
    return records


def write_roft_csv(rows: Iterable[Mapping[str, Any]], handle: TextIO) -> int:
    """Write analysis rows as a RoFT CSV (open handle with newline=""); returns rows written."""
    records = to_roft_rows(rows)
    writer = csv.DictWriter(handle, fieldnames=list(ROFT_COLUMNS))
    writer.writeheader()
    writer.writerows(records)
    return len(records)


def _split_reason(text: str) -> tuple[list[str], str]:
    """Known tags and the remaining free text of a RoFT reason cell."""
    text = text.strip()
    if text in _MISSING or text == NO_ANSWER:
        return [], ""
    # The published roft.csv stores a Python list repr, e.g. "['grammar', 'repetition']".
    if text.startswith("[") and text.endswith("]") and len(text) <= _MAX_LIST_REASON:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError, RecursionError):
            parsed = None
        if isinstance(parsed, list):
            items = [str(item).strip() for item in parsed]
            free = [item for item in items if item and item not in REASON_TAGS]
            return [item for item in items if item in REASON_TAGS], REASON_JOIN.join(free)
    # Our own layout: leading known tags joined with "; ", then the free text verbatim.
    tags: list[str] = []
    rest = text
    while rest:
        head, sep, tail = rest.partition(";")
        if head.strip() not in REASON_TAGS:
            break
        tags.append(head.strip())
        rest = tail[1:] if tail.startswith(" ") else tail
    return tags, rest.strip()


def _parse_int(raw: Mapping[str, str], column: str, line: int) -> int:
    text = raw[column].strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        # pandas writes an int column holding any NaN as floats ("9.0").
        number = float(text)
    except ValueError:
        number = float("nan")
    if number.is_integer():
        return int(number)
    raise ValueError(f"line {line}: {column} must be a whole number, got {text!r}")


def _parse_float(raw: Mapping[str, str], column: str, line: int) -> float | None:
    text = raw[column].strip()
    if text in _MISSING:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"line {line}: {column} must be a number or empty, got {text!r}") from None


def _parse_record(raw: Mapping[str, str], line: int, max_sentences: int | None) -> dict[str, Any]:
    sentences = raw["prompt_body"].split(SEP)
    if raw["gen_body"].strip() not in _MISSING:
        sentences += raw["gen_body"].split(SEP)
    if max_sentences is not None:
        # The public file keeps generations longer than the 10 sentences annotators saw.
        sentences = sentences[:max_sentences]
    n = len(sentences)
    guess = _parse_int(raw, "predicted_boundary_index", line) + 1
    boundary = _parse_int(raw, "true_boundary_index", line) + 1
    for column, value in (("predicted_boundary_index", guess), ("true_boundary_index", boundary)):
        if not 1 <= value <= n:
            raise ValueError(
                f"line {line}: {column} {value - 1} is outside 0..{n - 1} for a passage of {n} "
                "sentences; RoFT indices name the last human-written sentence, counting from 0"
            )
    tags, explanation = _split_reason(raw["reason"])
    return {
        "annotator": raw["annotator"],
        "model": raw["model"],
        "dataset": raw["dataset"],
        "dec_strat_value": _parse_float(raw, "dec_strat_value", line),
        "guess": guess,
        "boundary": boundary,
        "sentences": sentences,
        "points": _parse_float(raw, "points", line),
        "reason_tags": tags,
        "explanation": explanation,
        "date": raw["date"],
    }


def parse_roft_csv(
    handle: Iterable[str], *, max_sentences: int | None = None
) -> list[dict[str, Any]]:
    """Read a RoFT CSV back into records with our 1-based-after-last-human indices."""
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(
            f"max_sentences must be at least 1 (10 for the public RoFT file), got {max_sentences}"
        )
    reader = csv.reader(handle)
    header: Sequence[str] | None = next(reader, None)
    if header is None:
        raise ValueError(f"the RoFT CSV is empty; it needs a header line: {','.join(ROFT_COLUMNS)}")
    # A byte-order mark from spreadsheet exports would otherwise hide the first column.
    header = [name.strip().lstrip("\ufeff") for name in header]
    missing = [column for column in _IMPORT_COLUMNS if column not in header]
    if missing:
        raise ValueError(
            f"the RoFT CSV lacks column(s) {', '.join(missing)}; "
            f"its header must include {', '.join(_IMPORT_COLUMNS)}"
        )
    records = []
    last_line = reader.line_num
    for values in reader:
        # line_num counts physical lines, so a quoted multi-line cell keeps later numbers right.
        line, last_line = last_line + 1, reader.line_num
        if not any(value.strip() for value in values):
            continue
        if len(values) != len(header):
            raise ValueError(
                f"line {line}: {len(values)} fields but the header has {len(header)}; "
                "quote cells that contain commas or line breaks"
            )
        records.append(_parse_record(dict(zip(header, values, strict=True)), line, max_sentences))
    return records
