"""Scale task requests checked and mapped onto our items, and responses in Scale's shape.

Pure: no database, no Flask. Both Scale task types we speak become items of a `comparison`
study (pick the best of K), because both ask a worker to pick exactly one of a few texts:

- comparison: `instruction` is the context shown to the worker (the item's query, x in the
  comparison paper), `attachments` are the K candidates (y0..yK-1, in this order), optional
  `choices` name them. The response is `{"choice": <index>, "chosen": <text>, ...}`.
- categorization: `attachment` (with the `instruction` above it, when given) is the item's
  query and the `categories` are the candidates. The response is `{"category": <name>}`.

Scale's field names are kept in every message, so an error says which field of the request
to fix.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from crowd.delivery.signed import validate_url
from crowd.exceptions import ValidationError

COMPARISON = "comparison"
CATEGORIZATION = "categorization"
TASK_TYPES = (COMPARISON, CATEGORIZATION)
# The HIT type both task types become (see the module docstring).
HIT_TYPE = "comparison"
MIN_OPTIONS = 2
MAX_OPTIONS = 8  # the comparison HIT's limit on candidates
MAX_TEXT = 10_000
MAX_QUERY = 20_000
MAX_INSTRUCTION = 5_000
MAX_NAME = 200
MAX_TAGS = 50
MAX_METADATA_CHARS = 50_000
COMMON_KEYS = frozenset(
    {"project", "batch", "callback_url", "instruction", "metadata", "tags", "unique_id"}
)
TYPE_KEYS = {
    COMPARISON: frozenset({"attachments", "attachment_type", "choices", "fields"}),
    CATEGORIZATION: frozenset({"attachment", "attachment_type", "categories", "allow_multiple"}),
}
QUALITY_KEYS = frozenset({"expected_response", "initial_response"})
PROJECT_PARAM_KEYS = frozenset({"instruction", "crowd"})


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
    # The item's query and candidate texts, in the request's order.
    query: str
    options: list[str]
    expected_response: dict[str, Any] | None = None
    expected_index: int | None = None
    policies: list[str] | None = field(default=None)

    def item_record(self, item_id: str, kind: str) -> dict[str, Any]:
        """The comparison item this task becomes (see tasks/comparison/items.py)."""
        record: dict[str, Any] = {
            "id": item_id,
            "kind": kind,
            "query": self.query,
            "candidates": [
                {"text": text, **({"policy": self.policies[i]} if self.policies else {})}
                for i, text in enumerate(self.options)
            ],
            "meta": {"scale_task_id": item_id, "scale_type": self.type},
        }
        if self.expected_index is not None:
            record["best"] = self.expected_index
        return record


def _fail(message: str, where: str) -> ValidationError:
    return ValidationError(message, where)


def _text(value: Any, where: str, limit: int, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise _fail(f"must be non-empty text of at most {limit} characters", where)
    return value.strip()


def check_name(value: Any, where: str) -> str:
    """A project or batch name: it becomes part of a URL, so no '/'."""
    name = cast(str, _text(value, where, MAX_NAME))
    if "/" in name:
        raise _fail("must not contain '/' (it is part of the URL)", where)
    return name


def check_url(value: Any, where: str) -> str | None:
    """A callback URL as a signed delivery will POST to it (a bad one fails here, not later)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and "@" in value and "://" not in value:
        raise _fail("email callbacks are not sent here: give an http(s) URL", where)
    return validate_url(value, where)


def check_metadata(value: Any, where: str = "metadata") -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail("must be a JSON object", where)
    if len(json.dumps(value)) > MAX_METADATA_CHARS:
        raise _fail(f"must be at most {MAX_METADATA_CHARS} characters as JSON", where)
    return dict(value)


