"""Comparison exports: the query/sample0..sampleK-1/best layout, TRL pairwise, and K-way.

- "jsonl" / "csv": one row per label in the layout of Ziegler et al.'s released data
  (query, sample0 .. sampleK-1, best), plus who gave it and where the candidates came from.
- "pairwise": for each label, K-1 rows {"prompt", "chosen", "rejected"}: the chosen text
  against every other candidate, the format TRL's RewardTrainer reads.
- "kway": {"prompt", "completions", "label", "policies"}: all K candidates in canonical order
  and the chosen index, for a reward model trained with a softmax over the K rewards.

Attention-check labels are left out of "pairwise" and "kway": the check tells the worker what
to pick, so its label says nothing about preferences and would only teach a reward model the
check. They stay in "jsonl" and "csv", which carry the item kind.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from crowd.exceptions import InvalidConfig

FORMATS: tuple[str, ...] = ("jsonl", "csv", "pairwise", "kway")
# Labels a reward model learns from: not attention checks, and not the workers' practice
# answers on training examples (given before the label was revealed; the analysis skips
# them too).
REWARD_KINDS = frozenset({"real", "gold"})
ID_COLUMNS = ("response_id", "item", "worker", "rater_group", "kind")
CSV_HEAD = (
    "response_id", "worker", "rater_group", "item", "kind", "category", "source",
    "created_at", "k", "query",
)  # fmt: skip
CSV_TAIL = ("best", "shown", "policies", "score")


def sample_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """One label in the query/sample0..sampleK-1/best layout."""
    texts = list(row["candidates"])
    record: dict[str, Any] = {"query": row["query"]}
    record.update({f"sample{index}": text for index, text in enumerate(texts)})
    record.update(
        {
            "best": int(row["best"]),
            "k": len(texts),
            "shown": row.get("shown"),
            "policies": list(row.get("policies") or []),
            "worker": row["worker"],
            "rater_group": row.get("rater_group"),
            "item": row["item"],
            "kind": row["kind"],
            "category": row.get("category"),
            "response_id": row.get("response_id"),
            "score": row.get("score"),
            "source": row.get("source"),
            "created_at": row.get("created_at"),
        }
    )
    return record


def pairwise_rows(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """K-1 rows: the chosen candidate against each other one."""
    texts = list(row["candidates"])
    best = int(row["best"])
    ids = {key: row.get(key) for key in ID_COLUMNS}
    return [
        {"prompt": row["query"], "chosen": texts[best], "rejected": text, **ids}
        for index, text in enumerate(texts)
        if index != best
    ]


def kway_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """All K candidates in canonical order with the chosen index."""
    texts = list(row["candidates"])
    return {
        "prompt": row["query"],
        "completions": texts,
        "label": int(row["best"]),
        "policies": list(row.get("policies") or [None] * len(texts)),
        **{key: row.get(key) for key in ID_COLUMNS},
    }


def _write_csv(rows: Sequence[Mapping[str, Any]], handle: TextIO) -> int:
    max_k = max((len(row["candidates"]) for row in rows), default=2)
    columns = [*CSV_HEAD, *(f"sample{index}" for index in range(max_k)), *CSV_TAIL]
    writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        record = sample_row(row)
        # Policies are names; ";" keeps them in one cell (an item with no provenance: empty).
        record["policies"] = ";".join("" if p is None else str(p) for p in record["policies"])
        writer.writerow(record)
    return len(rows)


def write(rows: Sequence[Mapping[str, Any]], fmt: str, handle: TextIO) -> int:
    """Write analysis rows in `fmt`; returns the number of rows written."""
    if fmt == "jsonl":
        for row in rows:
            handle.write(json.dumps(sample_row(row), sort_keys=True) + "\n")
        return len(rows)
    if fmt == "csv":
        return _write_csv(rows, handle)
    if fmt == "pairwise":
        written = 0
        for row in rows:
            if row["kind"] not in REWARD_KINDS:
                continue
            for pair in pairwise_rows(row):
                handle.write(json.dumps(pair, sort_keys=True) + "\n")
                written += 1
        return written
    if fmt == "kway":
        kept = [row for row in rows if row["kind"] in REWARD_KINDS]
        for row in kept:
            handle.write(json.dumps(kway_row(row), sort_keys=True) + "\n")
        return len(kept)
    raise InvalidConfig(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
