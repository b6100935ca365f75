"""The Prolific stand-in's records and checks: constants, errors, studies, submissions, bonuses.

Everything here is plain data and pure functions; prolific_server.ProlificServer keeps the
state and answers the operations with them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

OBJECT_ID = re.compile(r"^[0-9a-f]{24}$")
LOCAL_HOSTS = ("127.0.0.1", "localhost")
# CreateStudy's properties in Prolific's OpenAPI document; anything else is our typo.
STUDY_FIELDS = frozenset(
    [
        "name",
        "internal_name",
        "description",
        "external_study_url",
        "prolific_id_option",
        "completion_codes",
        "total_available_places",
        "estimated_completion_time",
        "maximum_allowed_time",
        "reward",
        "device_compatibility",
        "peripheral_requirements",
        "filters",
        "filter_set_id",
        "filter_set_version",
        "naivety_distribution_rate",
        "project",
        "submissions_config",
        "study_labels",
        "content_warnings",
        "content_warning_details",
        "metadata",
        "credential_pool_id",
        "has_credentials",
        "data_collection_method",
        "data_collection_id",
        "data_collection_metadata",
        "access_details",
        "is_external_study_url_secure",
    ]
)
REQUIRED_STUDY_FIELDS = (
    "name",
    "description",
    "external_study_url",
    "prolific_id_option",
    "total_available_places",
    "estimated_completion_time",
    "reward",
)
# What a published study may still change (PATCH /studies/{id}/ documentation).
PUBLISHED_FIELDS = frozenset({"internal_name", "total_available_places", "submissions_config"})
ID_OPTIONS = ("question", "url_parameters", "not_required")
DEVICES = ("desktop", "tablet", "mobile")
CODE_ACTIONS = ("AUTOMATICALLY_APPROVE", "MANUALLY_REVIEW", "REQUEST_RETURN")
REJECTION_CATEGORIES = frozenset(
    [
        "TOO_QUICKLY",
        "TOO_SLOWLY",
        "FAILED_INSTRUCTIONS",
        "INCOMP_LONGITUDINAL",
        "FAILED_CHECK",
        "LOW_EFFORT",
        "MALINGERING",
        "NO_CODE",
        "BAD_CODE",
        "NO_DATA",
        "UNSUPP_DEVICE",
        "OTHER",
    ]
)
# The documented study transitions: (status, action) -> new status.
STUDY_TRANSITIONS = {
    ("UNPUBLISHED", "PUBLISH"): "ACTIVE",
    ("ACTIVE", "PAUSE"): "PAUSED",
    ("ACTIVE", "STOP"): "COMPLETED",
    ("PAUSED", "START"): "ACTIVE",
    ("PAUSED", "STOP"): "COMPLETED",
}
# Submissions that hold a place; RETURNED, REJECTED (documented) and TIMED-OUT give it back.
HOLDS_PLACE = frozenset({"RESERVED", "ACTIVE", "AWAITING REVIEW", "APPROVED", "SCREENED OUT"})
# Not Prolific's published prices: a stand-in fee so that funds go down by more than rewards.
FEE_RATE = Decimal("0.33")
DEFAULT_PAGE_SIZE = 20
ROUTES = (
    ("GET", r"/api/v1/users/me/", "me"),
    ("POST", r"/api/v1/studies/", "create_study"),
    ("GET", r"/api/v1/studies/(\w+)/", "get_study"),
    ("PATCH", r"/api/v1/studies/(\w+)/", "update_study"),
    ("POST", r"/api/v1/studies/(\w+)/transition/", "transition_study"),
    ("GET", r"/api/v1/submissions/", "list_submissions"),
    ("GET", r"/api/v1/submissions/(\w+)/", "get_submission"),
    ("POST", r"/api/v1/submissions/(\w+)/transition/", "transition_submission"),
    ("POST", r"/api/v1/submissions/bonus-payments/", "create_bonus"),
    ("POST", r"/api/v1/bulk-bonus-payments/(\w+)/pay/", "pay_bonus"),
    ("GET", r"/api/v1/workspaces/(\w+)/balance/", "balance"),
)


class ApiError(Exception):
    """What the handler answers as {"error": {"status", "error_code", "title", "detail"}}."""

    def __init__(self, status: int, detail: Any, title: str = "Bad request") -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail
        self.title = title


def _invalid(field_name: str, message: str) -> ApiError:
    # Prolific's validation errors name each field with a list of messages (ErrorDetailDetail2).
    return ApiError(400, {field_name: [message]}, "Invalid request")


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Study:
    id: str
    fields: dict[str, Any]
    status: str = "UNPUBLISHED"
    created: str = field(default_factory=_now)


@dataclass
class Submission:
    id: str
    study_id: str
    participant_id: str
    status: str = "ACTIVE"
    started_at: str = field(default_factory=_now)
    completed_at: str | None = None
    entered_code: str | None = None
    rejection: tuple[str, str] | None = None  # (category, message)
    bonuses: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Payment:
    """Money that left the workspace: a reward on approval, or a bonus; amounts in cents."""

    kind: str
    study_id: str
    participant_id: str
    amount: int
    fees: int


@dataclass
class BulkBonus:
    id: str
    study_id: str
    rows: list[tuple[Submission, int]]
    paid: int = 0  # how many times it was paid: Prolific pays every pay request


def _fee(cents: int) -> int:
    return int((Decimal(cents) * FEE_RATE).quantize(Decimal(1), ROUND_HALF_UP))


# -- checks ------------------------------------------------------------------------------------


def _check_study(body: dict[str, Any]) -> dict[str, Any]:
    """The study's fields after Prolific's checks of a create or of a draft's update."""
    unknown = sorted(set(body) - STUDY_FIELDS - {"id", "status"})
    if unknown:
        raise _invalid(unknown[0], "Unknown field.")
    for name in ("name", "description"):
        if not isinstance(body[name], str) or not body[name].strip():
            raise _invalid(name, "This field may not be blank.")
    url = body["external_study_url"]
    parts = urlsplit(url) if isinstance(url, str) else None
    local_http = parts is not None and parts.scheme == "http" and parts.hostname in LOCAL_HOSTS
    if parts is None or not (parts.scheme == "https" or local_http) or not parts.hostname:
        raise _invalid("external_study_url", "Enter a valid https URL.")
    if body["prolific_id_option"] not in ID_OPTIONS:
        raise _invalid("prolific_id_option", f"Must be one of {', '.join(ID_OPTIONS)}.")
    # Assumed, not documented: URL parameters need the participant placeholder in the URL.
    if body["prolific_id_option"] == "url_parameters" and "{{%PROLIFIC_PID%}}" not in url:
        raise _invalid("external_study_url", "Add {{%PROLIFIC_PID%}} for url_parameters.")
    _check_codes(body.get("completion_codes"))
    for name in ("total_available_places", "reward"):
        value = body[name]
        # The document types both as numbers; places and cents can only be whole.
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise _invalid(name, "A whole number is required (the reward is in pence/cents).")
        if value < 1:
            raise _invalid(name, "Ensure this value is greater than or equal to 1.")
    estimate = body["estimated_completion_time"]
    if isinstance(estimate, bool) or not isinstance(estimate, int | float) or estimate <= 0:
        raise _invalid("estimated_completion_time", "A positive number of minutes is required.")
    most = body.get("maximum_allowed_time")
    if most is not None and most < 2 + 2 * estimate + 2 * math.sqrt(estimate):
        raise _invalid(
            "maximum_allowed_time", "At least 2 + 2 x estimate + 2 x sqrt(estimate) minutes."
        )
    devices = body.get("device_compatibility", [])
    if not isinstance(devices, list) or any(d not in DEVICES for d in devices):
        raise _invalid("device_compatibility", f"Choose from {', '.join(DEVICES)}.")
    for index, item in enumerate(body.get("filters") or []):
        if not isinstance(item, dict) or not isinstance(item.get("filter_id"), str):
            raise _invalid(f"filters[{index}]", "Each filter needs a filter_id.")
        if not {"selected_values", "selected_range", "selected_filters"} & set(item):
            raise _invalid(f"filters[{index}]", "Give selected_values or selected_range.")
    if "project" in body and not OBJECT_ID.match(str(body["project"])):
        raise _invalid("project", "Not a valid project id.")
    fields = {k: v for k, v in body.items() if k not in ("id", "status")}
    fields["total_available_places"] = int(body["total_available_places"])
    fields["reward"] = int(body["reward"])
    return fields