def _tags(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if (
        not isinstance(value, list)
        or len(value) > MAX_TAGS
        or not all(isinstance(t, str) and 0 < len(t.strip()) <= MAX_NAME for t in value)
    ):
        raise _fail(f"must be a list of at most {MAX_TAGS} tags of 1 to 200 characters", "tags")
    return sorted({t.strip() for t in value})


def _attachment_type(body: Mapping[str, Any]) -> None:
    kind = body.get("attachment_type", "text")
    if kind != "text":
        raise _fail(
            f"{kind!r} is not supported: workers here read text, so send attachment_type "
            "'text' with the text itself as the attachment",
            "attachment_type",
        )


def _option_texts(values: Any, where: str, what: str) -> list[str]:
    if not isinstance(values, list) or not MIN_OPTIONS <= len(values) <= MAX_OPTIONS:
        raise _fail(f"must be a list of {MIN_OPTIONS} to {MAX_OPTIONS} {what}", where)
    texts = []
    for index, value in enumerate(values):
        if isinstance(value, Mapping):  # Scale's attachment objects: {"type": "text", ...}
            if value.get("type", "text") != "text":
                raise _fail(f"entry {index} is not a text attachment", where)
            value = value.get("content")
        texts.append(cast(str, _text(value, f"{where}[{index}]", MAX_TEXT)))
    # A worker's pick is stored as a text's position: equal texts would make it ambiguous.
    if len(set(texts)) != len(texts):
        raise _fail(f"the {what} must all differ: drop or merge the duplicates", where)
    return texts


def _comparison(body: Mapping[str, Any], instruction: str | None) -> dict[str, Any]:
    if body.get("fields"):
        raise _fail(
            "free-text questions are not supported: a comparison task here asks for one "
            "choice among the attachments",
            "fields",
        )
    if instruction is None:
        raise _fail(
            "is required: it is the context shown above the attachments (the query x "
            "the candidates answer)",
            "instruction",
        )
    _attachment_type(body)
    options = _option_texts(body.get("attachments"), "attachments", "text attachments")
    params: dict[str, Any] = {"attachment_type": "text", "attachments": options}
    choices = body.get("choices")
    if choices is not None:
        names = _option_texts(choices, "choices", "choice names")
        if len(names) != len(options):
            raise _fail(
                f"name each attachment: give {len(options)} choices, one per attachment, "
                "or leave choices out",
                "choices",
            )
        params["choices"] = names
    return {"params": params, "query": instruction, "options": options}


def _categorization(body: Mapping[str, Any], instruction: str | None) -> dict[str, Any]:
    if body.get("allow_multiple"):
        raise _fail("is not supported: a worker here picks exactly one category", "allow_multiple")
    _attachment_type(body)
    attachment = cast(str, _text(body.get("attachment"), "attachment", MAX_TEXT))
    options = _option_texts(body.get("categories"), "categories", "categories")
    query = f"{instruction}\n\n{attachment}" if instruction else attachment
    if len(query) > MAX_QUERY:
        raise _fail(f"instruction and attachment exceed {MAX_QUERY} characters", "attachment")
    params = {"attachment_type": "text", "attachment": attachment, "categories": options}
    return {"params": params, "query": query, "options": options}


def parse_task(task_type: str, body: Mapping[str, Any], quality: bool = False) -> TaskRequest:
    """Check a task creation body (`quality`: an evaluation or training task's)."""
    if task_type not in TASK_TYPES:
        raise _fail(
            f"task type {task_type!r} is not available here: this server speaks "
            f"{' and '.join(TASK_TYPES)} tasks",
            "type",
        )
    allowed = COMMON_KEYS | TYPE_KEYS[task_type] | (QUALITY_KEYS if quality else frozenset())
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise _fail(f"unknown parameters {unknown}; {task_type} tasks take {sorted(allowed)}", "")
    project = None if body.get("project") is None else check_name(body["project"], "project")
    batch = None if body.get("batch") is None else check_name(body["batch"], "batch")
    if project is None and batch is None:
        raise _fail("name the project the task belongs to (or its batch)", "project")
    instruction = _text(body.get("instruction"), "instruction", MAX_QUERY, required=False)
    unique_id = body.get("unique_id")
    if unique_id is not None:
        unique_id = _text(unique_id, "unique_id", MAX_NAME)
    mapped = (_comparison if task_type == COMPARISON else _categorization)(body, instruction)
    metadata = check_metadata(body.get("metadata"))
    policies = metadata.get("policies")
    if policies is not None and not (
        isinstance(policies, list)
        and len(policies) == len(mapped["options"])
        and all(isinstance(p, str) and p.strip() for p in policies)
    ):
        raise _fail(
            f"metadata.policies, when given, names the model behind each option: "
            f"{len(mapped['options'])} non-empty names",
            "metadata.policies",
        )
    request = TaskRequest(
        type=task_type,
        project=project,
        batch=batch,
        callback_url=check_url(body.get("callback_url"), "callback_url"),
        instruction=instruction,
        unique_id=unique_id,
        metadata=metadata,
        tags=_tags(body.get("tags")),
        params=mapped["params"],
        query=mapped["query"],
        options=mapped["options"],
        policies=policies,
    )
    if not quality:
        return request
    if body.get("initial_response") is not None:
        raise _fail("review-phase evaluation tasks are not supported: leave it out", "")
    expected = body.get("expected_response")
    index = expected_index(request, expected)
    return replace(request, expected_response=dict(cast(Mapping[str, Any], expected)),
                   expected_index=index)  # fmt: skip


def expected_index(request: TaskRequest, expected: Any) -> int:
    """The option an evaluation or training task's expected_response picks."""
    where = "expected_response"
    options = request.options
    if request.type == CATEGORIZATION:
        category = expected.get("category") if isinstance(expected, Mapping) else None
        if category not in options:
            raise _fail(f'must be {{"category": <one of {options}>}}', where)
        return options.index(category)
    choice = expected.get("choice") if isinstance(expected, Mapping) else None
    if isinstance(choice, int) and not isinstance(choice, bool) and 0 <= choice < len(options):
        return choice
    names = request.params.get("choices") or []
    if isinstance(choice, str) and choice in names:
        return list(names).index(choice)
    if isinstance(choice, str) and choice in options:
        return options.index(choice)
    raise _fail(
        f'must be {{"choice": <index 0 to {len(options) - 1}>}} (or a choice name or the '
        "attachment's text)",
        where,
    )


def project_params(raw: Any) -> tuple[dict[str, Any], str | None, dict[str, Any]]:
    """A project's params, the study instructions they give and the study config (`crowd`)."""
    if raw is None:
        return {}, None, {}
    if not isinstance(raw, Mapping):
        raise _fail("must be a JSON object", "params")
    unknown = sorted(set(raw) - PROJECT_PARAM_KEYS)
    if unknown:
        raise _fail(
            f"unknown project params {unknown}: give 'instruction' (shown above every task) "
            "and/or 'crowd' (the study settings: annotations_per_item, attention_rate, qc, "
            "template, ...)",
            "params",
        )
    instruction = _text(raw.get("instruction"), "params.instruction", MAX_INSTRUCTION, False)
    crowd = raw.get("crowd") or {}
    if not isinstance(crowd, Mapping):
        raise _fail("must be a JSON object of study settings", "params.crowd")
    config = dict(crowd)
    if instruction is not None:
        if config.get("instructions") is not None:
            raise _fail(
                "give the instructions once: params.instruction or params.crowd.instructions",
                "params.instruction",
            )
        config["instructions"] = instruction
    # Each task is imported on its own, and the comparison type would give a share of every
    # import (so every single task) to extra workers: tasks get annotations_per_item each.
    if config.setdefault("overlap_share", 0.0) != 0:
        raise _fail(
            "must be 0 for Scale projects: every task gets annotations_per_item answers; "
            "raise annotations_per_item instead",
            "params.crowd.overlap_share",
        )
    return dict(raw), instruction, config


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
    task_type: str, params: Mapping[str, Any], picks: Sequence[int]
) -> dict[str, Any]:
    """A completed task's response from the accepted workers' picks (option indices, in order)."""
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
