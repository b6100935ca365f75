"""Form items: attachments (text, image URL, sanitised HTML), the item's own fields, and the
expected answers of gold, training and attention items checked against the fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import nh3

from crowd.exceptions import InvalidItem, ValidationError
from tasks.base import ITEM_KINDS
from tasks.form.config import is_int, validate_fields, value_text

ITEM_KEYS = ("id", "kind", "attachments", "text", "fields", "expected", "tolerance", "meta")
ATTACHMENT_TYPES = ("text", "image", "html")
MAX_ATTACHMENTS = 10
MAX_ATTACHMENT_CHARS = 20000
MAX_URL_CHARS = 2000
MAX_ALT_CHARS = 500
MAX_ITEM_ID_CHARS = 200
# What an HTML attachment may keep (the design's list); everything else is stripped, the
# contents of script and style with their tags.
HTML_TAGS = frozenset(
    {
        "p",
        "br",
        "b",
        "i",
        "em",
        "strong",
        "u",
        "ul",
        "ol",
        "li",
        "blockquote",
        "code",
        "pre",
        "h3",
        "h4",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "a",
        "span",
        "sup",
        "sub",
    }
)
HTML_ATTRIBUTES = {"a": {"href"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
KINDS_WITH_EXPECTED = ("gold", "training", "attention")


def sanitise_html(html: str) -> str:
    """HTML with only the allowed tags; links keep an absolute http(s)/mailto href and get
    target="_blank" with rel="noopener noreferrer"; scripts, styles, event handlers and
    javascript: URLs go."""
    return nh3.clean(
        html,
        tags=set(HTML_TAGS),
        attributes={tag: set(names) for tag, names in HTML_ATTRIBUTES.items()},
        link_rel="noopener noreferrer",
        # A link opens beside the task, so following it never leaves the worker's page.
        set_tag_attribute_values={"a": {"target": "_blank"}},
        url_schemes=set(URL_SCHEMES),
        # A relative link would point into this site (its API), never at the item's source.
        url_relative="deny",
    )


def _check(condition: bool, message: str, where: str) -> None:
    if not condition:
        raise InvalidItem(message, where)


def validate_attachment(raw: Any, where: str, number: int) -> dict[str, Any]:
    """One attachment; HTML comes back sanitised, so what is stored is safe to show."""
    _check(
        isinstance(raw, Mapping) and isinstance(raw.get("type"), str),
        'must be {"type": "text" | "image" | "html", "content": ...}',
        where,
    )
    kind = raw["type"]
    _check(
        kind in ATTACHMENT_TYPES, f"must be one of {', '.join(ATTACHMENT_TYPES)}", f"{where}.type"
    )
    allowed = ("type", "content", "alt") if kind == "image" else ("type", "content")
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise InvalidItem(
            f"unknown key for a {kind} attachment (allowed: {', '.join(allowed)})",
            f"{where}.{unknown[0]}",
        )
    content = raw.get("content")
    at = f"{where}.content"
    if kind == "image":
        _check(
            isinstance(content, str)
            and content.strip().lower().startswith(("http://", "https://"))
            and len(content.strip()) <= MAX_URL_CHARS
            and not any(ch.isspace() for ch in content.strip()),
            f"an image is an http(s) URL of at most {MAX_URL_CHARS} characters",
            at,
        )
        alt = raw.get("alt", f"Image {number}")
        _check(
            isinstance(alt, str) and 0 < len(alt.strip()) <= MAX_ALT_CHARS,
            f"must be a description of 1 to {MAX_ALT_CHARS} characters",
            f"{where}.alt",
        )
        return {"type": kind, "content": cast(str, content).strip(), "alt": cast(str, alt).strip()}
    _check(
        isinstance(content, str)
        and len(content.strip()) > 0
        and len(content) <= MAX_ATTACHMENT_CHARS,
        f"must be non-empty text of at most {MAX_ATTACHMENT_CHARS} characters",
        at,
    )
    text = cast(str, content)
    if kind == "html":
        text = sanitise_html(text).strip()
        _check(
            bool(text),
            "holds nothing that may be shown once sanitised (scripts, styles "
            "and tags other than text formatting are removed)",
            at,
        )
    return {"type": kind, "content": text}


def validate_attachments(raw: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    """`attachments`, or the `text` shorthand for one text attachment."""
    if raw.get("text") is not None:
        _check(
            raw.get("attachments") is None,
            "give 'attachments' or the 'text' shorthand, not both",
            f"{where}.text",
        )
        return [validate_attachment({"type": "text", "content": raw["text"]}, f"{where}.text", 1)]
    attachments = raw.get("attachments")
    _check(
        isinstance(attachments, list) and 1 <= len(attachments) <= MAX_ATTACHMENTS,
        f"needs 'attachments': a list of 1 to {MAX_ATTACHMENTS} "
        '{"type": "text" | "image" | "html", "content": ...} (or "text": "..." for one text)',
        f"{where}.attachments",
    )
    return [
        validate_attachment(entry, f"{where}.attachments[{index}]", index + 1)
        for index, entry in enumerate(cast(list[Any], attachments))
    ]


def rank_size(field: Mapping[str, Any], attachments: int) -> int:
    """How many things a rank field orders: its choices, or else the item's attachments."""
    choices = field.get("choices")
    return len(choices) if choices else attachments


