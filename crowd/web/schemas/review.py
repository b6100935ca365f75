"""Quality control over the API: the workers table, a worker's history, reviewer actions,
the audit log and aggregated labels."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from crowd.review import MAX_BONUS, MAX_TEXT
from crowd.web.contract import Body, Reply
from crowd.web.schemas.studies import Count, Id, Time

# crowd.review.ACTIONS, BULK_ACTIONS and SORT_KEYS, crowd.quality.labels.METHODS (a test keeps each
# the same as the domain's).
Action = Literal[
    "approve", "reject", "soft_reject", "block", "unblock", "bonus", "note", "notify", "qualify"
]
BulkActionName = Literal["approve", "reject", "soft_reject", "block", "note"]
SortKey = Literal[
    "worker", "responses", "gold_accuracy", "gold_mean", "agreement", "stopped_reading_prob",
    "attention_failed", "too_fast_share", "constant_share", "longest_run", "flags", "status",
]  # fmt: skip
Sort = Literal[
    "worker", "responses", "gold_accuracy", "gold_mean", "agreement", "stopped_reading_prob",
    "attention_failed", "too_fast_share", "constant_share", "longest_run", "flags", "status",
    "-worker", "-responses", "-gold_accuracy", "-gold_mean", "-agreement",
    "-stopped_reading_prob", "-attention_failed", "-too_fast_share", "-constant_share",
    "-longest_run", "-flags", "-status",
]  # fmt: skip
Method = Literal[
    "majority_vote", "dawid_skene", "mace", "ordinal_mean", "first_change", "bradley_terry"
]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
WorkerStatus = Literal[
    "blocked", "approved", "rejected", "soft_rejected", "excluded", "stopped", "flagged", "active"
]
Share = Annotated[float, Field(ge=0, le=1)]

# Which actions take each optional field: any other action given it is refused, naming it.
TAKEN_BY: dict[str, tuple[str, ...]] = {
    "amount": ("bonus",),
    "token": ("bonus",),
    "note": ("note",),
    "message": ("notify",),
    "subject": ("notify",),
    "qualification": ("qualify",),
    "value": ("qualify",),
}


def _taken_by_action(value: Any, info: ValidationInfo) -> Any:
    name = info.field_name or ""
    action = info.data.get("action")
    # With no valid action the action's own error is the one to report.
    if value is not None and action is not None and action not in TAKEN_BY[name]:
        raise PydanticCustomError(
            "not_for_action",
            "goes with the {actions} action, not {action}",
            {"actions": " or ".join(TAKEN_BY[name]), "action": action},
        )
    return value


# -- the workers table and history -----------------------------------------------------------
class WorkersQuery(Body):
    sort: Sort = Field(default="worker", description="a column; a leading - sorts descending")


class WorkerRow(Reply):
    """One worker's QC evidence, standing and decision in the study"""

    worker_id: Id
    worker: str = Field(description="provider:external id")
    provider: str
    responses: Count
    gold_n: Count | None
    gold_accuracy: Share | None
    gold_mean: Share | None
    agreement: Share | None = Field(
        description="estimated accuracy against the crowd (qc.agreement); None until some of "
        "the worker's items were answered by enough others"
    )
    agreement_threshold: Share | None = Field(
        description="the accuracy below which the worker is closer to chance than to the crowd"
    )
    agreement_n: Count | None = Field(description="answers the accuracy against the crowd is on")
    collusion_partners: Count | None = Field(
        description="workers who share answers with this one beyond chance (qc.collusion)"
    )
    stopped_reading_prob: Share | None = Field(
        description="the probability that the worker is not reading now, from every judged "
        "answer and attention check, with one possible switch (qc.drift); None before any"
    )
    attention_checks: Count | None
    attention_failed: Count | None
    too_fast_share: Share | None
    constant_share: Share | None
    longest_run: Count | None
    repeated_explanations: Count | None
    pasted_n: Count | None
    typed_too_fast_n: Count | None
    rule_hits: list[str] = Field(description="the QC rules that fire on the worker now")
    flags: list[str]
    serving: Literal["active", "stopped"]
    excluded_by: str | None
    qualification: Literal["passed", "failed"] | None
    decision: Literal["approved", "rejected", "soft_rejected"] | None
    blocked: bool
    status: WorkerStatus


class WorkerTable(Reply):
    """The study's workers"""

    workers: list[WorkerRow]


class WorkerAnswer(Reply):
    """One answer of the worker, with its QC facts"""

    response_id: Id
    item: str = Field(description="the item's id in the study")
    kind: Literal["real", "gold", "attention", "training"]
    answer: dict[str, Any] = Field(description="the answer in the HIT type's terms")
    surface: str | None = Field(description="the answer as the page showed it")
    seconds: float | None
    gold_accuracy: Share | None
    attention_passed: bool | None
    signals: list[str] = Field(description="behaviour signals seen (e.g. pasted)")
    explanation: str | None
    created_at: Time


class AuditEntry(Reply):
    """Who did what to which worker, when and why"""

    id: Id
    at: Time
    actor: str = Field(description="rule:<name>, reviewer:<name>, experimenter:<name>, system")
    action: str
    worker_id: Id | None
    reason: str
    details: dict[str, Any]


