"""The replies of the Scale-compatible API under /v1: tasks, projects, batches and errors.

Shaped as scaleapi reads them (https://docs.scale.com/reference), with where each object
lives here (its study, its item) under `crowd`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, RootModel, SerializerFunctionWrapHandler, model_serializer
from pydantic.json_schema import SkipJsonSchema

from crowd.web.contract import FieldProblem, Reply
from crowd.web.schemas.scale import AttachmentObject, BatchStatus, TaskStatus, TaskType


class ScaleError(Reply):
    """Every error of the Scale-compatible API"""

    # scaleapi reads only `error` and knows 400 (not 422) for an invalid request; the API
    # keys are an experimenter's own, so nothing here is forbidden (403) rather than missing.
    answered_as: ClassVar[dict[int, int | None]] = {422: 400, 403: None}

    status_code: int = Field(ge=400, le=599, description="the HTTP status again")
    error: str = Field(description="what went wrong and how to fix it")
    type: str = Field(description="the kind of error, e.g. ValidationError or NotFound")
    field: str | None = Field(default=None, description="the field to fix, when one is at fault")
    errors: list[FieldProblem] | None = Field(
        default=None, description="every problem found, when the body or query was invalid"
    )


class ScaleReply(Reply):
    """A Scale object: optional keys it does not have are left out, as Scale does."""

    # No return annotation: pydantic would describe the reply by it instead of the fields.
    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler):
        data = handler(self)
        fields = type(self).model_fields
        return {key: value for key, value in data.items()
                if key in self.model_fields_set or fields[key].is_required()}  # fmt: skip


class TaskCrowd(ScaleReply):
    """Where the task lives here: its study, its item and its kind"""

    study_id: int = Field(description="the project's study")
    item_id: int = Field(description="the task's item in that study")
    kind: Literal["real", "gold", "training"] = Field(
        description="real: a customer task; gold: an evaluation task; training: a training task"
    )


class ComparisonParams(ScaleReply):
    """A comparison task's params: the attachments, the choices (best of K: the attachments'
    names) and the free-text fields"""

    attachment_type: Literal["text", "image"]
    attachments: list[str]
    choices: list[str] | None = None
    fields: dict[str, str] | None = None
    responses_required: int | None = None


class CategorizationParams(ScaleReply):
    """A categorization task's params: the text and its categories"""

    attachment_type: Literal["text"]
    attachment: str
    categories: list[str]
    responses_required: int | None = None


class TextCollectionParams(ScaleReply):
    """A TextCollection task's params: its attachments and fields, as sent"""

    attachments: list[AttachmentObject]
    fields: list[dict[str, Any]] = Field(
        description="as sent: category and text fields (see NewTextCollectionTask)"
    )
    responses_required: int | None = None


class ComparisonResponse(ScaleReply):
    """A completed best-of-K comparison: the majority pick of the accepted answers"""

    choice: int = Field(description="the index of the attachment most accepted answers picked")
    chosen: str = Field(description="its text")
    label: str | None = Field(default=None, description="its choice name, when named")
    votes: list[int] = Field(description="accepted answers per attachment")
    responses: int = Field(description="accepted answers in all")
    agreement: float = Field(description="the winner's share of them")


def _absent(description: str) -> Any:
    """A key left out where it does not apply, never null: declared without a null or a
    default (`Absent` keeps None out of the schema; ScaleReply leaves the unset key out)."""

    def no_default(schema: dict[str, Any]) -> None:
        schema.pop("default", None)

    return Field(default=None, description=description, json_schema_extra=no_default)


Absent = SkipJsonSchema[None]


class ChoiceResponse(ScaleReply):
    """A completed comparison: the choice most accepted answers gave, and the fields (a
    comparison without choices has only its fields, as Scale's)"""

    choice: str | Absent = _absent("the chosen choice; left out where the task has no choices")
    votes: dict[str, int] | Absent = _absent("accepted answers per choice; left out likewise")
    responses: int = Field(description="accepted answers in all")
    agreement: float | Absent = _absent("the choice's share of them; left out likewise")
    fields: dict[str, str | None] | Absent = _absent(
        "the fields as answered by the first worker who gave the choice (without choices: by "
        "the first worker); left out where the task has no fields"
    )


FieldAnswer = list[str] | str | None


class TextCollectionResponse(ScaleReply):
    """A completed TextCollection task: every accepted respondent's answers"""

    responses: list[dict[str, FieldAnswer]] = Field(
        description="one object per respondent, keyed by field_id in the task's field order: "
        "a category's chosen values (as text), a text field's text"
    )
    annotations: dict[str, FieldAnswer] = Field(
        description="per field, the answer most respondents gave (ties: the first given)"
    )


