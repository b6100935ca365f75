"""The Scale-compatible API under /v1: task, project and batch bodies and queries.

The requests follow Scale's field names (https://docs.scale.com/reference), restricted to what
this server does: comparisons (answered with one of the choices, or by picking the best
attachment in a best-of-K project), categorizations and TextCollection forms.
Where a Scale field exists but is not supported here, its type says the one value allowed
and a refused value gets a message saying what to send instead. Rules between fields (the
project or the batch named, as many choices as attachments in a best-of-K project, an
expected response among the options) are checked by crowd/scale/params.py once the body is
valid.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import pydantic
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainValidator,
)
from pydantic_core import PydanticCustomError

from crowd.delivery.signed import MAX_URL, validate_url
from crowd.exceptions import ValidationError
from crowd.scale.params import (
    MAX_CHOICES,
    MAX_INSTRUCTION,
    MAX_METADATA_CHARS,
    MAX_NAME,
    MAX_OPTIONS,
    MAX_QUERY,
    MAX_RESPONSES,
    MAX_TAGS,
    MAX_TEXT,
    MIN_OPTIONS,
)
from crowd.scale.service import MAX_COMMENTS, MAX_PAGE
from crowd.web.contract import Body
from models.reward.schedule import MIN_OUTSTANDING
from tasks.form.config import VALUE_SEPARATOR

MAX_OFFSET = 10**9
MAX_FILTER_VALUES = 100
MAX_TOKEN = 200
MAX_TIME_TEXT = 64
MAX_SCHEDULE = 10**12
TaskType = Literal["comparison", "categorization", "textcollection"]
TaskStatus = Literal["pending", "completed", "canceled", "error"]
BatchStatus = Literal["staging", "in_progress", "completed"]
# scaleapi's TaskReviewStatus; pending: completed and not audited yet.
ReviewStatus = Literal["accepted", "fixed", "commented", "rejected", "pending"]


# -- field types -------------------------------------------------------------------------------
def _refuse_unless(allowed: Callable[[Any], bool], message: str) -> BeforeValidator:
    """A message saying what to send instead, for a value the field's type refuses anyway."""

    def check(value: Any) -> Any:
        if not allowed(value):
            raise PydanticCustomError("not_supported", message)
        return value

    return BeforeValidator(check)


def _not_blank(value: Any) -> Any:
    if isinstance(value, str) and value and not value.strip():
        raise PydanticCustomError("blank", "must not be blank")
    return value


def _no_slash(value: Any) -> Any:
    if isinstance(value, str) and "/" in value:
        raise PydanticCustomError("slash", "must not contain '/' (it is part of the URL)")
    return _not_blank(value)


def _strip(value: str) -> str:
    return value.strip()


# Lengths count the text as sent; it is stored without the spaces around it.
NON_BLANK = r"\S"
Name = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME, pattern=r"^[^/]*[^/\s][^/]*$",
               description="a name of 1 to 200 characters without '/' (it is part of URLs)"),
    BeforeValidator(_no_slash), AfterValidator(_strip),
]  # fmt: skip
ShortText = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME, pattern=NON_BLANK),
    BeforeValidator(_not_blank), AfterValidator(_strip),
]  # fmt: skip
OptionText = Annotated[
    str, Field(min_length=1, max_length=MAX_TEXT, pattern=NON_BLANK),
    BeforeValidator(_not_blank), AfterValidator(_strip),
]  # fmt: skip
QueryText = Annotated[
    str, Field(min_length=1, max_length=MAX_QUERY, pattern=NON_BLANK),
    BeforeValidator(_not_blank), AfterValidator(_strip),
]  # fmt: skip
InstructionText = Annotated[
    str, Field(min_length=1, max_length=MAX_INSTRUCTION, pattern=NON_BLANK),
    BeforeValidator(_not_blank), AfterValidator(_strip),
]  # fmt: skip


def _bounded_json(value: dict[str, Any]) -> dict[str, Any]:
    if len(json.dumps(value)) > MAX_METADATA_CHARS:
        raise PydanticCustomError(
            "too_long", f"must be at most {MAX_METADATA_CHARS} characters as JSON"
        )
    return value


