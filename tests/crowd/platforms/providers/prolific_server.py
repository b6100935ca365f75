"""A local stand-in for Prolific's researcher API, so tests drive our client over real HTTP.

It serves the endpoints of https://docs.prolific.com/api-reference that the client uses, with
their shapes (Prolific's OpenAPI document: CreateStudy, Study, SubmissionShort, Submission,
BulkBonus, WorkspaceBalance, and the {"error": {...}} envelope), and checks what Prolific
checks: the ``Token`` header, required and known study fields, whole-cent rewards, https study
URLs, completion codes, the documented study and submission transitions, 100-character
rejection messages and rejection categories, bonus CSV rows of participants of the study, and
funds. Where the documents are silent it follows the official CLI (prolific-oss/cli), e.g. the
``_links.next.href`` of list answers, and says so.

Hooks let tests play the participants (start, complete, return, time out) and the network
(lose_next_response).
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.crowd.platforms.providers.local_server import LocalServer

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


class ProlificServer(LocalServer):
    """Prolific on 127.0.0.1:<free port>, in a thread, for as long as the `with` block lasts."""

    def __init__(self, token: str = "test-token", balance: int = 100_000, links: bool = True):
        self.token = token
        self.balance = balance  # cents/pence in the one workspace
        # False answers lists as the OpenAPI document shows them: results only, no _links.
        self.links = links
        self.lock = threading.RLock()
        self.rng = random.Random(7)
        self.user_id = self._new_id()
        self.workspace_id = self._new_id()
        self.studies: dict[str, Study] = {}
        self.submissions: dict[str, Submission] = {}
        self.bulk_bonuses: dict[str, BulkBonus] = {}
        self.payments: list[Payment] = []
        # Every request that got past routing, also refused ones: (operation, body).
        self.calls: list[tuple[str, Any]] = []
        self.lost: dict[str, list[bool]] = {}
        # Tests may point next-page links elsewhere, to check the client will not follow.
        self.link_origin: str | None = None
        self.listen(_handler(self))

    @property
    def base_url(self) -> str:
        return self.origin

    # -- test hooks ------------------------------------------------------------------------

    def start_submission(self, study_id: str, participant_id: str | None = None) -> tuple[str, str]:
        """A participant takes a place; (submission id, session id), which are the same on
        Prolific: SESSION_ID is the submission's id."""
        with self.lock:
            study = self.studies[study_id]
            if study.status != "ACTIVE":
                raise ValueError(f"study {study_id} is {study.status}, not recruiting")
            if self._places_taken(study) >= study.fields["total_available_places"]:
                raise ValueError(f"study {study_id} has no place left")
            participant = participant_id or self._new_id()
            if any(
                s.participant_id == participant and s.study_id == study_id
                for s in self.submissions.values()
            ):
                raise ValueError(f"participant {participant} already took part in {study_id}")
            submission = Submission(self._new_id(), study_id, participant)
            self.submissions[submission.id] = submission
            return submission.id, submission.id

    def participant_url(self, submission_id: str) -> str:
        """The study URL as Prolific sends this participant to it, placeholders filled in."""
        with self.lock:
            submission = self.submissions[submission_id]
            url: str = self.studies[submission.study_id].fields["external_study_url"]
            for name, value in (
                ("PROLIFIC_PID", submission.participant_id),
                ("STUDY_ID", submission.study_id),
                ("SESSION_ID", submission.id),
            ):
                url = url.replace("{{%" + name + "%}}", value)
            return url

    def complete(self, submission_id: str, study_code: str) -> None:
        """The participant comes back with a code: the code's actions run (MANUALLY_REVIEW:
        AWAITING REVIEW). A code the study does not have also waits for review (assumed)."""
        with self.lock:
            submission = self.submissions[submission_id]
            if submission.status != "ACTIVE":
                raise ValueError(f"submission {submission_id} is {submission.status}")
            study = self.studies[submission.study_id]
            submission.status = "AWAITING REVIEW"
            submission.completed_at = _now()
            submission.entered_code = study_code
            for code in study.fields.get("completion_codes", []):
                actions = {a["action"] for a in code["actions"]}
                if code["code"] == study_code and "AUTOMATICALLY_APPROVE" in actions:
                    self._approve(submission)

    def return_submission(self, submission_id: str) -> None:
        """The participant gives the submission back; its place goes to someone else."""
        self._end(submission_id, ("ACTIVE", "AWAITING REVIEW"), "RETURNED")

    def time_out(self, submission_id: str) -> None:
        """The participant ran out of the maximum allowed time."""
        self._end(submission_id, ("ACTIVE",), "TIMED-OUT")

    def _end(self, submission_id: str, allowed: tuple[str, ...], status: str) -> None:
        with self.lock:
            submission = self.submissions[submission_id]
            if submission.status not in allowed:
                raise ValueError(f"submission {submission_id} is {submission.status}")
            submission.status = status

    def lose_next_response(self, operation: str, times: int = 1, disconnect: bool = False) -> None:
        """Do the next `operation` but lose the answer: a gateway's HTML 502, or, with
        `disconnect`, a connection closed without any answer."""
        with self.lock:
            self.lost.setdefault(operation, []).extend([disconnect] * times)

    def calls_to(self, operation: str) -> int:
        """How many requests for `operation` arrived (retries included)."""
        with self.lock:
            return sum(1 for name, _ in self.calls if name == operation)

    def bonuses(self) -> list[Payment]:
        with self.lock:
            return [p for p in self.payments if p.kind == "bonus"]

    # -- dispatch ----------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, authorization: str
    ) -> tuple[str, int, Any, bool | None]:
        """(operation, HTTP status, answer, lost) where lost is None or how to lose it."""
        routed = [
            (operation, match)
            for verb, pattern, operation in ROUTES
            if verb == method and (match := re.fullmatch(pattern, path))
        ]
        if not routed:
            raise ApiError(404, f"No route for {method} {path}.", "Not found")
        operation, match = routed[0]
        with self.lock:
            self.calls.append((operation, body))
            if authorization != f"Token {self.token}":
                # DRF's TokenAuthentication wording; Prolific's exact text is not documented.
                raise ApiError(401, "Invalid token.", "Not authenticated")
            status, result = getattr(self, "op_" + operation)(*match.groups(), query, body)
            lost = self.lost.get(operation)
            return operation, status, result, lost.pop(0) if lost else None

    def _new_id(self) -> str:
        return f"{self.rng.getrandbits(96):024x}"

    def _study(self, study_id: str) -> Study:
        study = self.studies.get(study_id)
        if study is None:
            raise ApiError(404, f"Study {study_id} not found.", "Not found")
        return study

    def _submission(self, submission_id: str) -> Submission:
        submission = self.submissions.get(submission_id)
        if submission is None:
            raise ApiError(404, f"Submission {submission_id} not found.", "Not found")
        return submission

    def _places_taken(self, study: Study) -> int:
        return sum(
            1
            for s in self.submissions.values()
            if s.study_id == study.id and s.status in HOLDS_PLACE
        )

    def _pay(self, kind: str, submission: Submission, amount: int) -> None:
        fees = _fee(amount)
        if amount + fees > self.balance:
            raise ApiError(400, "Insufficient balance in the workspace: top it up.")
        self.balance -= amount + fees
        self.payments.append(
            Payment(kind, submission.study_id, submission.participant_id, amount, fees)
        )

    def _approve(self, submission: Submission) -> None:
        self._pay("reward", submission, self.studies[submission.study_id].fields["reward"])
        submission.status = "APPROVED"

    # -- operations ------------------------------------------------------------------------

    def op_me(self, query: Any, body: Any) -> tuple[int, Any]:
        return 200, {
            "id": self.user_id,
            "email": "researcher@example.org",
            "name": "Test Researcher",
            "user_type": "researcher",
            "currency_code": "GBP",
            "balance": self.balance,
            "available_balance": self.balance,
        }

    def op_create_study(self, query: Any, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict):
            raise ApiError(400, "The body must be a JSON object.")
        for name in REQUIRED_STUDY_FIELDS:
            if name not in body:
                raise _invalid(name, "This field is required.")
        fields = _check_study(body)
        study = Study(self._new_id(), {"internal_name": None, **fields})
        self.studies[study.id] = study
        return 201, self._study_view(study)

    def op_get_study(self, study_id: str, query: Any, body: Any) -> tuple[int, Any]:
        return 200, self._study_view(self._study(study_id))

    def op_update_study(self, study_id: str, query: Any, body: Any) -> tuple[int, Any]:
        study = self._study(study_id)
        if not isinstance(body, dict):
            raise ApiError(400, "The body must be a JSON object.")
        fields = _check_study({**study.fields, **body})
        if study.status != "UNPUBLISHED":
            for name in set(body) - PUBLISHED_FIELDS:
                raise _invalid(name, f"Cannot be changed once the study is {study.status}.")
            if fields["total_available_places"] < study.fields["total_available_places"]:
                raise _invalid("total_available_places", "Places can only be increased.")
        grew = fields["total_available_places"] > study.fields["total_available_places"]
        study.fields = fields
        # Documented: more places make a completed study active again.
        if grew and study.status == "COMPLETED":
            study.status = "ACTIVE"
        return 200, self._study_view(study)

    def op_transition_study(self, study_id: str, query: Any, body: Any) -> tuple[int, Any]:
        study = self._study(study_id)
        action = body.get("action") if isinstance(body, dict) else None
        new = STUDY_TRANSITIONS.get((study.status, str(action)))
        if new is None:
            raise ApiError(400, f"Cannot {action} a study that is {study.status}.")
        if action == "PUBLISH":
            fields = study.fields
            cost = fields["reward"] * fields["total_available_places"]
            if cost + _fee(cost) > self.balance:
                raise ApiError(400, "Insufficient balance to publish this study: top it up.")
        study.status = new
        return 200, self._study_view(study)

    def _study_view(self, study: Study) -> dict[str, Any]:
        return {
            **study.fields,
            "id": study.id,
            "status": study.status,
            "date_created": study.created,
            "places_taken": self._places_taken(study),
            "currency_code": "GBP",
            "is_ready_to_publish": True,
        }

    def op_list_submissions(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        study_id = query.get("study", [""])[0]
        if not study_id:
            raise _invalid("study", "This query parameter is required.")
        self._study(study_id)
        try:
            size = int(query.get("page_size", [DEFAULT_PAGE_SIZE])[0])
            page = int(query.get("page", ["1"])[0])
        except ValueError:
            raise ApiError(400, "page and page_size must be whole numbers.") from None
        found = [s for s in self.submissions.values() if s.study_id == study_id]
        pages = max(1, math.ceil(len(found) / size))
        if not 1 <= page <= pages or size < 1:
            # Django REST framework's page-number paging answers so past the last page.
            raise ApiError(404, "Invalid page.", "Not found")
        answer: dict[str, Any] = {
            "results": [_short_view(s) for s in found[(page - 1) * size : page * size]]
        }
        if self.links:
            origin = self.link_origin or self.base_url

            def href(number: int) -> str | None:
                if not 1 <= number <= pages:
                    return None
                return (
                    f"{origin}/api/v1/submissions/?study={study_id}&page={number}&page_size={size}"
                )

            answer["_links"] = {
                "self": {"href": href(page), "title": "Current"},
                "next": {"href": href(page + 1), "title": "Next"},
                "previous": {"href": href(page - 1), "title": "Previous"},
                "last": {"href": href(pages), "title": "Last"},
            }
            answer["meta"] = {"count": len(found)}
        return 200, answer

    def op_get_submission(self, submission_id: str, query: Any, body: Any) -> tuple[int, Any]:
        submission = self._submission(submission_id)
        return 200, {**_detail_view(submission), "bonus_payments": list(submission.bonuses)}

    def op_transition_submission(
        self, submission_id: str, query: Any, body: Any
    ) -> tuple[int, Any]:
        submission = self._submission(submission_id)
        action = body.get("action") if isinstance(body, dict) else None
        target = {"APPROVE": "APPROVED", "REJECT": "REJECTED"}.get(str(action))
        if target is None:
            raise _invalid("action", f"The stand-in does not do {action!r}: APPROVE or REJECT.")
        if action == "REJECT":
            message = body.get("message")
            if not isinstance(message, str) or len(message) < 100:
                raise _invalid("message", "It must be at least 100 chars long.")
            if body.get("rejection_category") not in REJECTION_CATEGORIES:
                raise _invalid("rejection_category", "A valid rejection category is required.")
        # Documented as idempotent: the same request again is ignored.
        if submission.status == target:
            return 200, _detail_view(submission)
        if submission.status != "AWAITING REVIEW":
            raise ApiError(
                400, f"Cannot {action} a submission that is {submission.status}.", "Bad request"
            )
        if action == "APPROVE":
            self._approve(submission)
        else:
            submission.rejection = (body["rejection_category"], body["message"])
            submission.status = "REJECTED"
        return 200, _detail_view(submission)

    def op_create_bonus(self, query: Any, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or set(body) != {"study_id", "csv_bonuses"}:
            raise ApiError(400, "Send study_id and csv_bonuses.")
        study = self._study(body["study_id"])
        rows: list[tuple[Submission, int]] = []
        wrong: list[str] = []
        for line in str(body["csv_bonuses"]).splitlines():
            if not line.strip():
                continue
            who, _, amount = line.partition(",")
            takers = [
                s
                for s in self.submissions.values()
                if s.study_id == study.id and who.strip() in (s.id, s.participant_id)
            ]
            cents = _decimal_to_cents(amount)
            if not takers:
                wrong.append(who.strip())
            elif cents is None:
                raise _invalid(
                    "csv_bonuses", f"{amount.strip()!r} is not an amount like 1.50 (in pounds)."
                )
            else:
                rows.append((takers[0], cents))
        if wrong:
            raise _invalid("csv_bonuses", f"These IDs did not take part: {', '.join(wrong)}.")
        if not rows:
            raise _invalid("csv_bonuses", "No bonuses given.")
        bulk = BulkBonus(self._new_id(), study.id, rows)
        self.bulk_bonuses[bulk.id] = bulk
        total = sum(cents for _, cents in rows)
        fees = sum(_fee(cents) for _, cents in rows)
        return 201, {
            "id": bulk.id,
            "study": study.id,
            "amount": total,
            "fees": fees,
            "vat": 0,
            "total_amount": total + fees,
        }

    def op_pay_bonus(self, bonus_id: str, query: Any, body: Any) -> tuple[int, Any]:
        bulk = self.bulk_bonuses.get(bonus_id)
        if bulk is None:
            raise ApiError(404, f"Bulk bonus payment {bonus_id} not found.", "Not found")
        # Documented as not idempotent: every request pays again. Paid at once here; Prolific
        # pays "in the following minutes".
        for submission, cents in bulk.rows:
            self._pay("bonus", submission, cents)
            submission.bonuses.append(cents)
        bulk.paid += 1
        return 202, "Bonus payments are being processed."

    def op_balance(self, workspace_id: str, query: Any, body: Any) -> tuple[int, Any]:
        if workspace_id != self.workspace_id:
            raise ApiError(404, f"Workspace {workspace_id} not found.", "Not found")
        breakdown = {"rewards": self.balance, "fees": 0, "vat": 0}
        return 200, {
            "currency_code": "GBP",
            "total_balance": self.balance,
            "balance_breakdown": breakdown,
            "available_balance": self.balance,
            "available_balance_breakdown": breakdown,
        }


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


def _handler(server: ProlificServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as requests' connection pool expects.
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle each answer would wait ~40 ms.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test output is no place for an access log

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def _serve(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            parts = urlsplit(self.path)
            try:
                body = None
                if raw:
                    if "application/json" not in self.headers.get("Content-Type", ""):
                        raise ApiError(415, "Unsupported media type: send application/json.")
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        raise ApiError(400, "JSON parse error.") from None
                operation, status, result, lost = server.handle(
                    method,
                    parts.path,
                    parse_qs(parts.query),
                    body,
                    self.headers.get("Authorization", ""),
                )
            except ApiError as error:
                envelope = {
                    "status": error.status,
                    "error_code": error.status * 1000,
                    "title": error.title,
                    "detail": error.detail,
                }
                self._reply(error.status, json.dumps({"error": envelope}), "application/json")
                return
            if lost is True:
                self.close_connection = True  # no answer at all: the client sees a reset
                return
            if lost is False:
                self._reply(502, "<html><body>502 Bad Gateway</body></html>", "text/html")
                return
            self._reply(status, json.dumps(result), "application/json")

        def _reply(self, status: int, text: str, content_type: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
