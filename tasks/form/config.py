"""Form fields and the form study config: checked on upload, with errors that name the path.

A field declaration (the study's `fields`, or an item's own) is normalised once: defaults
filled in, choice values made text, `show_if` written as {"field", "in": [values]}; checking
a normalised declaration again gives it back unchanged, so stored configs re-validate.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any, cast

from crowd.exceptions import InvalidConfig, ValidationError

FIELD_TYPES = ("rating", "category", "text", "rank")
COMMON_KEYS = ("id", "type", "title", "help", "required", "show_if")
TYPE_KEYS: dict[str, tuple[str, ...]] = {
    "rating": ("scale", "labels"),
    "category": ("choices", "min_choices", "max_choices"),
    "text": ("max_characters", "min_characters"),
    "rank": ("choices",),
}
CONFIG_KEYS = ("fields", "instructions")
CHOICE_KEYS = ("label", "value", "hint")
MAX_FIELDS = 50
MAX_ID_CHARS = 100
MAX_TITLE_CHARS = 500
MAX_HELP_CHARS = 2000
MAX_LABEL_CHARS = 500
MAX_VALUE_CHARS = 200
MAX_HINT_CHARS = 1000
MAX_SCALE_SPAN = 20
DEFAULT_SCALE = (1, 5)
MAX_CATEGORY_CHOICES = 50
RANK_CHOICES = (2, 10)
DEFAULT_MAX_CHARACTERS = 1000
MAX_CHARACTERS = 10000
MAX_INSTRUCTIONS_CHARS = 5000
# Joins a multi-choice answer's values in labels, promoted gold and CSV cells, so no value
# may hold it.
VALUE_SEPARATOR = "|"


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def value_text(value: Any) -> str:
    """A choice value as the text it is stored as: booleans "true"/"false", others str()."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _check(condition: bool, message: str, where: str, error: type[ValidationError]) -> None:
    if not condition:
        raise error(message, where)


def _text(
    raw: Mapping[str, Any],
    key: str,
    limit: int,
    where: str,
    error: type[ValidationError],
    required: bool = True,
) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    _check(
        isinstance(value, str) and (len(value.strip()) > 0 or not required) and len(value) <= limit,
        f"must be text of {'1' if required else '0'} to {limit} characters",
        f"{where}.{key}",
        error,
    )
    return cast(str, value).strip()


def _choices(
    raw: Any, low: int, high: int, where: str, error: type[ValidationError]
) -> list[dict[str, str]]:
    """Choices as [{"label", "value" (text), "hint"?}]; plain strings are their own label."""
    _check(
        isinstance(raw, list) and low <= len(raw) <= high,
        f"must be a list of {low} to {high} choices: strings, or objects "
        '{"label": ..., "value": ..., "hint": ...}',
        where,
        error,
    )
    choices = []
    for index, entry in enumerate(cast(list[Any], raw)):
        at = f"{where}[{index}]"
        if isinstance(entry, str):
            entry = {"label": entry, "value": entry}
        _check(isinstance(entry, Mapping), "must be a string or an object with a label", at, error)
        unknown = sorted(set(entry) - set(CHOICE_KEYS))
        _check(not unknown, f"unknown keys {unknown} (allowed: {list(CHOICE_KEYS)})", at, error)
        label = _text(entry, "label", MAX_LABEL_CHARS, at, error)
        value = entry.get("value", label)
        _check(
            isinstance(value, str | int | float | bool)
            and 0 < len(value_text(value).strip()) <= MAX_VALUE_CHARS,
            f"must be a string, number or true/false of 1 to {MAX_VALUE_CHARS} characters as text",
            f"{at}.value",
            error,
        )
        _check(
            VALUE_SEPARATOR not in value_text(value),
            f"must not contain {VALUE_SEPARATOR!r}: it joins the values of a multi-choice "
            "answer in labels and CSV cells (give the choice another value, keep the label)",
            f"{at}.value",
            error,
        )
        choice = {"label": label, "value": value_text(value)}
        hint = entry.get("hint")
        if not (hint is None or (isinstance(hint, str) and not hint.strip())):  # "": no hint
            choice["hint"] = _text(entry, "hint", MAX_HINT_CHARS, at, error)
        choices.append(choice)
    values = [choice["value"] for choice in choices]
    repeated = sorted({value for value in values if values.count(value) > 1})
    _check(
        not repeated,
        f"choice values must differ once made text; repeated: {repeated}",
        where,
        error,
    )
    return choices


