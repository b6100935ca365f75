"""Scale task requests checked and mapped onto our items, and responses in Scale's shape.

Pure: no database, no Flask. A project's tasks are items of its study, whose HIT type the
project's type (and its explicit ask) decides (`study_hit_type`):

- comparison, as Scale means it (the default): a `form` item. The `attachments` are shown,
  the `choices` are the answers to the question and Scale's `fields` are free-text
  questions; the response is `{"choice": "<chosen choice>", "fields": {...}}`
  (crowd/scale/forms.py).
- comparison with params `{"crowd": {"pick": "attachment"}}`: best of K, a `comparison`
  item. `instruction` is the context shown to the worker (the item's query, x in the
  comparison paper), `attachments` are the K candidates (y0..yK-1, in this order), optional
  `choices` name them. The response is `{"choice": <index>, "chosen": <text>, ...}`.
- categorization: a `comparison` item: `attachment` (with the `instruction` above it, when
  given) is the item's query and the `categories` are the candidates. The response is
  `{"category": <name>}`.
- textcollection: a `form` item with the task's own fields (crowd/scale/forms.py); the
  response is `{"responses": [per respondent], "annotations": {...}}`.

The bodies are checked by their models (crowd/web/schemas/scale.py: types, lengths, unknown
keys); what is checked here are the rules between fields. Scale's field names are kept in
every message, so an error says which field of the request to fix.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from crowd.exceptions import ValidationError
from crowd.scale import forms

COMPARISON = "comparison"
CATEGORIZATION = "categorization"
TEXTCOLLECTION = "textcollection"
TASK_TYPES = (COMPARISON, CATEGORIZATION, TEXTCOLLECTION)
# The HIT types tasks become (see the module docstring).
PICK_HIT = "comparison"
FORM_HIT = "form"
PICK_ATTACHMENT = "attachment"  # params.crowd.pick: the explicit ask for best of K
MIN_OPTIONS = 2
MAX_OPTIONS = 8  # the comparison HIT's limit on candidates
MAX_CHOICES = 50  # a form category field's
MAX_TEXT = 10_000
MAX_QUERY = 20_000
MAX_INSTRUCTION = 5_000
MAX_NAME = 200
MAX_TAGS = 50
MAX_METADATA_CHARS = 50_000
MAX_RESPONSES = 100


def study_hit_type(task_type: str, params: Mapping[str, Any] | None) -> str:
    """The HIT type of a project's study: its type's, or best of K when asked for."""
    crowd = (params or {}).get("crowd") or {}
    pick = crowd.get("pick") if isinstance(crowd, Mapping) else None
    if pick is not None and (task_type != COMPARISON or pick != PICK_ATTACHMENT):
        raise ValidationError(
            f'only comparison projects take "pick", and only "{PICK_ATTACHMENT}" (workers pick '
            "the best attachment): leave it out for Scale's comparison, where they answer "
            "with one of the choices",
            "params.crowd.pick",
        )
    if task_type == CATEGORIZATION or pick == PICK_ATTACHMENT:
        return PICK_HIT
    return FORM_HIT


@dataclass(frozen=True)
class TaskRequest:
    """A checked task creation request."""

    type: str
    project: str | None
    batch: str | None
    callback_url: str | None
    instruction: str | None
    unique_id: str | None
    metadata: dict[str, Any]
    tags: list[str]
    # Scale's `params` of the task (what the task object echoes back).
    params: dict[str, Any]
    # What the item shows: a comparison item's query and candidates, a form item's
    # attachments and fields.
    content: dict[str, Any]
    # The item's expected answer (evaluation and training tasks): {"best": i} or
    # {"expected": {field_id: values}}.
    expected: dict[str, Any] | None = None
    expected_response: dict[str, Any] | None = None
    # responses_required: the answers the task needs (None: annotations_per_item).
    target: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def item_record(self, item_id: str, kind: str) -> dict[str, Any]:
        """The item this task becomes (see tasks/comparison/items.py, tasks/form/items.py)."""
        meta = {"scale_task_id": item_id, "scale_type": self.type, **self.meta}
        return {"id": item_id, "kind": kind, **self.content, **(self.expected or {}),
                "meta": meta}  # fmt: skip


def _fail(message: str, where: str) -> ValidationError:
    return ValidationError(message, where)


def _distinct(texts: list[str], where: str, what: str) -> list[str]:
    # A worker's pick is stored as a text's position: equal texts would make it ambiguous.
    if len(set(texts)) != len(texts):
        raise _fail(f"the {what} must all differ: drop or merge the duplicates", where)
    return texts


def _policies(fields: Mapping[str, Any], options: list[str]) -> list[str] | None:
    policies = (fields.get("metadata") or {}).get("policies")
    if policies is not None and not (
        isinstance(policies, list)
        and len(policies) == len(options)
        and all(isinstance(p, str) and p.strip() for p in policies)
    ):
        raise _fail(
            f"metadata.policies, when given, names the model behind each option: "
            f"{len(options)} non-empty names",
            "metadata.policies",
        )
    return policies


def _pick_content(query: str, options: list[str], fields: Mapping[str, Any]) -> dict[str, Any]:
    policies = _policies(fields, options)
    candidates = [{"text": text, **({"policy": policies[i]} if policies else {})}
                  for i, text in enumerate(options)]  # fmt: skip
    return {"query": query, "candidates": candidates}


def _best_of_k(fields: Mapping[str, Any], quality: bool) -> dict[str, Any]:
    if fields.get("attachment_type", "text") != "text":
        raise _fail("best-of-K projects compare texts: send attachment_type 'text'",
                    "attachment_type")  # fmt: skip
    if fields.get("fields"):
        raise _fail("free-text questions are not asked in a best-of-K project (params.crowd."
                    "pick): its workers pick one attachment", "fields")  # fmt: skip
    options = _distinct(list(fields["attachments"]), "attachments", "text attachments")
    params: dict[str, Any] = {"attachment_type": "text", "attachments": options}
    choices = fields.get("choices")
    if choices is not None:
        names = _distinct(list(choices), "choices", "choice names")
        if len(names) != len(options):
            raise _fail(
                f"name each attachment: give {len(options)} choices, one per attachment, "
                "or leave choices out",
                "choices",
            )
        params["choices"] = names
    mapped: dict[str, Any] = {"params": params,
                              "content": _pick_content(fields["instruction"], options, fields)}
    if quality:
        expected = dict(fields["expected_response"])
        mapped["expected"] = {"best": _expected_index(options, params.get("choices"), expected)}
    return mapped


def _scale_comparison(fields: Mapping[str, Any], quality: bool) -> dict[str, Any]:
    attachment_type = fields.get("attachment_type", "text")
    params: dict[str, Any] = {"attachment_type": attachment_type,
                              "attachments": list(fields["attachments"])}  # fmt: skip
    for key in ("choices", "fields"):
        if fields.get(key):
            params[key] = fields[key]
    content = forms.comparison_item(fields.get("instruction"), params["attachments"],
                                    attachment_type, params.get("choices"),
                                    params.get("fields"))  # fmt: skip
    mapped: dict[str, Any] = {"params": params, "content": content}
    if quality:
        expected = forms.expected_choice(params.get("choices"), fields["expected_response"])
        mapped["expected"] = {"expected": expected}
    return mapped


def _categorization(fields: Mapping[str, Any], quality: bool) -> dict[str, Any]:
    instruction, attachment = fields.get("instruction"), fields["attachment"]
    options = _distinct(list(fields["categories"]), "categories", "categories")
    query = f"{instruction}\n\n{attachment}" if instruction else attachment
    if len(query) > MAX_QUERY:
        raise _fail(f"instruction and attachment exceed {MAX_QUERY} characters", "attachment")
    params = {"attachment_type": "text", "attachment": attachment, "categories": options}
    mapped: dict[str, Any] = {"params": params,
                              "content": _pick_content(query, options, fields)}
    if quality:
        category = fields["expected_response"].get("category")
        if category not in options:
            raise _fail(f'must be {{"category": <one of {options}>}}', "expected_response")
        mapped["expected"] = {"best": options.index(category)}
    return mapped


def _textcollection(fields: Mapping[str, Any], quality: bool) -> dict[str, Any]:
    params = {"attachments": list(fields["attachments"]), "fields": list(fields["fields"])}
    content = forms.textcollection_item(fields.get("instruction"), params["attachments"],
                                        params["fields"])  # fmt: skip
    mapped: dict[str, Any] = {"params": params, "content": content}
    if quality:
        expected = forms.expected_fields(content["fields"], fields["expected_response"],
                                         "expected_response")  # fmt: skip
        mapped["expected"] = {"expected": expected}
    return mapped


def parse_task(
    task_type: str, fields: Mapping[str, Any], quality: bool = False, hit_type: str = PICK_HIT
) -> TaskRequest:
    """The item a task becomes in a study of `hit_type`, from a body its model checked
    (`quality`: an evaluation or training task's); what is checked here are the rules
    between fields."""
    if task_type not in TASK_TYPES:
        raise _fail(
            f"task type {task_type!r} is not available here: this server speaks "
            f"{', '.join(TASK_TYPES)} tasks",
            "type",
        )
    project, batch = fields.get("project"), fields.get("batch")
    if project is None and batch is None:
        raise _fail("name the project the task belongs to (or its batch)", "project")
    if task_type == CATEGORIZATION:
        mapped = _categorization(fields, quality)
    elif task_type == TEXTCOLLECTION:
        mapped = _textcollection(fields, quality)
    elif hit_type == PICK_HIT:
        mapped = _best_of_k(fields, quality)
    else:
        mapped = _scale_comparison(fields, quality)
    target = fields.get("responses_required")
    params = mapped["params"]
    if target is not None:
        params["responses_required"] = target
    return TaskRequest(
        type=task_type,
        project=project,
        batch=batch,
        callback_url=fields.get("callback_url"),
        instruction=fields.get("instruction"),
        unique_id=fields.get("unique_id"),
        metadata=dict(fields.get("metadata") or {}),
        tags=sorted(set(fields.get("tags") or [])),
        params=params,
        content=mapped["content"],
        expected=mapped.get("expected"),
        expected_response=dict(fields["expected_response"]) if quality else None,
        target=target,
    )


def _expected_index(
    options: list[str], names: list[str] | None, expected: Mapping[str, Any]
) -> int:
    """The option a best-of-K evaluation or training task's expected_response picks."""
    choice = expected.get("choice")
    if isinstance(choice, int) and not isinstance(choice, bool) and 0 <= choice < len(options):
        return choice
    if isinstance(choice, str) and choice in (names or []):
        return list(names or []).index(choice)
    if isinstance(choice, str) and choice in options:
        return options.index(choice)
    raise _fail(
        f'must be {{"choice": <index 0 to {len(options) - 1}>}} (or a choice name or the '
        "attachment's text)",
        "expected_response",
    )


def project_params(
    task_type: str, params: Mapping[str, Any] | None
) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """A project's params, its study's HIT type and the study config (`crowd`, without the
    ask for best of K)."""
    hit_type = study_hit_type(task_type, params)
    if params is None:
        params = {}
    instruction = params.get("instruction")
    config = dict(params.get("crowd") or {})
    config.pop("pick", None)
    if instruction is not None:
        if config.get("instructions") is not None:
            raise _fail(
                "give the instructions once: params.instruction or params.crowd.instructions",
                "params.instruction",
            )
        config["instructions"] = instruction
    # Each task is imported on its own, and the comparison type would give a share of every
    # import (so every single task) to extra workers: tasks get annotations_per_item each.
    if hit_type == PICK_HIT and config.setdefault("overlap_share", 0.0) != 0:
        raise _fail(
            "must be 0 for Scale projects: every task gets annotations_per_item answers; "
            "raise annotations_per_item instead",
            "params.crowd.overlap_share",
        )
    return dict(params), hit_type, config


def request_hash(*parts: Any) -> str:
    """A stable hash of JSON-able request parts (key order does not matter)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def aggregate_choice(picks: Sequence[int]) -> tuple[int, list[int]]:
    """The majority pick and the votes per option index; a tie goes to the earliest pick."""
    counts = Counter(picks)
    top = max(counts.values())
    winner = next(pick for pick in picks if counts[pick] == top)
    return winner, [counts.get(i, 0) for i in range(max(picks) + 1)]


def task_response(
    task_type: str, params: Mapping[str, Any], answers: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A completed task's response from the accepted answers, in order: best-of-K picks
    (`{"best": i}`) or form answers (`{"fields": {...}}`)."""
    if task_type == TEXTCOLLECTION:
        ids = [field["field_id"] for field in params["fields"]]
        return forms.textcollection_response(ids, answers)
    if "best" not in answers[0]:
        return forms.comparison_response(params.get("choices"), list(params.get("fields") or {}),
                                         answers)  # fmt: skip
    picks = [int(answer["best"]) for answer in answers]
    winner, counted = aggregate_choice(picks)
    options = list(params["attachments" if task_type == COMPARISON else "categories"])
    votes = counted + [0] * (len(options) - len(counted))
    agreement = round(votes[winner] / len(picks), 4)
    if task_type == CATEGORIZATION:
        return {
            "category": options[winner],
            "votes": dict(zip(options, votes, strict=True)),
            "responses": len(picks),
            "agreement": agreement,
        }
    response: dict[str, Any] = {
        "choice": winner,
        "chosen": options[winner],
        "votes": votes,
        "responses": len(picks),
        "agreement": agreement,
    }
    if params.get("choices"):
        response["label"] = params["choices"][winner]
    return response
