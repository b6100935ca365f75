"""What a study shows its workers about itself: a public title and description, consent,
instructions and examples, kept apart from the experimenter's internal study name.

A study's config may hold a `worker_page` object; `parse_worker_page` checks it when the
config is validated, and `public_page` completes a stored config with the defaults the pages
show. Pure: no Flask, no database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crowd.exceptions import InvalidConfig

KEY = "worker_page"
MAX_TITLE = 200
MAX_DESCRIPTION = 2000
MAX_LONG_TEXT = 10_000
MAX_EXAMPLES = 10
MAX_EXAMPLE_TEXT = 1000
MAX_EXAMPLE_ANSWER = 300
FIELDS = ("title", "description", "consent", "instructions", "examples")
EXAMPLE_FIELDS = ("text", "answer", "why")
EXAMPLE_LIMITS = {"text": MAX_EXAMPLE_TEXT, "answer": MAX_EXAMPLE_ANSWER, "why": MAX_EXAMPLE_TEXT}


def _text(value: Any, where: str, low: int, high: int) -> str:
    if not isinstance(value, str):
        raise InvalidConfig(f"must be text of {low} to {high} characters", where)
    text = value.strip()
    if not low <= len(text) <= high:
        raise InvalidConfig(f"must be text of {low} to {high} characters", where)
    return text


def _optional(value: Any, where: str) -> str | None:
    """Long text where null or empty means none (the default)."""
    if value is None:
        return None
    return _text(value, where, 0, MAX_LONG_TEXT) or None


def _example(raw: Any, where: str) -> dict[str, str]:
    if isinstance(raw, str):
        raw = {"text": raw}
    if not isinstance(raw, Mapping):
        raise InvalidConfig(
            'must be text, or an object {"text": ..., "answer": ..., "why": ...}', where
        )
    for name in raw:
        if name not in EXAMPLE_FIELDS:
            raise InvalidConfig(f"unknown field: an example takes {', '.join(EXAMPLE_FIELDS)}",
                                f"{where}.{name}")  # fmt: skip
    if "text" not in raw:
        raise InvalidConfig("an example needs its text", f"{where}.text")
    example = {"text": _text(raw["text"], f"{where}.text", 1, MAX_EXAMPLE_TEXT)}
    for name in ("answer", "why"):
        if raw.get(name) is not None:
            value = _text(raw[name], f"{where}.{name}", 0, EXAMPLE_LIMITS[name])
            if value:
                example[name] = value
    return example


def parse_worker_page(raw: Any) -> dict[str, Any] | None:
    """The checked `worker_page` config; None when the study sets none (all defaults).

    Fields: title (1-200 characters; default: the HIT type's title), description (0-2000),
    consent (text the worker agrees to before the first item; default: no consent step),
    instructions (default: the HIT type's own), examples (up to 10: text, or objects with
    `text` and an optional `answer` and `why`). Texts are plain; blank lines part paragraphs.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InvalidConfig(f"must be an object with some of {', '.join(FIELDS)}", KEY)
    for name in raw:
        if name not in FIELDS:
            raise InvalidConfig(f"unknown field: {KEY} takes {', '.join(FIELDS)}",
                                f"{KEY}.{name}")  # fmt: skip
    page: dict[str, Any] = {}
    if raw.get("title") is not None:
        page["title"] = _text(raw["title"], f"{KEY}.title", 1, MAX_TITLE)
    if raw.get("description") is not None:
        page["description"] = _text(raw["description"], f"{KEY}.description", 0, MAX_DESCRIPTION)
    page["consent"] = _optional(raw.get("consent"), f"{KEY}.consent")
    page["instructions"] = _optional(raw.get("instructions"), f"{KEY}.instructions")
    examples = raw.get("examples")
    if examples is None:
        examples = []
    if not isinstance(examples, list) or len(examples) > MAX_EXAMPLES:
        raise InvalidConfig(f"must be a list of up to {MAX_EXAMPLES} examples", f"{KEY}.examples")
    page["examples"] = [_example(item, f"{KEY}.examples[{n}]") for n, item in enumerate(examples)]
    return page


def public_page(config: Mapping[str, Any], title: str, instructions: str) -> dict[str, Any]:
    """What the worker's pages show of a study: its stored `worker_page` with the defaults.

    `title` and `instructions` are the HIT type's, used where the study sets none.
    """
    stored = config.get(KEY) or {}
    return {
        "title": stored.get("title") or title,
        "description": stored.get("description") or "",
        "consent": stored.get("consent") or None,
        "instructions": stored.get("instructions") or instructions,
        "examples": list(stored.get("examples") or []),
    }
