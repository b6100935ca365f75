"""Shared helpers for the comparison HIT tests: the HIT, its default config, test items."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tasks.comparison.hit import ComparisonHit

HIT = ComparisonHit()
SAMPLES = Path(__file__).resolve().parents[2] / "tasks" / "comparison" / "samples"
NOW = datetime(2024, 5, 1, tzinfo=UTC)
CONFIG = HIT.validate_config(None).to_config()


def item(
    item_id: str, k: int = 4, kind: str = "real", best: int | None = None, **extra: Any
) -> dict[str, Any]:
    """An item whose candidate i says `{item_id}-cand{i}`; policies A (first half), B."""
    record: dict[str, Any] = {
        "id": item_id,
        "kind": kind,
        "query": f"Query of {item_id}:",
        "candidates": [
            {"text": f"{item_id}-cand{i} text", "policy": "policyA" if i < k // 2 else "policyB"}
            for i in range(k)
        ],
        **extra,
    }
    if best is not None:
        record["best"] = best
    return record


def json_keys(value: Any) -> set[str]:
    """Every key at any depth of a JSON value."""
    if isinstance(value, dict):
        return set(value) | {key for child in value.values() for key in json_keys(child)}
    if isinstance(value, list):
        return {key for child in value for key in json_keys(child)}
    return set()