Metadata = Annotated[
    dict[str, Any], AfterValidator(_bounded_json),
    Field(description=f"any JSON object of at most {MAX_METADATA_CHARS} characters, echoed "
                      "back with the task; `policies` names the model behind each option"),
]  # fmt: skip
URLText = Annotated[str, Field(max_length=MAX_URL, pattern=r"^[hH][tT][tT][pP][sS]?://")]


def _callback_url(value: Any) -> Any:
    """What crowd.delivery will POST to, checked now rather than when the task completes."""
    if value == "":
        return None
    if not isinstance(value, str):
        return value
    if "@" in value and "://" not in value:
        raise PydanticCustomError("email", "email callbacks are not sent here: give an http(s) URL")
    if value != value.strip():
        raise PydanticCustomError("spaces", "remove the spaces around the URL")
    try:
        return validate_url(value)
    except ValidationError as error:
        raise PydanticCustomError("url", error.message) from None


CallbackURL = Annotated[
    URLText | None,
    BeforeValidator(_callback_url, json_schema_input_type=URLText | Literal[""] | None),
    Field(description="where the completed task is POSTed (signed; see GET /v1/callback_auth_key)"),
]  # fmt: skip


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


TagList = Annotated[list[ShortText], Field(max_length=MAX_TAGS)]
Tags = Annotated[
    TagList, BeforeValidator(_one_or_many, json_schema_input_type=ShortText | TagList),
    Field(description=f"one tag or a list of at most {MAX_TAGS}; listed sorted, once each"),
]  # fmt: skip

TextOnly = Annotated[
    Literal["text"],
    _refuse_unless(lambda value: value == "text",
                   "is not supported: workers here read text, so send attachment_type 'text' "
                   "with the text itself as the attachment"),
]  # fmt: skip


class TextAttachment(Body):
    """Scale's attachment object; only text attachments are read here."""

    type: TextOnly = "text"
    content: OptionText


def _attachment_text(value: Any) -> Any:
    """An attachment object as its text: options are stored as texts."""
    if not isinstance(value, dict):
        return value
    try:
        return TextAttachment.model_validate(value).content
    except pydantic.ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        message = f"{where}: {first['msg']}" if where else first["msg"]
        raise PydanticCustomError("attachment", message) from None


Option = Annotated[
    OptionText,
    BeforeValidator(_attachment_text, json_schema_input_type=OptionText | TextAttachment),
]
Options = Annotated[list[Option], Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS)]
OptionNames = Annotated[list[OptionText], Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS)]
ChoiceNames = Annotated[list[OptionText], Field(min_length=MIN_OPTIONS, max_length=MAX_CHOICES)]
MAX_FIELDS = 50
MAX_FIELD_ID = 100
MAX_TITLE = 500
MAX_HELP = 2000
MAX_ATTACHMENT = 20_000
MAX_CHARACTERS = 10_000


def _choice(value: Any) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_CHOICES:
        return value
    if isinstance(value, str) and value.strip() and len(value) <= MAX_TEXT:
        return value.strip()
    raise PydanticCustomError(
        "choice",
        f"must be one of the choices or its index (0 to {MAX_CHOICES - 1}); in a best-of-K "
        "project the index of an attachment, a choice name or an attachment's text",
    )


Choice = Annotated[
    int | str,
    PlainValidator(_choice, json_schema_input_type=Annotated[
        int, Field(ge=0, le=MAX_CHOICES - 1)] | OptionText),
]  # fmt: skip


# -- tasks -------------------------------------------------------------------------------------
class NewTask(Body):
    project: Name | None = Field(default=None, description="the project (or give its batch)")
    batch: Name | None = Field(
        default=None, description="a batch of the project: its tasks wait for finalize"
    )
    callback_url: CallbackURL = None
    instruction: QueryText | None = None
    metadata: Metadata | None = None
    tags: Tags | None = None
    unique_id: ShortText | None = Field(
        default=None, description="the same unique_id with the same request gives the same task"
    )
    responses_required: int | None = Field(
        default=None, ge=1, le=MAX_RESPONSES, strict=True,
        description="accepted answers the task needs (default: the project's "
        "annotations_per_item)",
    )  # fmt: skip