def _count(
    raw: Mapping[str, Any], key: str, default: int, where: str, error: type[ValidationError]
) -> int:
    value = raw.get(key, default)
    _check(is_int(value) and value >= 0, "must be a whole number from 0", f"{where}.{key}", error)
    return cast(int, value)


def _rating(raw: Mapping[str, Any], where: str, error: type[ValidationError]) -> dict[str, Any]:
    scale = raw.get("scale", list(DEFAULT_SCALE))
    _check(
        isinstance(scale, list | tuple)
        and len(scale) == 2
        and all(is_int(end) for end in scale)
        and 1 <= scale[1] - scale[0] <= MAX_SCALE_SPAN,
        f"must be [low, high], two whole numbers with 1 <= high - low <= {MAX_SCALE_SPAN}, "
        "e.g. [1, 5]",
        f"{where}.scale",
        error,
    )
    labels = raw.get("labels", ["", ""])
    _check(
        isinstance(labels, list | tuple)
        and len(labels) == 2
        and all(isinstance(label, str) and len(label) <= MAX_LABEL_CHARS for label in labels),
        f"must be [low_label, high_label], two texts of at most {MAX_LABEL_CHARS} characters",
        f"{where}.labels",
        error,
    )
    return {"scale": [int(scale[0]), int(scale[1])], "labels": [str(x).strip() for x in labels]}


def _category(raw: Mapping[str, Any], where: str, error: type[ValidationError]) -> dict[str, Any]:
    choices = _choices(raw.get("choices"), 2, MAX_CATEGORY_CHOICES, f"{where}.choices", error)
    low = _count(raw, "min_choices", 1, where, error)
    high = _count(raw, "max_choices", 1, where, error)
    _check(
        1 <= high <= len(choices),
        f"must be from 1 to the number of choices ({len(choices)})",
        f"{where}.max_choices",
        error,
    )
    _check(low <= high, f"must be at most max_choices ({high})", f"{where}.min_choices", error)
    return {"choices": choices, "min_choices": low, "max_choices": high}


def _free_text(raw: Mapping[str, Any], where: str, error: type[ValidationError]) -> dict[str, Any]:
    high = _count(raw, "max_characters", DEFAULT_MAX_CHARACTERS, where, error)
    _check(
        1 <= high <= MAX_CHARACTERS,
        f"must be from 1 to {MAX_CHARACTERS}",
        f"{where}.max_characters",
        error,
    )
    low = _count(raw, "min_characters", 0, where, error)
    _check(
        low <= high, f"must be at most max_characters ({high})", f"{where}.min_characters", error
    )
    return {"max_characters": high, "min_characters": low}


def _rank(raw: Mapping[str, Any], where: str, error: type[ValidationError]) -> dict[str, Any]:
    if raw.get("choices") is None:
        return {}  # the item's attachments are ranked
    low, high = RANK_CHOICES
    return {"choices": _choices(raw["choices"], low, high, f"{where}.choices", error)}


def _field_id(raw: Mapping[str, Any], where: str, error: type[ValidationError]) -> str:
    value = raw.get("id")
    _check(
        isinstance(value, str)
        and 0 < len(value) <= MAX_ID_CHARS
        and value.strip() == value
        and not any(unicodedata.category(ch).startswith("C") for ch in value),
        f"must be 1 to {MAX_ID_CHARS} characters, no control characters and no spaces at "
        'either end (it keys the answers and the CSV column "field:<id>")',
        f"{where}.id",
        error,
    )
    return cast(str, value)


def _condition_values(
    earlier: Mapping[str, Any], values: list[Any], where: str, error: type[ValidationError]
) -> list[Any]:
    """The values of a show_if, in the earlier field's terms (rating: ints, category: texts)."""
    if earlier["type"] == "rating":
        low, high = earlier["scale"]
        for value in values:
            _check(
                is_int(value) and low <= value <= high,
                f"{value!r} is not a rating of {earlier['id']!r} ({low} to {high})",
                where,
                error,
            )
        return list(values)
    known = [choice["value"] for choice in earlier["choices"]]
    texts = []
    for value in values:
        _check(
            isinstance(value, str | int | float | bool) and value_text(value) in known,
            f"{value!r} is not a choice value of {earlier['id']!r} ({', '.join(known)})",
            where,
            error,
        )
        texts.append(value_text(value))
    return texts


