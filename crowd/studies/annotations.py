"""Annotations collected elsewhere become responses of a study, marked as imported.

An old MTurk batch, a spreadsheet of expert ratings or the public RoFT release: each record
names a worker, an item of the study (by its id), an answer in the HIT type's terms and,
optionally, when it was given, how long it took and by which rater group. Every record is
checked first and then all are stored, or none. Imported responses sit beside live ones, so
every analysis and QC measure runs on them: each is stored with the QC facts a live answer
gets (text shown, attention and gold results, speed where `seconds` is given), and the
RESPONSES_IMPORTED event refreshes its rater's QC standing (crowd.quality.stats). They do
not count towards the targets of live collection.

Layouts:
- JSON lines: {"worker", "item", "answer": {...}, "rater_group"?, "created_at"?,
  "seconds"?, "explanation"?, "reasons"?}.
- CSV: columns worker and item, optionally rater_group, created_at, seconds, explanation and
  reasons (";"-separated); every other column is part of the answer (e.g. guess; a column
  per Likert attribute; best). Long-format ratings (columns attribute and rating, one row
  per rating) are gathered into one answer per worker and item.
- RoFT (boundary studies): the public dataset's CSV; its passages become items as needed.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.exceptions import InvalidItem, StudyNotOpen, ValidationError
from crowd.quality.exclusion import study_qc
from crowd.quality.standing import response_facts
from crowd.storage import (
    Item,
    OutboxEvent,
    Response,
    ResponseSource,
    Study,
    StudyStatus,
    Worker,
)
from crowd.storage.outbox import RESPONSES_IMPORTED
from crowd.studies.lifecycle import import_items, parse_jsonl, strict_json
from crowd.work.assignments import get_or_create_worker
from qc.config import QcConfig
from tasks import get_hit_type
from tasks.base import LIVE_RATER_GROUP

IMPORT_PROVIDER = "import"
FORMATS = ("jsonl", "csv", "roft")
MAX_RECORDS = 200_000
MAX_GROUP = 100
MAX_TEXT = 10_000
GENERIC_COLUMNS = (
    "worker", "item", "rater_group", "created_at", "seconds", "explanation", "reasons",
)  # fmt: skip
MAX_SECONDS = 86_400.0  # a day: longer is a clock or unit mistake, not time on one item
JSONL_KEYS = frozenset({*GENERIC_COLUMNS, "answer"})
LONG_COLUMNS = ("attribute", "rating")


@dataclass(frozen=True)
class AnnotationRecord:
    """One answer given elsewhere, before it is checked against the study."""

    where: str
    worker: str
    item: str
    answer: dict[str, Any]
    rater_group: str | None = None
    created_at: datetime | None = None
    seconds: float | None = None
    explanation: str | None = None
    reasons: tuple[str, ...] = ()


@dataclass
class ImportSummary:
    added: int = 0
    skipped: int = 0
    items_added: int = 0
    workers: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "skipped_duplicates": self.skipped,
            "items_added": self.items_added,
            "workers": len(self.workers),
        }


def _text(value: Any, name: str, where: str, limit: int = 200) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidItem(f"'{name}' must be text", where)
    text = str(value).strip()
    if not text or len(text) > limit:
        raise InvalidItem(f"'{name}' must be 1 to {limit} characters", where)
    return text


def _optional_text(value: Any, name: str, where: str, limit: int) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _text(value, name, where, limit)


def parse_time(value: Any, where: str) -> datetime | None:
    """An ISO 8601 time or date; naive times are taken as UTC."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InvalidItem("'created_at' must be an ISO 8601 time, e.g. 2023-05-01T12:00:00Z", where)
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidItem(
            f"'created_at' {value!r} is not an ISO 8601 time (e.g. 2023-05-01T12:00:00Z)", where
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_seconds(value: Any, where: str) -> float | None:
    """Time spent on the item in seconds (a number, or numeric text in CSV); QC judges speed."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    wrong = f"'seconds' must be a number of seconds from 0 to {MAX_SECONDS:g}, got {value!r}"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidItem(wrong, where)
    try:
        seconds = float(value)
    except ValueError:
        raise InvalidItem(wrong, where) from None
    if not 0 <= seconds <= MAX_SECONDS:  # NaN fails both comparisons
        raise InvalidItem(wrong, where)
    return seconds


def _reasons(value: Any, where: str) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = value.split(";")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidItem("'reasons' must be a list of tags (or ';'-separated in CSV)", where)
    return tuple(tag.strip() for tag in value if tag.strip())


def _record(raw: Mapping[str, Any], answer: dict[str, Any], where: str) -> AnnotationRecord:
    return AnnotationRecord(
        where=where,
        worker=_text(raw.get("worker"), "worker", where),
        item=_text(raw.get("item"), "item", where),
        answer=answer,
        rater_group=_optional_text(raw.get("rater_group"), "rater_group", where, MAX_GROUP),
        created_at=parse_time(raw.get("created_at"), where),
        seconds=parse_seconds(raw.get("seconds"), where),
        explanation=_optional_text(raw.get("explanation"), "explanation", where, MAX_TEXT),
        reasons=_reasons(raw.get("reasons"), where),
    )


def records_from_jsonl(
    lines: Iterable[str], source: str = "line", loads: Callable[[str], Any] = strict_json
) -> list[AnnotationRecord]:
    records = []
    for number, raw in enumerate(parse_jsonl(lines, source, loads), start=1):
        where = f"{source} {number}"
        unknown = set(raw) - JSONL_KEYS
        if unknown:
            raise InvalidItem(
                f"unknown keys {sorted(unknown)} (allowed: {sorted(JSONL_KEYS)})", where
            )
        answer = raw.get("answer")
        if not isinstance(answer, dict):
            raise InvalidItem("'answer' must be a JSON object in the HIT type's terms", where)
        records.append(_record(raw, answer, where))
    return records


class _CountedLines:
    """The lines of a CSV as csv.reader reads them, counted: the line a csv.Error is on."""

    def __init__(self, handle: Iterable[str]) -> None:
        self.lines = iter(handle)
        self.read = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        line = next(self.lines)
        self.read += 1
        return line


def _csv_error(error: csv.Error, line: int, source: str) -> InvalidItem:
    """A CSV the csv module cannot read, as the client's mistake on its line (e.g. a cell over
    csv.field_size_limit, which keeps one quoted cell from swallowing the whole upload)."""
    text = str(error)
    if "field larger than field limit" in text:
        text = f"a cell is longer than {csv.field_size_limit()} characters (check the quoting)"
    return InvalidItem(f"not readable as CSV: {text}", f"{source} {line}")


def records_from_csv(handle: Iterable[str], source: str = "line") -> list[AnnotationRecord]:
    """Rows of one worker and item are gathered into one record (long-format ratings)."""
    lines = _CountedLines(handle)
    try:
        return _records_from_csv(csv.reader(lines), source)
    except csv.Error as error:
        raise _csv_error(error, lines.read, source) from None


def _records_from_csv(reader: Any, source: str) -> list[AnnotationRecord]:
    header = next(reader, None)
    if header is None:
        raise ValidationError("the CSV is empty: it needs a header with worker and item columns")
    header = [name.strip().lstrip("\ufeff") for name in header]
    missing = [name for name in ("worker", "item") if name not in header]
    if missing:
        raise ValidationError(f"the CSV lacks column(s) {', '.join(missing)}")
    if len(set(header)) != len(header):
        raise ValidationError("the CSV header names a column twice")
    long = all(name in header for name in LONG_COLUMNS)
    answer_columns = [name for name in header if name not in GENERIC_COLUMNS]
    gathered: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any], str]] = {}
    last = reader.line_num
    for values in reader:
        line, last = last + 1, reader.line_num
        where = f"{source} {line}"
        if not any(value.strip() for value in values):
            continue
        if len(values) != len(header):
            raise InvalidItem(f"{len(values)} fields but the header has {len(header)}", where)
        row = dict(zip(header, values, strict=True))
        key = (row["worker"].strip(), row["item"].strip())
        if long:
            attribute = _text(row["attribute"], "attribute", where)
            value = row["rating"].strip() or None
            if key in gathered:
                answer = gathered[key][1]
                if attribute in answer:
                    raise InvalidItem(f"a second {attribute!r} rating of the same item", where)
                answer[attribute] = value
                continue
            answer = {attribute: value}
        else:
            if key in gathered:
                raise InvalidItem(
                    f"worker {key[0]!r} answered item {key[1]!r} already on "
                    f"{gathered[key][2]}; each worker answers an item once",
                    where,
                )
            answer = {name: (row[name].strip() or None) for name in answer_columns}
        gathered[key] = (row, answer, where)
    return [_record(row, answer, where) for row, answer, where in gathered.values()]


def _workers(session: Session, keys: Iterable[str]) -> dict[str, Worker]:
    return {key: get_or_create_worker(session, IMPORT_PROVIDER, key) for key in sorted(set(keys))}


def import_annotations(
    session: Session,
    study: Study,
    records: Sequence[AnnotationRecord],
    *,
    rater_group: str = LIVE_RATER_GROUP,
    skip_duplicates: bool = False,
) -> ImportSummary:
    """Check every record against the study, then store them all as imported responses.

    `rater_group` applies to records that do not name one. A record whose worker already
    answered the item (in this import or before) is an error, or skipped and counted with
    `skip_duplicates` (e.g. re-importing a batch that grew).
    """
    if study.status == StudyStatus.COMPLETED:
        raise StudyNotOpen(f"study {study.id} is completed: import into a new study")
    if len(records) > MAX_RECORDS:
        raise ValidationError(f"at most {MAX_RECORDS} annotations per import: split the file")
    group = _text(rater_group, "rater_group", "the import", MAX_GROUP)
    hit = get_hit_type(study.hit_type)
    ids = {record.item for record in records}
    items = {
        item.external_id: item
        for item in session.scalars(
            select(Item).where(Item.study_id == study.id, Item.external_id.in_(ids))
        )
    }
    checked: list[tuple[AnnotationRecord, Item, dict[str, Any]]] = []
    seen: dict[tuple[str, str], str] = {}
    summary = ImportSummary()
    for record in records:
        item = items.get(record.item)
        if item is None:
            raise InvalidItem(
                f"study {study.id} has no item {record.item!r}: import the items first",
                record.where,
            )
        key = (record.worker, record.item)
        if key in seen:
            if skip_duplicates:
                summary.skipped += 1
                continue
            raise InvalidItem(
                f"worker {record.worker!r} answered item {record.item!r} already on {seen[key]}",
                record.where,
            )
        seen[key] = record.where
        try:
            answer = hit.import_answer(item.content, record.answer, study.config)
        except InvalidItem as error:
            where = f"{record.where}, {error.where}" if error.where else record.where
            raise InvalidItem(error.message, where) from None
        checked.append((record, item, answer))
    workers = _workers(session, (record.worker for record, _, _ in checked))
    config = study_qc(study)
    answered = {
        (worker_id, item_id)
        for worker_id, item_id in session.execute(
            select(Response.worker_id, Response.item_id).where(
                Response.study_id == study.id,
                Response.worker_id.in_([w.id for w in workers.values()]),
            )
        )
    }
    for record, item, answer in checked:
        worker = workers[record.worker]
        if (worker.id, item.id) in answered:
            if skip_duplicates:
                summary.skipped += 1
                continue
            raise InvalidItem(
                f"worker {record.worker!r} already has an answer to item {record.item!r} in "
                f"study {study.id}; pass skip_duplicates to import only the new ones",
                record.where,
            )
        session.add(_response(hit, study, item, worker, record, answer, group, config))
        summary.added += 1
        summary.workers.add(record.worker)
    session.flush()
    if summary.added:
        session.add(
            OutboxEvent(
                topic=RESPONSES_IMPORTED,
                payload={
                    "study_id": study.id,
                    "worker_ids": sorted(workers[key].id for key in summary.workers),
                },
            )
        )
    return summary


def _response(
    hit: Any,
    study: Study,
    item: Item,
    worker: Worker,
    record: AnnotationRecord,
    answer: dict[str, Any],
    group: str,
    config: QcConfig,
) -> Response:
    created = record.created_at or datetime.now(UTC)
    # The facts a live answer gets, so the rater's QC evidence is built the same way.
    flags = response_facts(hit, item, answer, record.seconds, config)
    return Response(
        study_id=study.id,
        item_id=item.id,
        worker_id=worker.id,
        answer=answer,
        events=[{"type": "imported", "at": created.isoformat()}],
        explanation=record.explanation,
        reasons=list(record.reasons),
        explained_at=created if (record.explanation or record.reasons) else None,
        score=hit.score(item.expected, answer),
        qc_flags=flags,
        source=ResponseSource.IMPORTED,
        rater_group=record.rater_group or group,
        created_at=created,
    )


def roft_item_id(sentences: Sequence[str], boundary: int) -> str:
    """A stable id for a RoFT passage, so re-imports and other files find the same item."""
    digest = hashlib.sha256(("\n".join(sentences) + f"\n{boundary}").encode()).hexdigest()
    return f"roft-{digest[:16]}"


def import_roft(
    session: Session,
    study: Study,
    handle: Iterable[str],
    *,
    max_sentences: int | None = None,
    rater_group: str = LIVE_RATER_GROUP,
    skip_duplicates: bool = False,
) -> ImportSummary:
    """The public RoFT CSV: its passages become items (when new), its guesses responses."""
    from tasks.boundary.roft import parse_roft_csv

    if study.hit_type != "boundary":
        raise ValidationError(f"RoFT files go into boundary studies; study {study.id} is not one")
    lines = _CountedLines(handle)
    try:
        parsed = parse_roft_csv(lines, max_sentences=max_sentences)
    except csv.Error as error:
        raise _csv_error(error, lines.read, "line") from None
    except ValueError as error:
        raise ValidationError(str(error)) from None
    new_items: dict[str, dict[str, Any]] = {}
    records = []
    for number, row in enumerate(parsed, start=1):
        item_id = roft_item_id(row["sentences"], row["boundary"])
        if item_id not in new_items:
            item: dict[str, Any] = {
                "id": item_id,
                "sentences": row["sentences"],
                "boundary": row["boundary"],
                "category": row["dataset"] or None,
                "generator": row["model"] or None,
            }
            if row["dec_strat_value"] is not None:
                item["decoding"] = {"strategy": "top-p", "value": row["dec_strat_value"]}
            new_items[item_id] = item
        records.append(
            AnnotationRecord(
                where=f"record {number}",
                worker=_text(row["annotator"], "annotator", f"record {number}"),
                item=item_id,
                answer={"guess": row["guess"]},
                created_at=parse_time(row["date"], f"record {number}"),
                explanation=row["explanation"] or None,
                reasons=tuple(row["reason_tags"]),
            )
        )
    existing = set(
        session.scalars(
            select(Item.external_id).where(
                Item.study_id == study.id, Item.external_id.in_(new_items)
            )
        )
    )
    added_items = import_items(
        session, study, [item for key, item in new_items.items() if key not in existing]
    )
    summary = import_annotations(
        session, study, records, rater_group=rater_group, skip_duplicates=skip_duplicates
    )
    summary.items_added = added_items
    return summary


def import_file(
    session: Session,
    study: Study,
    text: str,
    fmt: str,
    *,
    rater_group: str = LIVE_RATER_GROUP,
    skip_duplicates: bool = False,
    max_sentences: int | None = None,
    source: str = "line",
    loads: Callable[[str], Any] = strict_json,
) -> ImportSummary:
    """Import a file's text in `fmt` (jsonl, csv or roft) into the study.

    Lines end at "\n" (or "\r\n") only: str.splitlines would also break at form feeds and
    Unicode separators, which generated text contains inside JSON strings and CSV cells.
    `loads` parses each JSON line (see crowd.studies.parse_jsonl).
    """
    if fmt == "roft":
        return import_roft(
            session,
            study,
            io.StringIO(text, newline=""),
            max_sentences=max_sentences,
            rater_group=rater_group,
            skip_duplicates=skip_duplicates,
        )
    if fmt == "jsonl":
        records = records_from_jsonl(text.split("\n"), source, loads)
    elif fmt == "csv":
        records = records_from_csv(io.StringIO(text, newline=""), source)
    else:
        raise ValidationError(f"format must be one of {', '.join(FORMATS)}", "format")
    return import_annotations(
        session, study, records, rater_group=rater_group, skip_duplicates=skip_duplicates
    )