def _field_id(value: Any) -> Any:
    """A field id as the form takes it (tasks/form/config.py): it keys the answers and a CSV
    column, so no control characters and no spaces at either end."""
    if isinstance(value, str) and (
        value.strip() != value or any(unicodedata.category(c).startswith("C") for c in value)
    ):
        raise PydanticCustomError(
            "field_id", "must have no control characters and no spaces at either end"
        )
    return value


def _one_value(value: Any) -> Any:
    if isinstance(value, str) and VALUE_SEPARATOR in value:
        raise PydanticCustomError(
            "separator",
            f"must not contain {VALUE_SEPARATOR!r}: it joins the values of a multi-choice "
            "answer (give the choice another value, keep the label)",
        )
    return value


FieldName = Annotated[
    str, Field(min_length=1, max_length=MAX_FIELD_ID, pattern=r"^\S(.*\S)?$"),
    BeforeValidator(_field_id),
]  # fmt: skip
FieldText = Annotated[str, Field(min_length=1, max_length=MAX_HELP, pattern=NON_BLANK)]


class NewComparisonTask(NewTask):
    """Compare 2 to 8 attachments: answer with one of the choices (and the fields), or, in a
    best-of-K project (params.crowd.pick = "attachment"), pick the best attachment."""

    instruction: QueryText = Field(
        description="the question (best of K: the context x the attachments answer)"
    )
    attachment_type: Literal["text", "image"] = Field(
        default="text", description="image: each attachment is an http(s) URL of an image"
    )
    attachments: Options = Field(description="shown in this order (best of K: the candidates)")
    choices: ChoiceNames | None = Field(
        default=None, description="the answers the worker picks one of (best of K: a name "
        "for each attachment, in the same order)",
    )  # fmt: skip
    fields: Annotated[dict[FieldName, FieldText], Field(max_length=MAX_FIELDS)] | None = Field(
        default=None, description="free-text questions {name: description} (not in best of K)"
    )


class NewCategorizationTask(NewTask):
    """Pick one of 2 to 8 categories for a text: a comparison item of the categories."""

    instruction: QueryText | None = Field(
        default=None, description="shown above the attachment; with it at most 20,000 characters"
    )
    attachment_type: TextOnly = "text"
    attachment: OptionText = Field(description="the text to categorize")
    categories: OptionNames = Field(description="the categories, all different")
    allow_multiple: Annotated[
        Literal[False],
        _refuse_unless(lambda value: value is False,
                       "is not supported: a worker here picks exactly one category"),
    ] = False  # fmt: skip


InitialResponse = Annotated[
    None,
    _refuse_unless(lambda value: value is None,
                   "review-phase evaluation tasks are not supported: leave initial_response out"),
]  # fmt: skip


class ExpectedChoice(Body):
    choice: Choice


class AttachmentObject(Body):
    """Scale's attachment object: the content is shown as sent."""

    type: Literal["text", "image", "html"] = Field(
        description="image: an http(s) URL; html: sanitised before it is stored"
    )
    content: Annotated[str, Field(min_length=1, max_length=MAX_ATTACHMENT, pattern=NON_BLANK)]


class FieldChoice(Body):
    label: Annotated[str, Field(min_length=1, max_length=MAX_TITLE, pattern=NON_BLANK)]
    value: Annotated[
        Annotated[str, Field(min_length=1, max_length=MAX_NAME)] | int | float | bool,
        BeforeValidator(_one_value),
    ] = Field(description="answers carry it as text (booleans as true/false); no '|'")
    hint: Annotated[str, Field(max_length=MAX_HELP)] | None = None


class ScaleField(Body):
    field_id: FieldName = Field(description="the key of the answer in each response")
    title: Annotated[str, Field(min_length=1, max_length=MAX_TITLE, pattern=NON_BLANK)]
    description: Annotated[str, Field(max_length=MAX_HELP)] | None = None
    hint: Annotated[str, Field(max_length=MAX_HELP)] | None = None
    required: bool | None = Field(default=None, description="default: true (a category field "
                                  "with min_choices 0: false)")  # fmt: skip


class CategoryField(ScaleField):
    """One or more of the choices"""

    type: Literal["category"]
    choices: Annotated[list[FieldChoice], Field(min_length=MIN_OPTIONS, max_length=MAX_CHOICES)]
    min_choices: int | None = Field(default=None, ge=0, le=MAX_CHOICES, strict=True)
    max_choices: int | None = Field(default=None, ge=1, le=MAX_CHOICES, strict=True)


