"""Studies: create, list, show, items, annotations, publishing, exports and reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from crowd.platforms.providers import PROVIDERS
from crowd.registry import Registry
from crowd.storage import MAX_ID, RemoteTaskStatus, StudyStatus
from crowd.storage.platforms import ActionStatus
from crowd.studies.annotations import MAX_GROUP
from crowd.studies.lifecycle import MAX_ITEMS_PER_IMPORT
from crowd.web.contract import Body, Reply
from tasks import load_builtin
from tasks.base import LIVE_RATER_GROUP

Id = Annotated[int, Field(ge=0, le=MAX_ID)]
Count = Annotated[int, Field(ge=0, le=2**63 - 1)]
Time = Annotated[str, Field(description="an ISO 8601 time")]
# Every HIT type writes jsonl and csv; boundary adds roft, comparison pairwise and kway.
ExportFormat = Literal["jsonl", "csv", "roft", "pairwise", "kway"]
# crowd.studies.annotations.FORMATS (a test keeps the two the same).
AnnotationFormat = Literal["jsonl", "csv", "roft"]


def _known(registry: Callable[[], Registry[Any]]) -> Callable[[str], str]:
    """A check that `name` is registered (read when validating: plugins load lazily)."""

    def check(name: str) -> str:
        names = registry()
        if name not in names:
            raise PydanticCustomError(
                "unknown_name",
                "unknown {kind} {name}: one of {known}",
                {"kind": names.kind, "name": repr(name), "known": ", ".join(names)},
            )
        return name

    return check


def _enum_of(registry: Callable[[], Registry[Any]]) -> Callable[[dict[str, Any]], None]:
    def extra(schema: dict[str, Any]) -> None:
        schema["enum"] = list(registry())

    return extra


def _providers() -> Registry[Any]:
    return PROVIDERS


HitTypeName = Annotated[
    str,
    Field(min_length=1, max_length=50, json_schema_extra=_enum_of(load_builtin)),
    AfterValidator(_known(load_builtin)),
]
ProviderName = Annotated[
    str,
    Field(min_length=1, max_length=50, json_schema_extra=_enum_of(_providers)),
    AfterValidator(_known(_providers)),
]


# -- studies ---------------------------------------------------------------------------------
class NewStudy(Body):
    """A study of one HIT type; `config` is checked by that type (unknown keys refused)."""

    name: str = Field(min_length=1, max_length=200, description="shown to experimenters")
    hit_type: HitTypeName
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="the HIT type's settings (annotations_per_item, attention_rate, qc, and "
        "the type's own keys); missing ones get their defaults",
    )


class Study(Reply):
    """A study"""

    id: Id
    name: str
    hit_type: str
    config: dict[str, Any] = Field(description="the HIT type's settings, defaults filled in")
    status: StudyStatus
    providers: list[str] = Field(description="the providers the study is published to")
    created_at: Time
    archived_at: Time | None = Field(description="when it was archived; null while listed")


class Studies(Reply):
    """Your studies, oldest first"""

    studies: list[Study]


class StudiesQuery(Body):
    """Which studies to list"""

    archived: bool = Field(default=False, description="list the archived studies instead")


class StudyChange(Body):
    """A change of a study's state"""

    action: Literal["pause", "resume", "close", "archive", "unarchive"] = Field(
        description="pause: no new assignments (open ones can be finished); resume; close: "
        "for good, no new work or items; archive: close and leave the lists; unarchive"
    )


class StudyCounts(Reply):
    """Counts an experimenter follows"""

    study_id: Id
    name: str
    hit_type: str
    status: StudyStatus
    providers: list[str]
    items: dict[str, Count] = Field(description="items by kind (real, gold, attention, training)")
    assignments: dict[str, Count] = Field(description="assignments by state")
    responses: Count
    workers: Count
    annotations_per_item: Count
    items_complete: Count = Field(description="real items with all their live answers")
    fraction_complete: float = Field(ge=0, le=1)
    open_assignments: Count


class StudyProgress(Study):
    """A study with its progress"""

    progress: StudyCounts


# -- items and annotations -------------------------------------------------------------------
class NewItems(Body):
    """Items in the HIT type's terms; all are checked first, then all or none are added."""

    items: list[dict[str, Any]] = Field(
        min_length=1, max_length=MAX_ITEMS_PER_IMPORT,
        description="one object per item, as the HIT type defines it (e.g. a boundary item: "
        "id, sentences, boundary, kind?, category?)",
    )


class ItemsAdded(Reply):
    """How many items were added"""

    added: Count