def _show_if(
    raw: Any, earlier: Mapping[str, Mapping[str, Any]], where: str, error: type[ValidationError]
) -> dict[str, Any]:
    how = (
        'must be {"field": <id of an earlier category or rating field>, "equals": <value>} '
        'or {"field": ..., "in": [values]}'
    )
    _check(
        isinstance(raw, Mapping) and set(raw) in ({"field", "equals"}, {"field", "in"}),
        how,
        where,
        error,
    )
    name = raw["field"]
    _check(
        isinstance(name, str) and name in earlier,
        f"names {name!r}, which is not a field declared before this one",
        f"{where}.field",
        error,
    )
    field = earlier[name]
    _check(
        field["type"] in ("category", "rating"),
        f"{name!r} is a {field['type']} field: conditions follow a category or rating field",
        f"{where}.field",
        error,
    )
    if "equals" in raw:
        values, at = [raw["equals"]], f"{where}.equals"
    else:
        values, at = raw["in"], f"{where}.in"
        _check(
            isinstance(values, list) and len(values) > 0,
            "must be a non-empty list of values",
            at,
            error,
        )
    return {"field": name, "in": _condition_values(field, values, at, error)}


def validate_field(
    raw: Any,
    where: str,
    earlier: Mapping[str, Mapping[str, Any]],
    error: type[ValidationError] = InvalidConfig,
) -> dict[str, Any]:
    """One field declaration, normalised; `earlier` holds the fields declared before it."""
    _check(
        isinstance(raw, Mapping),
        'each field must be an object {"id", "type", "title", ...}',
        where,
        error,
    )
    kind = raw.get("type")
    _check(kind in FIELD_TYPES, f"must be one of {', '.join(FIELD_TYPES)}", f"{where}.type", error)
    allowed = COMMON_KEYS + TYPE_KEYS[kind]
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise error(
            f"unknown key for a {kind} field (allowed: {', '.join(allowed)})",
            f"{where}.{unknown[0]}",
        )
    field: dict[str, Any] = {
        "id": _field_id(raw, where, error),
        "type": kind,
        "title": _text(raw, "title", MAX_TITLE_CHARS, where, error),
        "help": _text(raw, "help", MAX_HELP_CHARS, where, error, required=False),
        "required": raw.get("required", True),
    }
    _check(isinstance(field["required"], bool), "must be true or false", f"{where}.required", error)
    parts = {"rating": _rating, "category": _category, "text": _free_text, "rank": _rank}
    field.update(parts[kind](raw, where, error))
    if raw.get("show_if") is not None:
        field["show_if"] = _show_if(raw["show_if"], earlier, f"{where}.show_if", error)
    return field


def validate_fields(
    raw: Any, where: str = "fields", error: type[ValidationError] = InvalidConfig
) -> list[dict[str, Any]]:
    """A list of field declarations, normalised; ids unique, conditions on earlier fields."""
    _check(
        isinstance(raw, list) and 1 <= len(raw) <= MAX_FIELDS,
        f"must be a list of 1 to {MAX_FIELDS} fields",
        where,
        error,
    )
    fields: dict[str, dict[str, Any]] = {}
    for index, entry in enumerate(cast(list[Any], raw)):
        field = validate_field(entry, f"{where}[{index}]", fields, error)
        _check(
            field["id"] not in fields,
            f"{field['id']!r} is declared twice: ids must differ",
            f"{where}[{index}].id",
            error,
        )
        fields[field["id"]] = field
    return list(fields.values())


def validate_study_config(config: dict[str, Any]) -> dict[str, Any]:
    """The form keys of a study config: `fields` (None when every item brings its own) and
    `instructions`."""
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise InvalidConfig(
            f"unknown config key: form studies take annotations_per_item, attention_rate, qc, "
            f"worker_page, {', '.join(CONFIG_KEYS)}",
            unknown[0],
        )
    raw = config.get("fields")
    fields = None if raw is None else validate_fields(raw)
    instructions = config.get("instructions")
    if instructions is None:
        instructions = ""
    _check(
        isinstance(instructions, str) and len(instructions) <= MAX_INSTRUCTIONS_CHARS,
        f"must be text of at most {MAX_INSTRUCTIONS_CHARS} characters",
        "instructions",
        InvalidConfig,
    )
    return {"fields": fields, "instructions": instructions.strip()}