class TextField(ScaleField):
    """Free text"""

    type: Literal["text"]
    max_characters: int | None = Field(default=None, ge=1, le=MAX_CHARACTERS, strict=True)
    min_characters: int | None = Field(default=None, ge=0, le=MAX_CHARACTERS, strict=True)


class NewTextCollectionTask(NewTask):
    """A form over attachments: category and text fields, answered by each respondent."""

    instruction: QueryText | None = Field(default=None, description="shown first")
    attachments: Annotated[list[AttachmentObject], Field(min_length=1, max_length=10)]
    fields: Annotated[
        list[Annotated[CategoryField | TextField, Field(discriminator="type")]],
        Field(min_length=1, max_length=MAX_FIELDS),
    ]


ExpectedValue = Annotated[str, Field(min_length=1, max_length=MAX_NAME)] | int | float | bool


class NewTextCollectionQualityTask(NewTextCollectionTask):
    """A TextCollection task with known answers: an evaluation (gold) or training item."""

    expected_response: Annotated[
        dict[FieldName, ExpectedValue | Annotated[list[ExpectedValue], Field(max_length=50)]],
        Field(min_length=1, description="{field_id: value or values} of category fields"),
    ]


class ExpectedCategory(Body):
    category: OptionText


class NewComparisonQualityTask(NewComparisonTask):
    """A comparison task with its known answer: an evaluation (gold) or training item."""

    expected_response: ExpectedChoice
    initial_response: InitialResponse = None


class NewCategorizationQualityTask(NewCategorizationTask):
    """A categorization task with its known answer: an evaluation (gold) or training item."""

    expected_response: ExpectedCategory
    initial_response: InitialResponse = None


class Audit(Body):
    accepted: bool = Field(strict=True, description="true accepts the response, false rejects it")
    comments: Annotated[str, Field(max_length=MAX_COMMENTS)] | None = None


class CancelQuery(Body):
    clear_unique_id: bool = Field(
        default=False, description="free the task's unique_id for a new task"
    )


# A date first: what scaleapi documents and ISO 8601's extended format start with.
TIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"


def _scale_time(value: Any) -> datetime | None:
    """'YYYY-MM-DD HH:MM:SS.mmmmmm' (what scaleapi documents) or ISO 8601; naive is UTC."""
    if value is None or value == "":
        return None
    try:
        if not isinstance(value, str) or len(value) > MAX_TIME_TEXT:
            raise ValueError(value)
        if not re.match(TIME_PATTERN, value.strip()):
            raise ValueError(value)
        parsed = datetime.fromisoformat(value.strip())
        # In UTC here, as storage compares it: the first and last days can leave the calendar.
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise PydanticCustomError(
            "time", "must be a time like '2026-01-31 12:00:00.000000' (UTC) or ISO 8601"
        ) from None


TimeText = Annotated[str, Field(max_length=MAX_TIME_TEXT, pattern=TIME_PATTERN)]
Time = Annotated[
    datetime | None,
    PlainValidator(_scale_time, json_schema_input_type=TimeText | Literal[""]),
    Field(description="'YYYY-MM-DD HH:MM:SS.mmmmmm' in UTC, or ISO 8601; empty: no bound"),
]  # fmt: skip


def _comma_list(raw_limit: int) -> BeforeValidator:
    """Repeated keys (what requests sends for a list) or comma-separated values, or both."""

    def split(value: Any) -> Any:
        values = value if isinstance(value, list) else [value]
        parts = []
        for item in values:
            if not isinstance(item, str):
                return value
            if len(item) > raw_limit:
                raise PydanticCustomError("too_long", f"must be at most {raw_limit} characters")
            parts.extend(item.split(","))
        return parts

    return BeforeValidator(split)


FilterValue = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
Filter = Annotated[
    list[FilterValue], Field(max_length=MAX_FILTER_VALUES), _comma_list(MAX_NAME * 10),
]  # fmt: skip
ReviewFilter = Annotated[
    list[ReviewStatus], Field(max_length=MAX_FILTER_VALUES), _comma_list(MAX_NAME),
]  # fmt: skip
QueryName = Annotated[str, Field(max_length=MAX_NAME, description="a name; empty: any")]


