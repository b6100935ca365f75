"""Scale tasks answered as forms: TextCollection tasks, and comparison tasks as Scale means them.

Pure: no database, no Flask. Both become items of a `form` study (tasks/form) that carry
their own fields (docs: /tmp/design18.md, sections 1 and 2):

- textcollection: `attachments` [{type, content}] are the item's attachments and Scale's
  `fields` become form fields: a category field {field_id, title, description, hint,
  choices [{label, value, hint}], min_choices, max_choices, required} a form category field,
  a text field {field_id, title, description, hint, max_characters, min_characters,
  required} a form text field. The completed response is
  `{"responses": [one dict per accepted respondent, keyed by field_id in the task's field
  order: category answers as lists of value texts, text answers as strings],
  "annotations": {field_id: the consensus}}`.
- comparison: the `attachments` are shown, `choices` are the answers to the question (one
  category field "choice" titled by the instruction) and each of Scale's `fields`
  {name: description} is a text field. The response is `{"choice": "<the chosen choice>",
  "fields": {name: text}, ...}`.

A task's `instruction`, where no field title carries it, is shown as the first attachment.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from crowd.exceptions import ValidationError
from tasks.form.config import value_text

CHOICE_FIELD = "choice"
MAX_TITLE = 500  # a form field's title
MAX_ATTACHMENTS = 10  # a form item's
ATTACHMENT_TYPES = ("text", "image", "html")
Answer = Mapping[str, Any]  # a stored form answer: {"fields": {field_id: value}}


# -- requests --------------------------------------------------------------------------------
def _help(*parts: Any) -> str | None:
    text = "\n\n".join(str(part).strip() for part in parts if part and str(part).strip())
    return text or None


def _choice(choice: Mapping[str, Any]) -> dict[str, Any]:
    mapped = {"label": choice["label"], "value": choice["value"]}
    if choice.get("hint"):
        mapped["hint"] = choice["hint"]
    return mapped


def form_field(field: Mapping[str, Any]) -> dict[str, Any]:
    """A form field declaration from one of Scale's TextCollection fields (checked by its
    model); what Scale leaves unset keeps the form's default."""
    declared: dict[str, Any] = {"id": field["field_id"], "type": field["type"],
                                "title": field["title"]}  # fmt: skip
    help_text = _help(field.get("description"), field.get("hint"))
    if help_text is not None:
        declared["help"] = help_text
    if field.get("required") is not None:
        declared["required"] = bool(field["required"])
    if field["type"] == "category":
        declared["choices"] = [_choice(choice) for choice in field["choices"]]
        for key in ("min_choices", "max_choices"):
            if field.get(key) is not None:
                declared[key] = field[key]
        if field.get("min_choices") == 0 and field.get("required") is None:
            declared["required"] = False  # none chosen is an answer Scale allows
    else:
        for key in ("max_characters", "min_characters"):
            if field.get(key) is not None:
                declared[key] = field[key]
    return declared


