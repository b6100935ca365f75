"""Scale task requests checked and mapped onto our items, and responses in Scale's shape.

Pure: no database, no Flask. Both Scale task types we speak become items of a `comparison`
study (pick the best of K), because both ask a worker to pick exactly one of a few texts:

- comparison: `instruction` is the context shown to the worker (the item's query, x in the
  comparison paper), `attachments` are the K candidates (y0..yK-1, in this order), optional
  `choices` name them. The response is `{"choice": <index>, "chosen": <text>, ...}`.
- categorization: `attachment` (with the `instruction` above it, when given) is the item's
  query and the `categories` are the candidates. The response is `{"category": <name>}`.

The bodies are checked by their models (crowd/web/schemas/scale.py: types, lengths, unknown
keys); what is checked here are the rules between fields. Scale's field names are kept in
every message, so an error says which field of the request to fix.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

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


def _distinct(texts: list[str], where: str, what: str) -> list[str]:
    # A worker's pick is stored as a text's position: equal texts would make it ambiguous.
    if len(set(texts)) != len(texts):
        raise _fail(f"the {what} must all differ: drop or merge the duplicates", where)
    return texts


def _comparison(fields: Mapping[str, Any]) -> dict[str, Any]:
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
    return {"params": params, "query": fields["instruction"], "options": options}


def _categorization(fields: Mapping[str, Any]) -> dict[str, Any]:
    instruction, attachment = fields.get("instruction"), fields["attachment"]
    options = _distinct(list(fields["categories"]), "categories", "categories")
    query = f"{instruction}\n\n{attachment}" if instruction else attachment
    if len(query) > MAX_QUERY:
        raise _fail(f"instruction and attachment exceed {MAX_QUERY} characters", "attachment")
    params = {"attachment_type": "text", "attachment": attachment, "categories": options}
    return {"params": params, "query": query, "options": options}


def parse_task(task_type: str, fields: Mapping[str, Any], quality: bool = False) -> TaskRequest:
    """The item a task becomes, from a body its model checked (`quality`: an evaluation or
    training task's); what is checked here are the rules between fields."""
    if task_type not in TASK_TYPES:
        raise _fail(
            f"task type {task_type!r} is not available here: this server speaks "
            f"{' and '.join(TASK_TYPES)} tasks",
            "type",
        )
    project, batch = fields.get("project"), fields.get("batch")
    if project is None and batch is None:
        raise _fail("name the project the task belongs to (or its batch)", "project")
    mapped = (_comparison if task_type == COMPARISON else _categorization)(fields)
    metadata = dict(fields.get("metadata") or {})
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
        callback_url=fields.get("callback_url"),
        instruction=fields.get("instruction"),
        unique_id=fields.get("unique_id"),
        metadata=metadata,
        tags=sorted(set(fields.get("tags") or [])),
        params=mapped["params"],
        query=mapped["query"],
        options=mapped["options"],
        policies=policies,
    )
    if not quality:
        return request
    expected = dict(fields["expected_response"])
    return replace(request, expected_response=expected,
                   expected_index=expected_index(request, expected))  # fmt: skip


def expected_index(request: TaskRequest, expected: Mapping[str, Any]) -> int:
    """The option an evaluation or training task's expected_response picks."""
    where = "expected_response"
    options = request.options
    if request.type == CATEGORIZATION:
        category = expected.get("category")
        if category not in options:
            raise _fail(f'must be {{"category": <one of {options}>}}', where)
        return options.index(category)
    choice = expected.get("choice")
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


def project_params(
    params: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], str | None, dict[str, Any]]:
    """A project's params, the study instructions they give and the study config (`crowd`)."""
    if params is None:
        return {}, None, {}
    instruction = params.get("instruction")
    config = dict(params.get("crowd") or {})
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
    return dict(params), instruction, config


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