def expected_value(field: Mapping[str, Any], value: Any, attachments: int, where: str) -> Any:
    """An expected value in the answer's shape, checked against its field (normalised)."""
    kind, name = field["type"], field["id"]
    if kind == "text":
        raise InvalidItem(f"{name!r} is a text field: free text has no expected value", where)
    if kind == "rating":
        low, high = field["scale"]
        _check(
            is_int(value) and low <= value <= high,
            f"must be a whole number from {low} to {high} (the scale of {name!r})",
            where,
        )
        return value
    if kind == "category":
        known = [choice["value"] for choice in field["choices"]]
        values = value if isinstance(value, list) else [value]
        _check(
            all(isinstance(v, str | int | float | bool) and value_text(v) in known for v in values),
            f"must be one of the choice values of {name!r} ({', '.join(known)}), or a list of them",
            where,
        )
        texts = {value_text(v) for v in values}
        low, high = field["min_choices"], field["max_choices"]
        _check(
            len(texts) == len(values) and low <= len(texts) <= high,
            f"must be {low} to {high} different choices",
            where,
        )
        return [v for v in known if v in texts]
    size = rank_size(field, attachments)
    _check(
        isinstance(value, list)
        and all(is_int(v) for v in value)
        and sorted(value) == list(range(size)),
        f"must list the indexes 0 to {size - 1} once each, best first",
        where,
    )
    return list(value)


def check_expected(
    expected: Mapping[str, Any],
    tolerance: Mapping[str, Any],
    fields: list[dict[str, Any]],
    attachments: int,
    where: str,
) -> dict[str, Any]:
    """Expected answers and tolerances against the fields they name; the normalised parts."""
    by_id = {field["id"]: field for field in fields}
    wanted = {}
    for name, value in expected.items():
        _check(
            name in by_id,
            f"names {name!r}, which is not a field of this item ({', '.join(by_id)})",
            f"{where}.expected.{name}",
        )
        wanted[name] = expected_value(by_id[name], value, attachments, f"{where}.expected.{name}")
    slack = {}
    for name, value in tolerance.items():
        at = f"{where}.tolerance.{name}"
        _check(name in wanted, "a tolerance needs an expected value of the same field", at)
        _check(
            by_id[name]["type"] in ("rating", "rank"),
            "tolerances are for rating (points) and rank (swapped pairs) fields",
            at,
        )
        _check(
            isinstance(value, int | float) and not isinstance(value, bool) and value >= 0,
            "must be a number from 0",
            at,
        )
        slack[name] = value
    return {"expected": wanted, "tolerance": slack}


def validate_item_record(raw: Any, where: str) -> dict[str, Any]:
    """Check one uploaded item; its parts: id, kind, content, expected, meta.

    The expected answers are checked against the item's own fields here, and against the
    study's fields (for items without their own) when the study plans its items.
    """
    _check(isinstance(raw, Mapping), "must be a JSON object", where)
    unknown = sorted(set(raw) - set(ITEM_KEYS))
    if unknown:
        raise InvalidItem(f"unknown key (allowed: {', '.join(ITEM_KEYS)})", f"{where}.{unknown[0]}")
    external_id = raw.get("id")
    _check(
        isinstance(external_id, str | int)
        and not isinstance(external_id, bool)
        and 0 < len(str(external_id).strip()) <= MAX_ITEM_ID_CHARS,
        f"needs an 'id' (text of at most {MAX_ITEM_ID_CHARS} characters)",
        f"{where}.id",
    )
    kind = raw.get("kind", "real")
    _check(kind in ITEM_KINDS, f"must be one of {', '.join(ITEM_KINDS)}", f"{where}.kind")
    attachments = validate_attachments(raw, where)
    content: dict[str, Any] = {"attachments": attachments}
    if raw.get("fields") is not None:
        error: type[ValidationError] = InvalidItem
        content["fields"] = validate_fields(raw["fields"], f"{where}.fields", error)
    expected, tolerance = raw.get("expected"), raw.get("tolerance")
    if kind in KINDS_WITH_EXPECTED:
        _check(
            isinstance(expected, Mapping) and len(expected) > 0,
            f"a {kind} item needs 'expected': {{field id: value}}",
            f"{where}.expected",
        )
    else:
        _check(
            expected is None,
            "only gold, training and attention items have expected answers",
            f"{where}.expected",
        )
    _check(
        tolerance is None or (isinstance(tolerance, Mapping) and expected is not None),
        "must be {field id: number}, beside 'expected'",
        f"{where}.tolerance",
    )
    parts: dict[str, Any] = {}
    if expected is not None:
        parts = {"expected": dict(expected), "tolerance": dict(tolerance or {})}
        if "fields" in content:
            parts = check_expected(
                parts["expected"], parts["tolerance"], content["fields"], len(attachments), where
            )
    meta = raw.get("meta")
    _check(meta is None or isinstance(meta, Mapping), "must be a JSON object", f"{where}.meta")
    return {
        "id": str(external_id).strip(),
        "kind": kind,
        "content": content,
        "expected": parts,
        "meta": dict(meta or {}),
    }
