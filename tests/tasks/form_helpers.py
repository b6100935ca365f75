"""Shared helpers for the form HIT tests: the HIT, the sample study, small fields and items."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tasks.form.hit import FormHit

SAMPLES = Path(__file__).resolve().parents[2] / "tasks" / "form" / "samples"
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HIT = FormHit()


def sample_config() -> dict[str, Any]:
    """The sample study's config as written (not validated)."""
    return dict(json.loads((SAMPLES / "study.json").read_text(encoding="utf-8")))


def records(name: str) -> list[dict[str, Any]]:
    text = (SAMPLES / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def rating(field_id: str = "quality", **extra: Any) -> dict[str, Any]:
    return {"id": field_id, "type": "rating", "title": "How good is it?", **extra}


def category(field_id: str = "topic", **extra: Any) -> dict[str, Any]:
    return {
        "id": field_id,
        "type": "category",
        "title": "Topic?",
        "choices": ["news", "sport", "other"],
        **extra,
    }


def text(field_id: str = "why", **extra: Any) -> dict[str, Any]:
    return {"id": field_id, "type": "text", "title": "Why?", **extra}


def item(item_id: str = "i1", **extra: Any) -> dict[str, Any]:
    return {
        "id": item_id,
        "attachments": [
            {"type": "text", "content": f"Text of {item_id}."},
            {"type": "text", "content": "The source."},
        ],
        **extra,
    }