class BonusPaid(Reply):
    """A bonus paid to the worker"""

    amount: str = Field(description="decimal text, e.g. 0.50")
    reason: str
    actor: str
    at: Time


class WorkerHistory(Reply):
    """A worker's answers in the study, oldest first, their standing and audit trail"""

    worker_id: Id
    worker: str
    status: WorkerStatus
    evidence: dict[str, Any] = Field(description="the QC measures of the worker in the study")
    rule_hits: list[str]
    answers: list[WorkerAnswer]
    audit: list[AuditEntry] = Field(description="newest first")
    bonuses: list[BonusPaid]


# -- actions ---------------------------------------------------------------------------------
class WorkerAction(Body):
    """One reviewer action on one worker: audited, safe to repeat. reject, soft_reject, block,
    bonus, note and notify need a reason (note: `note`, notify: `message` also do)."""

    action: Action
    reason: Text | None = Field(default=None, description="told to the worker and the audit log")
    amount: Decimal | None = Field(
        default=None, gt=0, le=MAX_BONUS, decimal_places=2, description="bonus: dollars, e.g. 0.50"
    )
    token: str | None = Field(
        default=None, min_length=1, max_length=64,
        description="bonus: an idempotency token (default: from the study, worker, amount and "
        "reason)",
    )  # fmt: skip
    note: Text | None = Field(default=None, description="note: the text of the note")
    message: Text | None = Field(default=None, description="notify: the message")
    subject: str | None = Field(default=None, max_length=200, description="notify: the subject")
    qualification: str | None = Field(
        default=None, pattern=r"^[A-Z0-9]{1,64}$", description="qualify: the platform's id"
    )
    value: int | None = Field(
        default=None, ge=-(2**31), le=2**31 - 1, description="qualify: the value (default 1)"
    )

    _only_their_actions = field_validator(*TAKEN_BY)(_taken_by_action)


class ActionOutcome(Reply):
    """What the action did"""

    action: Action
    worker_id: Id
    changed: bool = Field(description="false when there was nothing to do (e.g. already paid)")
    message: str


class BulkAction(Body):
    """An action on every worker of the study on whom a QC rule fires now (not on those a
    person overruled the rule for); bonuses are paid one by one."""

    rule: str = Field(min_length=1, max_length=100, description="a QC rule's name")
    action: BulkActionName
    reason: Text | None = None
    note: Text | None = Field(default=None, description="note: the text of the note")

    _only_their_actions = field_validator("note")(_taken_by_action)


class BulkOutcome(Reply):
    """The workers the action changed"""

    rule: str
    action: BulkActionName
    workers: list[Id]


class AuditQuery(Body):
    worker: Id | None = Field(default=None, description="only this worker's entries")
    limit: int = Field(default=200, ge=1, le=5000, description="how many, newest first")


class AuditLog(Reply):
    """The study's audit log, newest first"""

    entries: list[AuditEntry]


# -- aggregated labels -----------------------------------------------------------------------
class AggregationsQuery(Body):
    methods: list[Method] = Field(
        default_factory=list, max_length=6,
        description="only these methods (repeat the parameter); none: every stored method",
    )  # fmt: skip


QuestionErrors = Annotated[dict[str, str], Field(
    default_factory=dict,
    description="question -> why the method could not fit it, where each question is "
    "fitted on its own (form studies): the other questions still have labels",
)]  # fmt: skip


class Aggregation(Reply):
    """One method's labels, their confidence and the workers' skills"""

    method: str
    n_tasks: Count
    n_workers: Count
    labels: dict[str, Any] = Field(description="task (item/question) -> label")
    confidence: dict[str, float]
    skills: dict[str, float] = Field(description="worker -> skill in [0, 1]")
    skills_by_question: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="question -> worker -> skill, where each question is fitted on its own "
        "(form studies; skills is then their mean weighted by the worker's labels)",
    )
    question_errors: QuestionErrors
    gold_accuracy: Share | None
    agreement_with_majority_vote: Share | None
    filtered: bool = Field(description="whether excluded workers were left out")
    computed_at: Time


class Aggregations(Reply):
    """The study's stored aggregations by method"""

    aggregations: dict[str, Aggregation]


class Aggregate(Body):
    """Aggregate the filtered set's labels now (methods that do not fit the HIT type are
    skipped)."""

    methods: list[Method] = Field(
        default=[
            "majority_vote", "dawid_skene", "mace", "ordinal_mean", "first_change",
            "bradley_terry",
        ],
        min_length=1, max_length=6,
    )  # fmt: skip


class MethodFitted(Reply):
    """What one method aggregated"""

    n_tasks: Count
    n_workers: Count
    gold_accuracy: Share | None
    agreement_with_majority_vote: Share | None
    question_errors: QuestionErrors


class MethodFailed(Reply):
    """A method that could not fit"""

    error: str = Field(description="why the method could not fit (e.g. too little data)")


class AggregationSummary(Reply):
    """A summary per method"""

    summary: dict[str, MethodFitted | MethodFailed]