class TasksQuery(Body):
    project: QueryName | None = None
    batch: QueryName | None = None
    status: TaskStatus | None = None
    type: TaskType | None = None
    start_time: Time = None
    end_time: Time = None
    created_after: Time = None
    created_before: Time = None
    completed_after: Time = None
    completed_before: Time = None
    updated_after: Time = None
    updated_before: Time = None
    # Lists default to empty rather than None: a list field is what takes repeated keys.
    tags: Filter = Field(default_factory=list, description="tasks with every one of these tags")
    unique_id: Filter = Field(default_factory=list, description="tasks with one of these ids")
    customer_review_status: ReviewFilter = Field(
        default_factory=list, description="tasks audited so (pending: completed, not audited yet)"
    )
    limit: int = Field(default=MAX_PAGE, ge=1, le=MAX_PAGE)
    next_token: str | None = Field(
        default=None, max_length=MAX_TOKEN, description="the next_token of the previous page"
    )
    include_attachment_url: bool | None = Field(
        default=None, description="accepted for scaleapi; attachments are texts here"
    )
    limited_response: bool = Field(
        default=False, description="only task_id, status, metadata and project of each task"
    )


class BatchesQuery(Body):
    project: QueryName | None = None
    status: BatchStatus | None = None
    start_time: Time = None
    end_time: Time = None
    limit: int = Field(default=MAX_PAGE, ge=1, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    exclude_archived: bool | None = Field(default=None, description="no batch is archived here")


# -- projects and batches ----------------------------------------------------------------------
class ProjectParams(Body):
    instruction: InstructionText | None = Field(
        default=None, description="shown above every task (the study's instructions)"
    )
    crowd: dict[str, Any] | None = Field(
        default=None,
        description="the study settings of the project's HIT type (form; comparison for "
        "categorization and best of K): annotations_per_item, attention_rate, qc, ...; "
        '"pick": "attachment" makes a comparison project best of K',
    )


class NewProject(Body):
    """A project and the study its tasks become items of."""

    name: Name
    type: Annotated[
        TaskType,
        _refuse_unless(lambda value: value in ("comparison", "categorization", "textcollection"),
                       "this task type is not available here: this server speaks comparison, "
                       "categorization and textcollection tasks"),
    ]  # fmt: skip
    params: ProjectParams | None = None
    rapid: bool = Field(default=False, strict=True,
                        description="stored and echoed; served like any project here")  # fmt: skip
    studio: bool = Field(default=False, strict=True)
    datasetId: Annotated[  # Scale's name
        None,
        _refuse_unless(lambda value: value is None,
                       "Nucleus datasets are not available here: leave it out"),
    ] = None  # fmt: skip


class NewBatch(Body):
    """A batch: its tasks wait until it is finalized."""

    project: Name
    name: Name
    callback: Annotated[
        Literal[""] | None,
        # Refused rather than stored and never sent: a client would wait for it forever.
        _refuse_unless(lambda value: not value,
                       "batch callbacks are not supported yet: give each task a callback_url, "
                       "or poll batch_status"),
    ] = None  # fmt: skip
    calibration_batch: bool = Field(
        default=False, strict=True, description="stored and echoed; its tasks are served like "
        "any batch's (for known answers, use evaluation and training tasks)",
    )  # fmt: skip
    self_label_batch: bool = Field(
        default=False, strict=True, description="stored and echoed; its tasks are served like "
        "any batch's",
    )  # fmt: skip
    metadata: Metadata | None = None


class ScheduleQuery(Body):
    step: float = Field(ge=0, le=MAX_SCHEDULE, allow_inf_nan=False,
                        description="the policy step n")  # fmt: skip
    initial: int = Field(ge=0, le=MAX_SCHEDULE, description="N0: labels wanted up front")
    total: int = Field(ge=0, le=MAX_SCHEDULE, description="N: labels wanted in all")
    policy_steps: int = Field(ge=1, le=MAX_SCHEDULE, description="N_pi: steps of the run")
    min_outstanding: int = Field(default=MIN_OUTSTANDING, ge=0, le=MAX_SCHEDULE,
                                 description="label requests to keep open")  # fmt: skip