class CategorizationResponse(ScaleReply):
    """A completed categorization: the majority category"""

    category: str = Field(description="the category most accepted answers picked")
    votes: dict[str, int] = Field(description="accepted answers per category")
    responses: int
    agreement: float


class AuditRecord(ScaleReply):
    """A customer's acceptance or rejection of the response"""

    accepted: bool
    comments: str | None
    source: Literal["customer"]
    created_at: str


class Task(ScaleReply):
    """A task in Scale's shape, with where it lives here under `crowd`"""

    task_id: str
    type: TaskType
    status: TaskStatus
    created_at: str
    updated_at: str
    instruction: str | None
    params: ComparisonParams | CategorizationParams | TextCollectionParams
    metadata: dict[str, Any]
    tags: list[str]
    callback_url: str = Field(description="empty when there is none")
    project: str
    is_test: bool
    audits: list[AuditRecord]
    callback_succeeded: bool | None = Field(
        description="null until the callback got a 2xx (true) or was given up (false)"
    )
    crowd: TaskCrowd
    unique_id: str | None = None
    batch: str | None = None
    customer_review_status: Literal["accepted", "rejected"] | None = None
    completed_at: str | None = None
    response: (ComparisonResponse | ChoiceResponse | CategorizationResponse
               | TextCollectionResponse | None) = Field(
        default=None, description="made of the accepted answers, once completed"
    )  # fmt: skip


class QualityTask(Task):
    """An evaluation or training task, with its expected response"""

    id: str = Field(description="the task_id again (scaleapi's EvaluationTask reads it)")
    expected_response: dict[str, Any] | None = Field(
        description="as sent: {choice} of a comparison, {category} of a categorization, "
        "{field_id: values} of a TextCollection"
    )


class AnyTask(RootModel[QualityTask | Task]):
    """A task; an evaluation or training task also carries id and expected_response"""


class LimitedTask(ScaleReply):
    """A task of a limited_response listing"""

    task_id: str
    status: TaskStatus
    metadata: dict[str, Any]
    project: str


class TaskList(ScaleReply):
    """A page of customer tasks, oldest first"""

    docs: list[Task | LimitedTask]
    total: int = Field(description="tasks matching the filters, on every page")
    limit: int
    offset: int = Field(description="tasks before this page")
    has_more: bool
    next_token: str | None = Field(description="send it back for the next page")


class StudySummary(ScaleReply):
    """The project's study: how its tasks are served"""

    study_id: int
    hit_type: str
    study_status: Literal["draft", "published", "paused", "completed"]
    providers: list[str]
    annotations_per_item: int | None


class ProjectParamsReply(ScaleReply):
    """A project's params as sent"""

    instruction: str | None = None
    crowd: dict[str, Any] | None = Field(default=None, description="the study settings sent")


class ParamVersion(ProjectParamsReply):
    """A version of the project's params"""

    version: int
    created_at: str | None


class Project(ScaleReply):
    """A project and its study"""

    type: TaskType
    name: str
    params: ProjectParamsReply
    param_history: list[ParamVersion] = Field(description="scaleapi reads the latest params here")
    created_at: str | None
    rapid: bool = Field(description="as created; served like any project here")
    study_id: int
    crowd: StudySummary


class Projects(RootModel[list[Project]]):
    """Your projects, oldest first"""


class TaskCounts(ScaleReply):
    """Tasks by status"""

    pending: int
    completed: int
    canceled: int
    error: int


class Batch(ScaleReply):
    """A batch and its tasks by status"""

    name: str
    project: str
    status: BatchStatus = Field(
        description="staging until finalized, then in_progress until no task is pending"
    )
    created_at: str | None
    finalized_at: str | None
    metadata: dict[str, Any]
    callback: str = Field(description="always empty: batch callbacks are not sent yet")
    calibration_batch: bool = Field(description="as created")
    self_label_batch: bool = Field(description="as created")
    tasks: TaskCounts


class BatchState(TaskCounts):
    """The batch's status and its customer tasks by status"""

    status: BatchStatus


class BatchList(ScaleReply):
    """A page of batches, oldest first"""

    docs: list[Batch]
    totalDocs: int  # Scale's name
    limit: int
    offset: int
    has_more: bool


class Schedule(ScaleReply):
    """The labels the schedule wants before this step and the tasks to send now"""

    project: str
    step: float
    initial: int
    total: int
    policy_steps: int
    min_outstanding: int
    labels_wanted: int = Field(description="l(n) = N0 + (N - N0)(1 - (1 - n/N_pi)^2), rounded up")
    labelled: int = Field(description="the project's completed tasks")
    outstanding: int = Field(description="its pending tasks")
    requests_to_send: int


class CallbackAuthKey(ScaleReply):
    """The secret every callback carries"""

    callback_auth_key: str
    header: Literal["scale-callback-auth"] = Field(description="the header it comes in")