def form_fields(fields: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Scale's TextCollection fields as form fields; field_ids must differ."""
    seen: set[str] = set()
    for n, field in enumerate(fields):
        if field["field_id"] in seen:
            raise ValidationError(
                f"field_id {field['field_id']!r} is used twice: give each field its own",
                f"fields[{n}].field_id",
            )
        seen.add(field["field_id"])
    return [form_field(field) for field in fields]


def _with_instruction(
    instruction: str | None, attachments: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    shown = ([{"type": "text", "content": instruction}] if instruction else []) + attachments
    if len(shown) > MAX_ATTACHMENTS:
        raise ValidationError(
            f"at most {MAX_ATTACHMENTS} attachments with the instruction (shown first): "
            "send fewer",
            "attachments",
        )
    return shown


def textcollection_item(
    instruction: str | None,
    attachments: Sequence[Mapping[str, Any]],
    fields: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The form item content of a TextCollection task: attachments and its own fields."""
    shown = [{"type": a["type"], "content": a["content"]} for a in attachments]
    return {"attachments": _with_instruction(instruction, shown), "fields": form_fields(fields)}


def comparison_item(
    instruction: str | None,
    attachments: Sequence[str],
    attachment_type: str,
    choices: Sequence[str] | None,
    fields: Mapping[str, str] | None,
) -> dict[str, Any]:
    """The form item content of a comparison task as Scale means it (see the module doc)."""
    if not choices and not fields:
        raise ValidationError("give the choices the worker picks from, or fields to fill in",
                              "choices")  # fmt: skip
    if len(set(choices or [])) != len(choices or []):
        raise ValidationError("the choices must all differ: drop or merge the duplicates",
                              "choices")  # fmt: skip
    if fields and CHOICE_FIELD in fields and choices:
        raise ValidationError(
            f"{CHOICE_FIELD!r} names the answer among the choices: rename that field", "fields"
        )
    titled = bool(instruction) and len(instruction or "") <= MAX_TITLE and bool(choices)
    shown = [{"type": attachment_type, "content": text} for text in attachments]
    declared: list[dict[str, Any]] = []
    if choices:
        declared.append({"id": CHOICE_FIELD, "type": "category",
                         "title": instruction if titled else "Your answer",
                         "choices": list(choices)})  # fmt: skip
    for name, description in (fields or {}).items():
        text_field = {"id": name, "type": "text", "title": description[:MAX_TITLE]}
        if len(description) > MAX_TITLE:
            text_field["help"] = description
        declared.append(text_field)
    return {
        "attachments": _with_instruction(None if titled else instruction, shown),
        "fields": declared,
    }


def expected_fields(
    declared: Sequence[Mapping[str, Any]], expected: Mapping[str, Any], where: str
) -> dict[str, Any]:
    """An evaluation or training task's expected answers as the form's expected values:
    category fields only, each a value (or list of values) among the field's choices."""
    fields = {field["id"]: field for field in declared}
    if not expected:
        raise ValidationError("give the expected answer of at least one category field", where)
    mapped: dict[str, Any] = {}
    for key, value in expected.items():
        field = fields.get(key)
        if field is None or field["type"] != "category":
            known = [f["id"] for f in declared if f["type"] == "category"]
            raise ValidationError(
                f"expected answers are given for category fields only: one of {known}",
                f"{where}.{key}",
            )
        values = [value_text(v) for v in (value if isinstance(value, list) else [value])]
        allowed = [value_text(_value(choice)) for choice in field["choices"]]
        wrong = [v for v in values if v not in allowed]
        if wrong or not values:
            raise ValidationError(f"must be among the field's choice values {allowed}",
                                  f"{where}.{key}")  # fmt: skip
        mapped[key] = values
    return mapped


def _value(choice: Any) -> Any:
    return choice["value"] if isinstance(choice, Mapping) else choice


def expected_choice(choices: Sequence[str] | None, expected: Mapping[str, Any]) -> dict[str, Any]:
    """A comparison evaluation task's expected {"choice": <choice or its index>} as the form's
    expected value of the choice field."""
    where = "expected_response.choice"
    if not choices:
        raise ValidationError("this task has no choices to expect one of: give choices", where)
    choice = expected.get("choice")
    if isinstance(choice, int) and not isinstance(choice, bool) and 0 <= choice < len(choices):
        return {CHOICE_FIELD: [choices[choice]]}
    if isinstance(choice, str) and choice in choices:
        return {CHOICE_FIELD: [choice]}
    raise ValidationError(f"must be one of the choices {list(choices)} (or its index)", where)


# -- errors ----------------------------------------------------------------------------------
# Where import_items names the item a task becomes; request_path turns the rest into the
# request's own names.
ITEM = "item"
_ITEM_PATH = re.compile(r"^item(?: [^.\[]+)?(?P<rest>.*)$")
_PART = re.compile(r"^\.(?P<key>attachments|fields)\[(?P<index>\d+)\](?P<rest>.*)$")
# A form field's keys as Scale's TextCollection fields name them.
_SCALE_KEYS = {"id": "field_id", "help": "description"}


def request_path(
    where: str | None, task_type: str, params: Mapping[str, Any], content: Mapping[str, Any]
) -> str | None:
    """Where in the Scale request a problem of its form item lies: `item.fields[0].id` is
    `fields[0].field_id`, `item.attachments[1].content` is `attachments[0].content` when the
    instruction is shown as attachment 0; None where the request has no such field."""
    matched = _ITEM_PATH.match(where or "")
    if matched is None:
        return None
    rest = matched["rest"]
    if rest in (".fields", ".attachments"):
        return rest[1:]
    if rest.startswith(".expected"):
        return "expected_response" + rest.removeprefix(".expected")
    part = _PART.match(rest)
    if part is None:
        return None
    index, rest = int(part["index"]), part["rest"]
    if part["key"] == "attachments":
        index -= len(content.get("attachments") or []) - len(params.get("attachments") or [])
        if index < 0:
            return "instruction"
        if task_type == "textcollection":
            return f"attachments[{index}]{rest}"
        return "attachment_type" if rest == ".type" else f"attachments[{index}]"
    if task_type == "textcollection":
        key, _, tail = rest[1:].partition(".")
        named = _SCALE_KEYS.get(key, key)
        return f"fields[{index}]" + (f".{named}" if named else "") + (f".{tail}" if tail else "")
    declared = (content.get("fields") or [])[index : index + 1]
    if declared and declared[0]["id"] == CHOICE_FIELD and params.get("choices"):
        if rest.startswith(".choices["):
            return rest[1:].split("]")[0] + "]"
        return "instruction" if rest == ".title" else "choices"
    return f"fields.{declared[0]['id']}" if declared else "fields"


# -- responses -------------------------------------------------------------------------------
def _majority(values: Sequence[Any]) -> Any:
    """The most given value; a tie goes to the one given first."""
    keys = [repr(value) for value in values]
    counts = Counter(keys)
    top = max(counts.values())
    return values[next(i for i, key in enumerate(keys) if counts[key] == top)]


def consensus(answers: Sequence[Any]) -> Any:
    """The majority of the respondents' answers to one field (None answers left out)."""
    given = [answer for answer in answers if answer is not None and answer != []]
    return _majority(given) if given else None


def textcollection_response(field_ids: Sequence[str], answers: Sequence[Answer]) -> dict[str, Any]:
    """A completed TextCollection task's response from the accepted answers, in order."""
    responses = [{key: answer["fields"].get(key) for key in field_ids} for answer in answers]
    return {
        "responses": responses,
        "annotations": {key: consensus([r[key] for r in responses]) for key in field_ids},
    }


def comparison_response(
    choices: Sequence[str] | None, field_names: Sequence[str], answers: Sequence[Answer]
) -> dict[str, Any]:
    """A completed comparison's response: the majority choice, and the fields as answered by
    the first respondent who chose it (by the first respondent when there are no choices)."""
    response: dict[str, Any] = {}
    first = answers[0]
    if choices:
        picks = [(answer["fields"].get(CHOICE_FIELD) or [None])[0] for answer in answers]
        winner = _majority(picks)
        votes = Counter(picks)
        response = {
            "choice": winner,
            "votes": {choice: votes.get(choice, 0) for choice in choices},
            "responses": len(answers),
            "agreement": round(votes[winner] / len(answers), 4),
        }
        first = answers[picks.index(winner)]
    if field_names:
        response["fields"] = {name: first["fields"].get(name) for name in field_names}
    if not choices:
        response["responses"] = len(answers)
    return response
