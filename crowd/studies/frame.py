"""A study's responses as columns, for reports over many answers.

`platform_rows` makes a dict per response with the item's data joined: right for exports and
small studies, but a million of them take gigabytes. A report needs a few numbers per
response, so this reads only those, in one streamed query with the answer fields extracted
by the database (JSON paths on SQLite and PostgreSQL alike) and each answer's position in
its worker's sequence numbered by a window function, into numpy arrays: about 45 bytes an
answer. Strings that repeat (workers, items, rater groups, reason lists) are codes into
lists; an explanation is kept as the 64-bit hash of its normalised text, which is all the
report asks of it (how many there are, and how many differ).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Select, Text, cast, func, select
from sqlalchemy.orm import Session

from crowd.storage import Item, Response, Study, Worker

# Rows fetched per round trip: big enough that the driver's per-call cost vanishes, small
# enough that a batch of Python objects stays a few megabytes.
BATCH = 20_000


@dataclass
class StudyFrame:
    """Columns of a study's responses (one entry per response, in no set order) and of its
    items.

    Response columns: `response_id`, `worker` (codes into `workers`, keys "provider:id"),
    `worker_db_id`, `item` (codes into the item columns), `answer` (field -> values, as the
    HIT type's `frame_answer_fields` name them; -1 where a field is missing), `explanation`
    (uint64 hash of the lowercased, whitespace-collapsed text; 0: none), `reasons` (codes
    into `reason_lists`), `attention_passed` (1, 0, or -1 where not recorded), `rater_group`
    (codes into `rater_groups`), `position` (0 for the worker's first answer in the study,
    in time order), `source` (codes into `sources`: live, imported). Item columns:
    `item_ids` (external ids), `item_kind`, `item_category`, `item_expected` and `item_meta`
    (the stored dicts), `item_target` (answers wanted, None: the study's).
    """

    response_id: np.ndarray
    worker: np.ndarray
    workers: list[str]
    worker_db_id: np.ndarray
    item: np.ndarray
    answer: dict[str, np.ndarray]
    explanation: np.ndarray
    reasons: np.ndarray
    reason_lists: list[tuple[str, ...]]
    attention_passed: np.ndarray
    rater_group: np.ndarray
    rater_groups: list[str]
    position: np.ndarray
    source: np.ndarray
    sources: list[str]
    item_ids: list[str] = field(default_factory=list)
    item_kind: list[str] = field(default_factory=list)
    item_category: list[str | None] = field(default_factory=list)
    item_expected: list[dict[str, Any]] = field(default_factory=list)
    item_meta: list[dict[str, Any]] = field(default_factory=list)
    item_target: list[int | None] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.response_id.size)

    def worker_mask(self, keys: set[str]) -> np.ndarray:
        """Whether each response is by one of the workers `keys` ("provider:id")."""
        codes = [i for i, key in enumerate(self.workers) if key in keys]
        return np.isin(self.worker, np.asarray(codes, dtype=self.worker.dtype))


def explanation_hash(texts: list[str | None]) -> np.ndarray:
    """64-bit hashes of explanations, lowercased with their whitespace collapsed (0: none)."""
    normal = [" ".join(text.split()).lower() if text else "" for text in texts]
    hashes = pd.util.hash_array(np.asarray(normal, dtype=object), categorize=False)
    return np.where(np.asarray([bool(text) for text in normal]), hashes | 1, 0).astype(np.uint64)


def read_frame(session: Session, study: Study, answer_fields: dict[str, type]) -> StudyFrame:
    """The study's responses as columns (see StudyFrame), read in one streamed query."""
    worker_keys: list[str] = []
    worker_ids: list[int] = []
    # Core, not the ORM: plain rows (the ORM's loading costs microseconds a row).
    connection = session.connection()
    for worker_id, provider, external_id in connection.execute(
        select(Worker.id, Worker.provider, Worker.external_id)
        .where(Worker.id.in_(select(Response.worker_id).where(Response.study_id == study.id)))
        .order_by(Worker.id)
    ).all():
        worker_keys.append(f"{provider}:{external_id}")
        worker_ids.append(worker_id)
    item_db_ids: list[int] = []
    item_ids: list[str] = []
    kinds: list[str] = []
    categories: list[str | None] = []
    expected: list[dict[str, Any]] = []
    metas: list[dict[str, Any]] = []
    targets: list[int | None] = []
    # The JSON as text, parsed once per distinct text: items of a study share a few shapes
    # of expected answer and metadata (the same dict object serves them all; read-only).
    parsed: dict[str, dict[str, Any]] = {}
    for item_id, external_id, kind, category, item_expected, meta, target in connection.execute(
        select(Item.id, Item.external_id, Item.kind, Item.category, cast(Item.expected, Text),
               cast(Item.meta, Text), Item.target)
        .where(Item.study_id == study.id)
        .order_by(Item.id)
    ).all():  # fmt: skip
        item_db_ids.append(item_id)
        item_ids.append(external_id)
        kinds.append(str(kind))
        categories.append(category)
        expected.append(_parsed(parsed, item_expected))
        metas.append(_parsed(parsed, meta))
        targets.append(target)

    position = (
        func.row_number().over(
            partition_by=Response.worker_id, order_by=(Response.created_at, Response.id)
        )
        - 1
    )
    fields = list(answer_fields)
    query = select(
        Response.id,
        Response.worker_id,
        Response.item_id,
        Response.explanation,
        cast(Response.reasons, Text),
        Response.qc_flags["attention_passed"].as_boolean(),
        Response.rater_group,
        Response.source,
        position,
        *(Response.answer[name].as_integer() for name in fields),
    ).where(
        Response.study_id == study.id
    )  # in the order the window leaves them: the analysis does not depend on it
    if any(kind is not int for kind in answer_fields.values()):
        raise ValueError("frame answer fields are integers (e.g. a boundary guess)")
    parts: dict[str, list[np.ndarray]] = {name: [] for name in (
        "response_id", "worker", "item", "explanation", "reasons", "attention_passed",
        "rater_group", "source", "position", *(f"answer:{name}" for name in fields),
    )}  # fmt: skip
    reason_codes: dict[str, int] = {}
    reason_lists: list[tuple[str, ...]] = []
    group_codes: dict[str, int] = {}
    source_codes: dict[str, int] = {}
    for batch in _batches(connection, query, study.id, fields):
        columns = list(zip(*batch, strict=True))
        response_ids, worker_col, item_col, texts, reasons, passed, groups, sources = columns[:8]
        positions = columns[8]
        parts["response_id"].append(np.fromiter(response_ids, np.int64, len(batch)))
        parts["worker"].append(np.fromiter(worker_col, np.int64, len(batch)))
        parts["item"].append(np.fromiter(item_col, np.int64, len(batch)))
        parts["explanation"].append(explanation_hash(list(texts)))
        parts["reasons"].append(np.fromiter(
            (_code(reason_codes, reason_lists, raw) for raw in reasons), np.int32, len(batch)
        ))  # fmt: skip
        parts["attention_passed"].append(np.fromiter(
            (-1 if p is None else int(bool(p)) for p in passed), np.int8, len(batch)
        ))  # fmt: skip
        parts["rater_group"].append(np.fromiter(
            (group_codes.setdefault(g, len(group_codes)) for g in groups), np.int16, len(batch)
        ))  # fmt: skip
        parts["source"].append(np.fromiter(
            (source_codes.setdefault(str(x), len(source_codes)) for x in sources), np.int8,
            len(batch),
        ))  # fmt: skip
        parts["position"].append(np.fromiter(positions, np.int32, len(batch)))
        for name, values in zip(fields, columns[9:], strict=True):
            parts[f"answer:{name}"].append(np.fromiter(
                (-1 if v is None else v for v in values), np.int64, len(batch)
            ))  # fmt: skip
    joined = {
        name: np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
        for name, chunks in parts.items()
    }
    # Database ids to codes: both id lists are sorted, so a binary search maps them.
    worker_codes = np.searchsorted(np.asarray(worker_ids, dtype=np.int64), joined["worker"])
    item_codes = np.searchsorted(np.asarray(item_db_ids, dtype=np.int64), joined["item"])
    return StudyFrame(
        response_id=joined["response_id"],
        worker=worker_codes.astype(np.int32),
        workers=worker_keys,
        worker_db_id=np.asarray(worker_ids, dtype=np.int64),
        item=item_codes.astype(np.int32),
        answer={name: joined[f"answer:{name}"] for name in fields},
        explanation=joined["explanation"].astype(np.uint64),
        reasons=joined["reasons"],
        reason_lists=reason_lists,
        attention_passed=joined["attention_passed"],
        rater_group=joined["rater_group"],
        rater_groups=list(group_codes),
        position=joined["position"],
        source=joined["source"],
        sources=list(source_codes),
        item_ids=item_ids,
        item_kind=kinds,
        item_category=categories,
        item_expected=expected,
        item_meta=metas,
        item_target=targets,
    )


def _parsed(cache: dict[str, dict[str, Any]], text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    value = cache.get(text)
    if value is None:
        loaded = json.loads(text)
        value = cache[text] = loaded if isinstance(loaded, dict) else {}
    return value


# The frame's query by hand for the two databases crowd runs on, run on the DB-API cursor:
# its plain tuples cost a third of SQLAlchemy's rows at a million answers. Its columns are
# those of the SQLAlchemy query in read_frame (used for any other database).
_FRAME_SQL = {
    "sqlite": (
        "SELECT id, worker_id, item_id, explanation, reasons, "
        "json_extract(qc_flags, '$.attention_passed'), rater_group, source, "
        "row_number() OVER (PARTITION BY worker_id ORDER BY created_at, id) - 1{answers} "
        "FROM responses WHERE study_id = ?",
        "json_extract(answer, '$.{name}')",
    ),
    "postgresql": (
        "SELECT id, worker_id, item_id, explanation, reasons::text, "
        "(qc_flags->>'attention_passed')::boolean, rater_group, source, "
        "row_number() OVER (PARTITION BY worker_id ORDER BY created_at, id) - 1{answers} "
        "FROM responses WHERE study_id = %s",
        "(answer->>'{name}')::bigint",
    ),
}
_FIELD = re.compile(r"^[a-z_][a-z0-9_]*$")


def _batches(
    connection: Connection, query: Select[Any], study_id: int, fields: list[str]
) -> Iterator[Sequence[Sequence[Any]]]:
    """The frame query's rows, BATCH at a time, streamed (a server-side cursor on
    PostgreSQL)."""
    dialect = connection.dialect.name
    if dialect not in _FRAME_SQL or not all(_FIELD.match(name) for name in fields):
        # Options for this statement only: Connection.execution_options would change the
        # session's connection for every later query of the report.
        result = connection.execute(
            query, execution_options={"stream_results": True, "yield_per": BATCH}
        )
        yield from result.partitions(BATCH)
        return
    template, answer = _FRAME_SQL[dialect]
    sql = template.format(answers="".join(f", {answer.format(name=n)}" for n in fields))
    driver = connection.connection.driver_connection
    if driver is None:
        raise RuntimeError("the session's connection has no DB-API connection")
    cursor = driver.cursor(name="crowd_frame") if dialect == "postgresql" else driver.cursor()
    try:
        cursor.execute(sql, (study_id,))
        while batch := cursor.fetchmany(BATCH):
            yield batch
    finally:
        cursor.close()


def _code(codes: dict[str, int], lists: list[tuple[str, ...]], raw: str | None) -> int:
    """The code of a stored JSON list of reasons (parsed once per distinct text)."""
    key = raw or "[]"
    code = codes.get(key)
    if code is None:
        parsed = json.loads(key)
        code = codes[key] = len(lists)
        lists.append(tuple(str(tag) for tag in parsed) if isinstance(parsed, list) else ())
    return code
