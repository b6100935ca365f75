"""A local stand-in for Prolific's researcher API, so tests drive our client over real HTTP.

It serves the endpoints of https://docs.prolific.com/api-reference that the client uses, with
their shapes (Prolific's OpenAPI document: CreateStudy, Study, SubmissionShort, Submission,
BulkBonus, WorkspaceBalance, and the {"error": {...}} envelope), and checks what Prolific
checks: the ``Token`` header, required and known study fields, whole-cent rewards, https study
URLs, completion codes, the documented study and submission transitions, 100-character
rejection messages and rejection categories, bonus CSV rows of participants of the study, and
funds. Messages and participant groups (and the group filters of a study, which decide who
may start it) are in prolific_participants.py. Where the documents are silent it follows the
official CLI (prolific-oss/cli), e.g. the ``_links.next.href`` of list answers, and says so.

Hooks let tests play the participants (start, complete, return, time out) and the network
(lose_next_response).
"""

from __future__ import annotations

import math
import random
import re
import threading
from typing import Any

from tests.crowd.platforms.providers.local_server import LocalServer
from tests.crowd.platforms.providers.prolific_http import _handler
from tests.crowd.platforms.providers.prolific_participants import (
    ROUTES as PARTICIPANT_ROUTES,
)
from tests.crowd.platforms.providers.prolific_participants import (
    Message,
    ParticipantGroup,
    ParticipantOperations,
    Project,
)
from tests.crowd.platforms.providers.prolific_state import (
    DEFAULT_PAGE_SIZE,
    HOLDS_PLACE,
    PUBLISHED_FIELDS,
    REJECTION_CATEGORIES,
    REQUIRED_STUDY_FIELDS,
    ROUTES,
    STUDY_TRANSITIONS,
    ApiError,
    BulkBonus,
    Payment,
    Study,
    Submission,
    _check_study,
    _decimal_to_cents,
    _detail_view,
    _fee,
    _invalid,
    _now,
    _short_view,
)

# ApiError and the records are imported from here by tests.
__all__ = [
    "ApiError",
    "BulkBonus",
    "Message",
    "ParticipantGroup",
    "Payment",
    "ProlificServer",
    "Project",
    "Study",
    "Submission",
]


class ProlificServer(LocalServer, ParticipantOperations):
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
        self._init_participants()
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
            if not self.eligible(study, participant):
                # Prolific never shows the study to them: its participant group filters
                # leave them out.
                raise PermissionError(f"participant {participant} may not take part in {study_id}")
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
            for verb, pattern, operation in (*ROUTES, *PARTICIPANT_ROUTES)
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
        self.check_study_workspace(fields)
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
        self.check_study_workspace(fields)
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