def _check_codes(codes: Any) -> None:
    if not isinstance(codes, list) or not codes:
        raise _invalid("completion_codes", "Specify at least one completion code.")
    seen: set[str | None] = set()
    for code in codes:
        if not isinstance(code, dict) or not {"code", "code_type", "actions"} <= set(code):
            raise _invalid("completion_codes", "Each code needs code, code_type and actions.")
        value, actions = code["code"], code["actions"]
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise _invalid("completion_codes", "A code is a non-empty string or null.")
        if value in seen:
            raise _invalid("completion_codes", f"Code {value} is not unique within the study.")
        seen.add(value)
        names = [a.get("action") for a in actions] if isinstance(actions, list) else [None]
        if any(name not in CODE_ACTIONS for name in names):
            raise _invalid("completion_codes", f"Unknown action among {names}.")
        if {"AUTOMATICALLY_APPROVE", "MANUALLY_REVIEW"} <= set(names):
            raise _invalid(
                "completion_codes", "AUTOMATICALLY_APPROVE and MANUALLY_REVIEW exclude each other."
            )


def _decimal_to_cents(text: str) -> int | None:
    """Cents of a CSV amount in whole currency units ("1.50"), or None if it is not one."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        return None
    if not value.is_finite() or value <= 0 or value != value.quantize(Decimal("0.01")):
        return None
    return int(value * 100)


def _short_view(submission: Submission) -> dict[str, Any]:
    """SubmissionShort, as list answers carry it (participant_id and study_code)."""
    return {
        "id": submission.id,
        "participant_id": submission.participant_id,
        "status": submission.status,
        "started_at": submission.started_at,
        "completed_at": submission.completed_at,
        "has_siblings": False,
        "study_code": submission.entered_code,
        "return_requested": None,
    }


def _detail_view(submission: Submission) -> dict[str, Any]:
    """Submission, as single-submission answers carry it (participant and entered_code)."""
    return {
        "id": submission.id,
        "completed_at": submission.completed_at,
        "entered_code": submission.entered_code,
        "participant": submission.participant_id,
        "started_at": submission.started_at,
        "status": submission.status,
        "study_id": submission.study_id,
    }
