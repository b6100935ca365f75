"""Form answers: which fields a worker sees, what each may hold, and how an answer matches an
expected one (gold, training, attention).

The stored answer is {"fields": {field_id: value}} with every declared field present: a
rating is an int, a category the list of its selected value texts (declaration order), a
text a stripped str, a rank the list of indexes best first; None for a hidden or skipped
optional field. Matching reads the shapes, so it needs no field declarations.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from crowd.exceptions import ValidationError
from tasks.form.config import is_int, value_text
from tasks.form.items import rank_size


def condition_met(condition: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """Whether a show_if holds for the answers so far (a multi-choice: any selected value)."""
    given = values.get(condition["field"])
    if given is None:
        return False
    wanted = condition["in"]
    if isinstance(given, list):
        return any(value in wanted for value in given)
    return given in wanted


# A system source of randomness: a rank's start order must not be predictable.
_ORDER_RANDOM = random.SystemRandom()


def draw_orders(
    fields: Sequence[Mapping[str, Any]], attachments: int, rng: random.Random = _ORDER_RANDOM
) -> dict[str, list[int]]:
    """Each rank field's start order, drawn per assignment: position p shows thing
    order[p]. A rank that starts in the declared order for everyone would pull the answers
    of those who leave it as it is towards that order."""
    orders = {}
    for field in fields:
        if field["type"] == "rank":
            order = list(range(rank_size(field, attachments)))
            rng.shuffle(order)
            orders[field["id"]] = order
    return orders


def from_shown(raw: Any, orders: Mapping[str, Sequence[int]]) -> Any:
    """The page's answer with each rank given as positions in its shown order turned into
    indexes into the declared things; anything that is not a permutation of the positions
    is left for the answer check to refuse."""
    if not isinstance(raw, Mapping):
        return raw
    result = dict(raw)
    for name, order in orders.items():
        given = result.get(name)
        if (
            isinstance(given, list)
            and all(is_int(v) for v in given)
            and sorted(given) == list(range(len(order)))
        ):
            result[name] = [int(order[position]) for position in given]
    return result


def check_answer(
    fields: list[dict[str, Any]],
    raw: Any,
    attachments: int,
    error: type[ValidationError] = ValidationError,
    where: str = "fields",
    path: str = "fields.{}",
    require: bool = True,
) -> dict[str, Any]:
    """The answer to `fields` from what a worker (or an import) sent, normalised.

    Hidden fields must be absent (null counts as absent); a shown required field must be
    answered, unless `require` is False (answers collected elsewhere may skip fields).
    Errors name `where` (the whole answer) or `path` with the field's id (an import's CSV
    says "field:{}").
    """
    if not isinstance(raw, Mapping):
        raise error("must be an object {field id: answer}", where)
    by_id = {field["id"]: field for field in fields}
    unknown = sorted(set(raw) - set(by_id))
    if unknown:
        raise error(
            f"no such field here (the fields are {', '.join(by_id)})", path.format(unknown[0])
        )
    values: dict[str, Any] = {}
    for field in fields:
        name = field["id"]
        at = path.format(name)
        given = raw.get(name)
        shown = field.get("show_if") is None or condition_met(field["show_if"], values)
        if not shown:
            if given is not None:
                raise error(
                    "this field is hidden (its condition on "
                    f"{field['show_if']['field']!r} does not hold): leave it out",
                    at,
                )
            values[name] = None
            continue
        value = None if given is None else field_value(field, given, attachments, at, error)
        if value is None and field["required"] and require:
            raise error(f"required: answer {field['title']!r}", at)
        values[name] = value
    return {"fields": values}


def field_value(
    field: Mapping[str, Any], given: Any, attachments: int, at: str, error: type[ValidationError]
) -> Any:
    """One field's answer, normalised; None for an empty optional text."""
    kind = field["type"]
    if kind == "rating":
        low, high = field["scale"]
        if not is_int(given) or not low <= given <= high:
            raise error(f"must be a whole number from {low} to {high}, got {given!r}", at)
        return given
    if kind == "category":
        known = [choice["value"] for choice in field["choices"]]
        low, high = field["min_choices"], field["max_choices"]
        if not isinstance(given, list) or not all(
            isinstance(v, str | int | float | bool) for v in given
        ):
            raise error(f"must be a list of choice values ({', '.join(known)})", at)
        texts = [value_text(v) for v in given]
        strange = [text for text in texts if text not in known]
        if strange:
            raise error(f"{strange[0]!r} is not a choice (the choices: {', '.join(known)})", at)
        if len(set(texts)) != len(texts):
            raise error("a choice is given twice", at)
        if not low <= len(texts) <= high:
            many = "exactly" if low == high else f"{low} to"
            raise error(f"choose {many} {high}, not {len(texts)}", at)
        return [value for value in known if value in texts]
    if kind == "text":
        if not isinstance(given, str):
            raise error("must be text", at)
        text = given.strip()
        if len(text) > field["max_characters"]:
            raise error(f"at most {field['max_characters']} characters, not {len(text)}", at)
        if text and len(text) < field["min_characters"]:
            raise error(f"at least {field['min_characters']} characters, not {len(text)}", at)
        return text or None
    size = rank_size(field, attachments)
    if (
        not isinstance(given, list)
        or not all(is_int(v) for v in given)
        or sorted(given) != list(range(size))
    ):
        raise error(f"must order the indexes 0 to {size - 1}, each once, best first", at)
    return list(given)