class CheckedLine(Reply):
    """One item of an upload as the checks found it"""

    line: int = Field(
        ge=1, description="the file's own line (CSV: the header is line 1, a row starts where "
        "it starts); for a JSON body, the item's place counting from 1",
    )  # fmt: skip
    id: str | None = Field(description="the item's id, when it gives one")
    kind: Literal["real", "gold", "attention", "training"] | None = Field(
        description="the item's kind, when it is a known one"
    )
    ok: bool = Field(description="whether the item would be stored as it is")
    error: str | None = Field(description="what is wrong and how to fix it; null when ok")
    field: str | None = Field(description="the field or CSV column at fault, when one is")
    summary: str = Field(description="the start of the item's text, to recognise it by")


class ItemsChecked(Reply):
    """Every item of an upload checked, nothing stored"""

    format: Literal["jsonl", "csv", "json"] = Field(
        description="how the body was read (json: a JSON body's items)"
    )
    total: Count
    valid: Count
    invalid: Count
    lines: list[CheckedLine] = Field(description="one per item, in the file's order")


class AnnotationsQuery(Body):
    format: AnnotationFormat = Field(
        default="jsonl", description="the layout of the body (roft: boundary studies only)"
    )
    rater_group: str = Field(
        default=LIVE_RATER_GROUP, min_length=1, max_length=MAX_GROUP,
        description="the group of records that name none (e.g. experts, mturk)",
    )  # fmt: skip
    skip_duplicates: bool = Field(
        default=False, description="skip answers a worker already gave instead of refusing all"
    )
    max_sentences: int | None = Field(
        default=None, ge=1, le=1000, description="RoFT: keep at most this many sentences"
    )


class AnnotationsImported(Reply):
    """What the import added"""

    added: Count
    skipped_duplicates: Count
    items_added: Count = Field(description="RoFT passages that became new items")
    workers: Count = Field(description="distinct workers of the added answers")


# -- publishing ------------------------------------------------------------------------------
class Publish(Body):
    """Open the study to the workers of each provider."""

    providers: list[ProviderName] = Field(default=["local"], min_length=1, max_length=10)
    options: dict[ProviderName, dict[str, Any]] = Field(
        default_factory=dict,
        description="options per provider, checked by the provider (mturk, prolific: reward, "
        "items_per_session, ...); local and sim take none",
    )


class Published(Study):
    """The study with the links to its pages on each provider"""

    links: dict[str, dict[str, str]] = Field(description="provider -> name -> URL")


class RemoteTask(Reply):
    """A unit of work on the platform (an MTurk HIT, a Prolific study)"""

    remote_id: str
    places: Count
    status: RemoteTaskStatus
    expires_at: Time | None
    synced_at: Time | None


class Publication(Reply):
    """The study published on one platform"""

    id: Id
    provider: str
    options: dict[str, Any] = Field(description="the provider's options, defaults filled in")
    remote: dict[str, Any] = Field(description="what the platform answered (ids, cost)")
    created_at: Time
    tasks: list[RemoteTask]


class PlatformAction(Reply):
    """A call owed to a platform (approve, reject, bonus, block, ...)"""

    id: Id
    provider: str
    action: str
    worker_id: Id | None
    status: ActionStatus
    attempts: Count
    last_error: str | None
    created_at: Time
    done_at: Time | None


class Publications(Reply):
    """The study's publications and its platform calls, newest first"""

    publications: list[Publication]
    platform_actions: list[PlatformAction]


class SyncReport(Reply):
    """What one sync with the platforms changed"""

    seen: Count
    submitted: Count
    approved: Count
    rejected: Count
    returned: Count
    abandoned: Count
    recovered: Count
    reclaimed: Count
    problems: list[str]


# -- exports and reports ---------------------------------------------------------------------
class ExportQuery(Body):
    format: ExportFormat = Field(
        default="jsonl",
        description="jsonl and csv for every HIT type; roft (boundary); pairwise, kway "
        "(comparison)",
    )
    set: Literal["full", "filtered"] = Field(
        default="full", description="filtered leaves out the workers QC excluded"
    )


class StudyReport(Reply):
    """The study's latest report"""

    updated_at: Time
    report: dict[str, Any] = Field(description="the HIT type's analysis and the QC summary")


class ReportQueued(Reply):
    """A refresh is queued (or one was already waiting)"""

    queued: Literal[True]
    job_id: str | None = Field(description="null when a refresh was already waiting")


class ReportBuilt(Reply):
    """The report was built in the request (no queue is configured)"""

    queued: Literal[False]
    updated_at: Time
