"""The worker's API: joining, the assignment views, steps, explanations and hand-over codes.

A step's and an explanation's own fields belong to the study's HIT type (a boundary guess
is a `choice`, a Likert answer a `rating`), which checks them as it always has; these models
declare what every type shares and bound the rest: JSON scalars of bounded size, or short
lists of them, and a bounded number of fields.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    MISSING,
    AfterValidator,
    ConfigDict,
    Field,
    PlainValidator,
    RootModel,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from crowd.platforms.providers import PROVIDERS
from crowd.quality.standing import TYPING_FIELDS
from crowd.storage import AssignmentState
from crowd.web.contract import Body, Reply
from tasks.boundary.hit import MAX_EXPLANATION_CHARS
from tasks.boundary.reasons import REASON_TAGS
from tasks.comparison.items import MAX_K

MAX_NAME = 40
MAX_STEP = 1000
MAX_SIM_SECONDS = 86_400
# What a HIT type's own fields may hold: enough for any page's free text (boundary's
# explanation box takes 2,000 characters), never an unbounded body.
NAME_CHARS = "letters, digits, spaces, '_', '-' or '.'"


def _known_provider(name: str) -> str:
    if name not in PROVIDERS:
        raise PydanticCustomError(
            "unknown_provider", "unknown provider {name!r}: the providers are {known}",
            {"name": name, "known": ", ".join(PROVIDERS)},
        )  # fmt: skip
    return name


def _provider_names(schema: dict[str, Any]) -> None:
    # Read when /openapi.json is built, so a provider registered later is listed too.
    schema["enum"] = list(PROVIDERS)


ProviderName = Annotated[
    str,
    Field(max_length=50, json_schema_extra=_provider_names),
    AfterValidator(_known_provider),
]


def _player_name(name: str | None) -> str | None:
    """None for no name; else the name without surrounding spaces, in the allowed letters."""
    if name is None or name == "":
        return None
    cleaned = name.strip()
    if not cleaned:
        raise PydanticCustomError("name", "a player name is 1 to {n} characters", {"n": MAX_NAME})
    if not all(ch.isalnum() or ch in " _-." for ch in cleaned):
        raise PydanticCustomError("name", "use {chars} in names", {"chars": NAME_CHARS})
    return cleaned


class JoinBody(Body):
    """Open-web providers (local) take anyone; the others need an experimenter's API key and
    the worker's id on that platform."""

    model_config = ConfigDict(strict=True)

    provider: ProviderName = Field(default="local", description="where the worker comes from")
    name: Annotated[str | None, AfterValidator(_player_name)] = Field(
        default=None, max_length=MAX_NAME,
        description=f"the player's name on leaderboards: up to {MAX_NAME} {NAME_CHARS}",
    )  # fmt: skip
    external_id: str | None = Field(
        default=None, min_length=1, max_length=200,
        description="the worker's id on the platform; needed (and only read) for providers "
        "without open sign-up",
    )  # fmt: skip


class Joined(Reply):
    """The new (or returning) worker and its signed token, also set as the crowd_worker cookie"""

    worker_id: int
    name: str | None
    provider: str
    worker_token: str = Field(description="send it as the X-Crowd-Worker header")


class WorkerReply(Reply):
    """The worker the token names"""

    worker_id: int
    name: str | None
    provider: str


class NextBody(Body):
    model_config = ConfigDict(strict=True)

    category: str | None = Field(
        default=None, max_length=100,
        description="only items of this category (empty or null: any item)",
    )  # fmt: skip


# The fields of the built-in HIT types' steps (each type takes only its own: see
# HitType.step_fields); bounded here, judged by the type (a choice it cannot take is a 409).
BOUNDARY_CHOICES = ("human", "machine")


def _choice(value: Any) -> Any:
    # One validator, not a union: a refusal names `choice`, not the union's member.
    if value in BOUNDARY_CHOICES or (type(value) is int and 0 <= value < MAX_K):
        return value
    raise PydanticCustomError(
        "choice",
        "human or machine (a boundary passage), or the position 0 to {last} of the picked "
        "candidate (a comparison)",
        {"last": MAX_K - 1},
    )


Choice = Annotated[
    Any,
    PlainValidator(_choice),
    WithJsonSchema({"anyOf": [{"enum": list(BOUNDARY_CHOICES)},
                              {"type": "integer", "minimum": 0, "maximum": MAX_K - 1}]}),
]  # fmt: skip
MAX_RATING = 10**6
# A form's answers (tasks/form): a field id to a rating, a category's value texts, a text or a
# rank's indexes; bounded like the form's declarations (tasks/form/config.py).
MAX_FORM_FIELDS = 50
MAX_FORM_TEXT = 10_000
MAX_FORM_LIST = 50


def _form_value(value: Any) -> Any:
    scalar = (str, int, float, bool)
    if value is None or (type(value) in scalar and len(str(value)) <= MAX_FORM_TEXT):
        return value
    if (
        type(value) is list
        and len(value) <= MAX_FORM_LIST
        and all(type(v) in scalar and len(str(v)) <= MAX_FORM_TEXT for v in value)
    ):
        return value
    raise PydanticCustomError(
        "form_value",
        "a field's answer is a number, a text of at most {chars} characters, null, or a list "
        "of at most {n} of them",
        {"chars": MAX_FORM_TEXT, "n": MAX_FORM_LIST},
    )