def kendall_distance(first: Sequence[int], second: Sequence[int]) -> int:
    """The number of pairs two rankings of the same things put in opposite orders."""
    place = {thing: index for index, thing in enumerate(second)}
    order = [place[thing] for thing in first if thing in place]
    return sum(
        1 for i in range(len(order)) for j in range(i + 1, len(order)) if order[i] > order[j]
    )


def field_matches(expected: Any, given: Any, tolerance: float = 0) -> bool:
    """Whether one field's answer matches its expected value (by the answer's shape).

    A rating within `tolerance` points; a category's selected set equal to the expected one
    (a value text or a list); a rank within `tolerance` swapped pairs, or, for an expected
    top index (a gold item promoted from labels), the same thing first.
    """
    if given is None or expected is None:
        return False
    if is_int(given):
        return is_int(expected) and abs(given - expected) <= tolerance
    if isinstance(given, list) and given and all(is_int(v) for v in given):
        if is_int(expected):
            return bool(given[0] == expected)
        return isinstance(expected, list) and kendall_distance(given, expected) <= tolerance
    if isinstance(given, list):
        wanted = expected if isinstance(expected, list) else [expected]
        return {value_text(v) for v in given} == {value_text(v) for v in wanted}
    return False


def matched(expected: Mapping[str, Any], answer: Mapping[str, Any]) -> list[bool]:
    """For each expected field of a gold, training or attention item: did the answer match."""
    wanted = expected.get("expected") or {}
    tolerance = expected.get("tolerance") or {}
    given = answer.get("fields") or {}
    return [
        field_matches(value, given.get(name), float(tolerance.get(name, 0)))
        for name, value in wanted.items()
    ]


def label(value: Any) -> Hashable | None:
    """One field's value as a categorical label: a rating, a category's values joined by
    "|" (sorted: a set), a rank's top index; None for text and missing values."""
    if value is None or isinstance(value, str | bool):
        return None
    if is_int(value):
        return int(value)
    if isinstance(value, list):
        if value and all(is_int(v) for v in value):
            return int(value[0])
        return "|".join(sorted(value_text(v) for v in value))
    return None


def labels(values: Mapping[str, Any]) -> dict[str, Hashable]:
    return {name: lab for name, value in values.items() if (lab := label(value)) is not None}
