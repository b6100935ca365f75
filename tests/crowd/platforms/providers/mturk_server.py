"""A local stand-in for MTurk's requester API, so tests drive the real boto3 client over HTTP.

It speaks MTurk's JSON 1.1 protocol (POST / with X-Amz-Target, SigV4-signed by botocore) and
keeps HITs, assignments, payments and blocks in memory. Requests are checked twice: against
botocore's own service model (member names, required members, types, enums, lengths,
patterns) and by hand for what the model leaves to MTurk's documentation (reward format,
ExternalQuestion XML, value ranges, request tokens, assignment states, funds). Anything off
is answered the way MTurk answers it: HTTP 400 with {"__type": "RequestError", ...}, which
botocore turns into a ClientError.
"""

from __future__ import annotations

import random
import re
import threading
import time
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from tests.crowd.platforms.providers.local_server import LocalServer
from tests.crowd.platforms.providers.mturk_http import _handler
from tests.crowd.platforms.providers.mturk_operations import MTurkOperations
from tests.crowd.platforms.providers.mturk_state import (
    EXTERNAL_QUESTION_NS,
    Assignment,
    Hit,
    HitType,
    Payment,
    RequestError,
    ResponseCut,
    _answer_xml,
    _check_shape,
    _load_model,
)

# EXTERNAL_QUESTION_NS, RequestError and the records are imported from here by tests.
__all__ = [
    "EXTERNAL_QUESTION_NS",
    "Assignment",
    "Hit",
    "HitType",
    "MTurkServer",
    "Payment",
    "RequestError",
]


