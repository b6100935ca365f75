"""Shared helpers for the Likert HIT tests: the HIT, its configs, sample records."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tasks.likert.hit import LikertHit

SAMPLES = Path(__file__).resolve().parents[2] / "tasks" / "likert" / "samples"
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HIT = LikertHit()
STORY = HIT.validate_config(None).to_config()
ATTACK = HIT.validate_config({"template": "attack"}).to_config()


def story(item_id: str, group: str = "human", **extra: Any) -> dict[str, Any]:
    return {
        "id": item_id,
        "text": f"Story {item_id} begins on a quiet morning.",
        "prompt": f"Write about {item_id}.",
        "group": group,
        **extra,
    }


def records(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SAMPLES / name).read_text().splitlines()]
