"""JSON bodies read safely: size, depth, number and string limits checked before any view.

Python's json module takes what no database or analysis can: nesting deep enough to exhaust
the recursion limit, integers of any length, NaN and Infinity, lone UTF-16 surrogates and NUL
characters. Each is refused here, naming where in the body it was found, so a client's
mistake is a 4xx and never a crash further in.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from flask.json.provider import DefaultJSONProvider

from crowd.exceptions import ValidationError

MAX_DEPTH = 64
# Storage keeps 64-bit integers; anything wider is a client's mistake, not ours to overflow.
MAX_INT = 2**63 - 1


class UnsafeJSON(ValidationError):
    """A body that is not JSON we can take (malformed, too deep, a value out of range)."""

    status = 400


def _no_constant(name: str) -> Any:
    raise UnsafeJSON(f"{name} is not a JSON number: send a finite number or null")


def field_path(path: Sequence[str | int]) -> str:
    """A field's path as clients write it, e.g. items[3].text ("body" for the whole body)."""
    text = ""
    for part in path:
        if part == "[key]":
            continue  # pydantic's mark of a mapping's key (the part before it): not a field
        if isinstance(part, str):  # the path itself must be text we can send back
            part = part.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\0")
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "body"


def _check_text(value: str, path: list[str | int], what: str) -> None:
    if "\x00" in value:
        raise UnsafeJSON(f"{what} holds a NUL character (\\u0000): remove it", field_path(path))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafeJSON(
            f"{what} holds a lone UTF-16 surrogate: send valid Unicode text", field_path(path)
        ) from None


def check_value(value: Any) -> None:
    """Refuse what JSON allows but we cannot store: see the module docstring."""
    stack: list[tuple[Any, list[str | int], int]] = [(value, [], 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise UnsafeJSON(f"nested deeper than {MAX_DEPTH} levels", field_path(path))
        if isinstance(node, dict):
            for key, child in node.items():
                _check_text(key, [*path, key], "a key")
                stack.append((child, [*path, key], depth + 1))
        elif isinstance(node, list):
            stack.extend((child, [*path, i], depth + 1) for i, child in enumerate(node))
        elif isinstance(node, str):
            _check_text(node, path, "the text")
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int):
            if not -MAX_INT - 1 <= node <= MAX_INT:
                raise UnsafeJSON("the integer is out of range (64-bit signed)", field_path(path))
        elif isinstance(node, float) and not math.isfinite(node):
            raise UnsafeJSON("the number is too large for a 64-bit float", field_path(path))


def loads(data: str | bytes) -> Any:
    """Parse and check a JSON text; UnsafeJSON (a 400) names what is wrong and where."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as error:
            where = f"{error.reason} at byte {error.start}"
            raise UnsafeJSON(f"the body is not UTF-8: {where}") from None
    try:
        value = json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise UnsafeJSON(f"nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as error:
        raise UnsafeJSON(
            f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    except ValueError:  # an integer past Python's digit limit for int()
        raise UnsafeJSON("an integer is out of range (64-bit signed)") from None
    check_value(value)
    return value


class CheckedJSONProvider(DefaultJSONProvider):
    """Flask's JSON with the checks above on every request body (request.get_json)."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return loads(s)