class MTurkServer(MTurkOperations, LocalServer):
    """MTurk on 127.0.0.1:<free port>, in a thread, for as long as the `with` block lasts."""

    def __init__(self, balance: Decimal | str = "10000.00", hit_id_in_duplicate: bool = True):
        self.balance = Decimal(balance)
        # MTurk documents that a repeated CreateHIT token is answered with the HIT's id in
        # the message; False answers without it, to test the fallback of finding it anew.
        self.hit_id_in_duplicate = hit_id_in_duplicate
        self.model = _load_model()
        self.lock = threading.RLock()
        self.rng = random.Random(1)
        self.hit_types: dict[str, HitType] = {}
        self.hits: dict[str, Hit] = {}
        self.assignments: dict[str, Assignment] = {}
        self.payments: list[Payment] = []
        self.blocks: dict[str, str] = {}
        self.notifications: list[tuple[list[str], str, str]] = []
        self.qualifications: dict[tuple[str, str], int] = {}
        self.expirations: dict[str, float] = {}
        # What our page posted to /mturk/externalSubmit, in order (form fields).
        self.submissions: list[dict[str, str]] = []
        # Every well-formed call (operation, body), also the refused ones, in order.
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.tokens: dict[tuple[str, str], tuple[str, float, str]] = {}
        self.skew = 0.0
        self.request_id = ""
        self.lost: dict[str, int] = {}
        self.cut: dict[str, int] = {}
        self.spared: dict[str, int] = {}
        self.listen(_handler(self))

    @property
    def endpoint_url(self) -> str:
        return self.origin

    # -- test hooks ------------------------------------------------------------------------

    def add_assignment(
        self, hit_id: str, worker_id: str, answer: str | None = None, status: str = "Submitted"
    ) -> str:
        """A worker accepted and submitted the HIT; returns the assignment id."""
        with self.lock:
            hit = self.hits[hit_id]
            taken = sum(1 for a in self.assignments.values() if a.hit_id == hit_id)
            if taken >= hit.max_assignments:
                raise ValueError(f"HIT {hit_id} has all {hit.max_assignments} assignments taken")
            if not re.match(r"^A[A-Z0-9]+$", worker_id):
                raise ValueError(f"{worker_id!r} does not look like an MTurk worker id")
            assignment = Assignment(
                id=self._new_id(),
                hit_id=hit_id,
                worker_id=worker_id,
                answer=answer or _answer_xml({"done": "yes"}),
                status=status,
            )
            self.assignments[assignment.id] = assignment
            return assignment.id

    def accept(self, hit_id: str, worker_id: str) -> str:
        """A worker accepts the HIT (not yet submitted: MTurk does not list it)."""
        with self.lock:
            hit = self.hits[hit_id]
            if worker_id in self.blocks:
                raise PermissionError(f"worker {worker_id} is blocked by this requester")
            for requirement in hit.hit_type.qualifications:
                held = (worker_id, requirement["QualificationTypeId"]) in self.qualifications
                if requirement["Comparator"] == "DoesNotExist" and held:
                    raise PermissionError(f"worker {worker_id} may not accept HIT {hit_id}")
            if self.now() > self.expirations.get(hit_id, hit.created + hit.lifetime):
                raise PermissionError(f"HIT {hit_id} has expired")
            taken = sum(1 for a in self.assignments.values() if a.hit_id == hit_id)
            if taken >= hit.max_assignments:
                raise PermissionError(f"HIT {hit_id} has no assignment left")
            assignment = Assignment(
                id=self._new_id(), hit_id=hit_id, worker_id=worker_id, answer="",
                status="Accepted",
            )  # fmt: skip
            self.assignments[assignment.id] = assignment
            return assignment.id

    def page_url(self, assignment_id: str, preview: bool = False) -> str:
        """The address MTurk's frame opens: our ExternalURL with MTurk's query parameters."""
        with self.lock:
            if preview:
                hit = next(iter(self.hits.values()))
                return f"{hit.url}?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId={hit.id}"
            assignment = self.assignments[assignment_id]
            hit = self.hits[assignment.hit_id]
        query = urlencode(
            {
                "assignmentId": assignment.id,
                "hitId": hit.id,
                "workerId": assignment.worker_id,
                "turkSubmitTo": self.endpoint_url,
            }
        )
        return f"{hit.url}?{query}"

    def return_assignment(self, assignment_id: str) -> None:
        """The worker returns an accepted HIT: the assignment disappears, the place reopens."""
        with self.lock:
            if self.assignments[assignment_id].status != "Accepted":
                raise ValueError("only an accepted (unsubmitted) assignment can be returned")
            del self.assignments[assignment_id]

    def external_submit(self, fields: dict[str, str]) -> None:
        """What MTurk does with the form our page posts to /mturk/externalSubmit."""
        with self.lock:
            assignment_id = fields.get("assignmentId", "")
            assignment = self.assignments.get(assignment_id)
            if assignment is None or assignment.status != "Accepted":
                raise RequestError(f"assignment {assignment_id!r} is not open for submission")
            answers = {k: v for k, v in fields.items() if k != "assignmentId"}
            if not answers:
                raise RequestError("the form must carry at least one field besides assignmentId")
            assignment.answer = _answer_xml(answers)
            assignment.status = "Submitted"
            assignment.submitted = time.time()
            self.submissions.append(dict(fields))

    def lose_next_response(self, operation: str, times: int = 1) -> None:
        """Do the next `operation` but answer ServiceFault (HTTP 500), as if the answer got lost."""
        with self.lock:
            self.lost[operation] = self.lost.get(operation, 0) + times

    def cut_next_responses(self, operation: str, times: int = 1, after: int = 0) -> None:
        """Handle the next `times` requests for `operation` (paying, creating, or refusing as
        MTurk would) and then close the connection unanswered: the call succeeded at MTurk,
        or was refused there, but the client sees only a dropped connection (botocore tries
        MAX_ATTEMPTS + 1 times). The first `after` requests are answered as usual."""
        with self.lock:
            self.cut[operation] = self.cut.get(operation, 0) + times
            self.spared[operation] = self.spared.get(operation, 0) + after

    def pass_time(self, seconds: float) -> None:
        """Move MTurk's clock on: request tokens older than 24 hours are forgotten."""
        with self.lock:
            self.skew += seconds

    def calls_to(self, operation: str) -> int:
        """How many requests for `operation` arrived (retries included)."""
        with self.lock:
            return sum(1 for name, _ in self.calls if name == operation)

    def bonuses(self) -> list[Payment]:
        with self.lock:
            return [p for p in self.payments if p.kind == "bonus"]

    # -- dispatch ----------------------------------------------------------------------------

    def handle(self, operation: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        names = self.model.operation_names
        if operation not in names:
            raise RequestError(
                f"{operation} is not an MTurk operation", kind="UnknownOperationException"
            )
        with self.lock:
            self.calls.append((operation, body))
            self.request_id = request_id
            try:
                result = self._call(operation, body)
            except RequestError:
                if self._cut_now(operation):
                    raise ResponseCut(operation) from None
                raise
            if self._cut_now(operation):
                raise ResponseCut(operation)
            if self.lost.get(operation):
                self.lost[operation] -= 1
                raise RequestError(
                    "We encountered an internal error. Please try the request again.",
                    turk_code="AWS.ServiceUnavailable",
                    kind="ServiceFault",
                )
            return result

    def _call(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        _check_shape(self.model.operation_model(operation).input_shape, body, "")
        method = getattr(self, "op_" + operation, None)
        if method is None:
            raise RequestError(f"the test server does not implement {operation}")
        result: dict[str, Any] = method(body)
        return result

    def _cut_now(self, operation: str) -> bool:
        """Whether this answer is lost (see cut_next_responses)."""
        if self.spared.get(operation):
            self.spared[operation] -= 1
            return False
        if self.cut.get(operation):
            self.cut[operation] -= 1
            return True
        return False