FormValue = Annotated[
    Any,
    PlainValidator(_form_value),
    WithJsonSchema({"anyOf": [
        {"type": "null"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
        {"type": "string", "maxLength": MAX_FORM_TEXT},
        {"type": "array", "maxItems": MAX_FORM_LIST,
         "items": {"type": ["string", "integer", "number", "boolean"]}},
    ]}),
]  # fmt: skip


class StepBody(Body):
    """One step of the worker's flow, e.g. {"step": 2, "choice": "human"} on a boundary
    passage, {"step": 0, "rating": 4} on a Likert text, {"step": 0, "choice": 2} on a
    comparison (the position shown), {"step": 0, "fields": {"quality": 4}} on a form."""

    model_config = ConfigDict(strict=True)

    step: int = Field(
        ge=0, le=MAX_STEP,
        description="the step the page shows (task.step): a retried step changes nothing",
    )  # fmt: skip
    sim_seconds: float | None = Field(
        default=None, ge=0, le=MAX_SIM_SECONDS,
        description="how long the step took, from simulated workers (provider sim) only",
    )  # fmt: skip
    choice: Choice | None = Field(
        default=None,
        description="boundary: human (reveal the next sentence) or machine (from here on); "
        "comparison: the position of the picked candidate as shown",
    )
    rating: int | None = Field(
        default=None, ge=-MAX_RATING, le=MAX_RATING,
        description="likert: the rating of the question on the page, within its scale",
    )  # fmt: skip
    fields: dict[Annotated[str, Field(min_length=1, max_length=100)], FormValue] | None = Field(
        default=None, max_length=MAX_FORM_FIELDS,
        description="form: each shown field's answer by field id (a rating, a category's "
        "values, a text, a rank's indexes best first); hidden fields left out",
    )  # fmt: skip

    def action(self) -> dict[str, Any]:
        """The fields the client sent, as the plain mapping the domain functions take."""
        return self.model_dump(exclude_unset=True)


class Typing(Body):
    """How the explanation was entered, counted by the page (quality control reads it)."""

    model_config = ConfigDict(strict=True)

    keys: int = Field(default=0, ge=0, le=TYPING_FIELDS["keys"])
    pastes: int = Field(default=0, ge=0, le=TYPING_FIELDS["pastes"])
    pasted_chars: int = Field(default=0, ge=0, le=TYPING_FIELDS["pasted_chars"])
    typing_ms: int = Field(
        default=0, ge=0, le=TYPING_FIELDS["typing_ms"],
        description="from the first key or paste to the last change",
    )  # fmt: skip


class ExplanationBody(Body):
    """Why the worker answered so, e.g. {"explanation": "it repeats itself", "reasons":
    ["repetition"]} on a boundary guess."""

    model_config = ConfigDict(strict=True)

    explanation: str | None = Field(default=None, max_length=MAX_EXPLANATION_CHARS)
    reasons: list[Literal[REASON_TAGS]] | None = Field(  # type: ignore[valid-type]
        default=None, max_length=len(REASON_TAGS), description="reason tags of the guess"
    )
    typing: Typing | None = None

    def action(self) -> dict[str, Any]:
        """The fields the client sent, as the plain mapping the domain functions take."""
        return self.model_dump(exclude_unset=True)


class Completion(Reply):
    """How the page hands the platform session's work back to the crowd platform"""

    kind: Literal["form", "code", "none"] = Field(
        description="form: post `fields` to `action` (MTurk); code: show `code` and link to "
        "`url` (Prolific); none: nothing to hand over"
    )
    items_done: int = Field(description="the answers stored in this platform session")
    action: str | MISSING = MISSING
    fields: dict[str, str] | MISSING = MISSING
    code: str | MISSING = MISSING
    url: str | MISSING = MISSING


class AssignmentView(Reply):
    """What the worker's page may see of an assignment: the task while it is open, the
    feedback once the answer is stored (never the expected answer before)"""

    assignment_id: int
    study_id: int
    state: AssignmentState
    task: dict[str, Any] | MISSING = Field(
        default=MISSING,
        description="the HIT type's page view, with its `step`; while the assignment is open "
        "or its answer needs a follow-up",
    )
    answered: Literal[True] | MISSING = Field(default=MISSING,
                                              description="present once the answer is stored")
    needs_followup: bool | MISSING = Field(
        default=MISSING, description="the answer waits for an explanation before the feedback"
    )
    feedback: dict[str, Any] | MISSING = Field(
        default=MISSING, description="the HIT type's reveal, once the answer is complete"
    )
    item_number: int | MISSING = Field(
        default=MISSING, ge=1,
        description="which item of the worker's session this is, from 1 (in replies to next)",
    )  # fmt: skip
    items_total: int | MISSING = Field(
        default=MISSING, ge=1,
        description="how many items the worker gets: a platform session's items, or on the "
        "open web those answered and still open to them (in replies to next)",
    )  # fmt: skip


class WorkDone(Reply):
    """Nothing more for this worker here; on a crowd platform, how to hand the work in"""

    done: Literal[True]
    message: str
    completion: Completion | MISSING = MISSING


class NextReply(RootModel[AssignmentView | WorkDone]):
    """The worker's open or new assignment, or `done` when nothing is left for them"""
