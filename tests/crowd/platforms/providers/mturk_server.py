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

import json
import random
import re
import string
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.crowd.platforms.providers.local_server import LocalServer

TARGET_PREFIX = "MTurkRequesterServiceV20170117."
CONTENT_TYPE = "application/x-amz-json-1.1"
EXTERNAL_QUESTION_NS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
    "ExternalQuestion.xsd"
)
# MTurk takes whole cents at most; botocore's model pattern would also let "5." through.
AMOUNT = re.compile(r"^\d+(\.\d{1,2})?$")
CREDENTIAL_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/us-east-1/mturk-requester/aws4_request")
LOCAL_HOSTS = ("127.0.0.1", "localhost")
ID_CHARS = string.ascii_uppercase + string.digits
MIN_SECONDS = 30
MAX_SECONDS = 365 * 24 * 3600
MAX_AUTO_APPROVAL = 30 * 24 * 3600
MAX_QUESTION_BYTES = 65535
MAX_FEEDBACK = 1024
DEFAULT_PAGE = 10


class RequestError(Exception):
    """What the handler answers as {"__type": code, "Message": ...}."""

    def __init__(
        self, message: str, turk_code: str = "AWS.ParameterOutOfRange", kind: str = "RequestError"
    ) -> None:
        super().__init__(message)
        # MTurk ends its messages with a millisecond timestamp, e.g. "... (1626172412406)".
        self.message = f"{message} ({int(time.time() * 1000)})"
        self.turk_code = turk_code
        self.kind = kind


@dataclass
class HitType:
    id: str
    title: str
    description: str
    reward: Decimal
    duration: int
    auto_approval_delay: int
    keywords: str
    qualifications: list[dict[str, Any]]


@dataclass
class Hit:
    id: str
    hit_type: HitType
    group_id: str
    question: str
    url: str
    lifetime: int
    max_assignments: int
    annotation: str | None
    created: float


@dataclass
class Assignment:
    id: str
    hit_id: str
    worker_id: str
    answer: str
    status: str = "Submitted"
    accepted: float = field(default_factory=time.time)
    submitted: float = field(default_factory=time.time)
    approved: float | None = None
    rejected: float | None = None
    feedback: str | None = None


@dataclass(frozen=True)
class Payment:
    """Money that left the requester's balance: a reward on approval, or a bonus."""

    kind: str
    worker_id: str
    assignment_id: str
    amount: Decimal
    fee: Decimal
    reason: str = ""


def _fee(amount: Decimal, assignments: int) -> Decimal:
    # Kept apart from crowd.platforms.providers.mturk_api on purpose: the server is the reference.
    rate = Decimal("0.40") if assignments >= 10 else Decimal("0.20")
    return max(Decimal("0.01"), (amount * rate).quantize(Decimal("0.01"), ROUND_HALF_UP))


def _load_model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("mturk")


class MTurkServer(LocalServer):
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
        self.tokens: dict[tuple[str, str], str] = {}
        self.lost: dict[str, int] = {}
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
            if time.time() > self.expirations.get(hit_id, hit.created + hit.lifetime):
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

    def calls_to(self, operation: str) -> int:
        """How many requests for `operation` arrived (retries included)."""
        with self.lock:
            return sum(1 for name, _ in self.calls if name == operation)

    def bonuses(self) -> list[Payment]:
        with self.lock:
            return [p for p in self.payments if p.kind == "bonus"]

    # -- dispatch ----------------------------------------------------------------------------

    def handle(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        names = self.model.operation_names
        if operation not in names:
            raise RequestError(
                f"{operation} is not an MTurk operation", kind="UnknownOperationException"
            )
        with self.lock:
            self.calls.append((operation, body))
            _check_shape(self.model.operation_model(operation).input_shape, body, "")
            method = getattr(self, "op_" + operation, None)
            if method is None:
                raise RequestError(f"the test server does not implement {operation}")
            result: dict[str, Any] = method(body)
            if self.lost.get(operation):
                self.lost[operation] -= 1
                raise RequestError(
                    "We encountered an internal error. Please try the request again.",
                    turk_code="AWS.ServiceUnavailable",
                    kind="ServiceFault",
                )
            return result

    def _new_id(self) -> str:
        return "3" + "".join(self.rng.choice(ID_CHARS) for _ in range(29))

    def _hit(self, hit_id: str) -> Hit:
        hit = self.hits.get(hit_id)
        if hit is None:
            raise RequestError(
                f"Hit {hit_id} does not exist.", "AWS.MechanicalTurk.HITDoesNotExist"
            )
        return hit

    def _assignment(self, assignment_id: str) -> Assignment:
        assignment = self.assignments.get(assignment_id)
        if assignment is None:
            raise RequestError(
                f"Assignment {assignment_id} does not exist.",
                "AWS.MechanicalTurk.AssignmentDoesNotExist",
            )
        return assignment

    def _pay(self, payment: Payment) -> None:
        total = payment.amount + payment.fee
        if total > self.balance:
            raise RequestError(
                "You do not have enough funds to complete this request.",
                "AWS.MechanicalTurk.InsufficientFunds",
            )
        self.balance -= total
        self.payments.append(payment)

    def _seen(self, operation: str, token: str | None) -> str | None:
        return self.tokens.get((operation, token)) if token else None

    # -- operations ------------------------------------------------------------------------

    def op_GetAccountBalance(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"AvailableBalance": str(self.balance.quantize(Decimal("0.01")))}

    def op_CreateHITType(self, body: dict[str, Any]) -> dict[str, Any]:
        reward = _amount(body["Reward"], "Reward")
        if not body["Title"].strip() or len(body["Title"]) > 128:
            raise RequestError("Title must be 1 to 128 characters.")
        if not body["Description"].strip() or len(body["Description"]) > 2000:
            raise RequestError("Description must be 1 to 2000 characters.")
        if len(body.get("Keywords", "")) > 1000:
            raise RequestError("Keywords must be at most 1000 characters.")
        duration = _range(body["AssignmentDurationInSeconds"], "AssignmentDurationInSeconds")
        delay = body.get("AutoApprovalDelayInSeconds", MAX_AUTO_APPROVAL)
        _range(delay, "AutoApprovalDelayInSeconds", 0, MAX_AUTO_APPROVAL)
        qualifications = body.get("QualificationRequirements", [])
        _check_qualifications(qualifications)
        # MTurk answers the existing HIT type's id when every property is the same.
        for hit_type in self.hit_types.values():
            if (
                hit_type.title,
                hit_type.description,
                hit_type.reward,
                hit_type.duration,
                hit_type.auto_approval_delay,
                hit_type.keywords,
                hit_type.qualifications,
            ) == (
                body["Title"],
                body["Description"],
                reward,
                duration,
                delay,
                body.get("Keywords", ""),
                qualifications,
            ):
                return {"HITTypeId": hit_type.id}
        hit_type = HitType(
            id=self._new_id(),
            title=body["Title"],
            description=body["Description"],
            reward=reward,
            duration=duration,
            auto_approval_delay=delay,
            keywords=body.get("Keywords", ""),
            qualifications=qualifications,
        )
        self.hit_types[hit_type.id] = hit_type
        return {"HITTypeId": hit_type.id}

    def op_CreateHITWithHITType(self, body: dict[str, Any]) -> dict[str, Any]:
        hit_type = self.hit_types.get(body["HITTypeId"])
        if hit_type is None:
            raise RequestError(
                f"HITType {body['HITTypeId']} does not exist.",
                "AWS.MechanicalTurk.HITTypeDoesNotExist",
            )
        token = body.get("UniqueRequestToken")
        earlier = self._seen("CreateHITWithHITType", token)
        if earlier is not None:
            named = f" The HIT is {earlier}." if self.hit_id_in_duplicate else ""
            raise RequestError(
                f'The idempotency token "{token}" has already been processed.{named}',
                "AWS.MechanicalTurk.HitAlreadyExists",
            )
        lifetime = _range(body["LifetimeInSeconds"], "LifetimeInSeconds")
        max_assignments = _range(body.get("MaxAssignments", 1), "MaxAssignments", 1, 1_000_000)
        if "HITLayoutId" in body or "Question" not in body:
            raise RequestError("The test server takes HITs with a Question (ExternalQuestion).")
        url = _check_external_question(body["Question"])
        hit = Hit(
            id=self._new_id(),
            hit_type=hit_type,
            group_id=hit_type.id,
            question=body["Question"],
            url=url,
            lifetime=lifetime,
            max_assignments=max_assignments,
            annotation=body.get("RequesterAnnotation"),
            created=time.time(),
        )
        self.hits[hit.id] = hit
        if token:
            self.tokens[("CreateHITWithHITType", token)] = hit.id
        return {"HIT": self._hit_view(hit)}

    def _hit_view(self, hit: Hit) -> dict[str, Any]:
        hit_type = hit.hit_type
        done = [a for a in self.assignments.values() if a.hit_id == hit.id]
        view: dict[str, Any] = {
            "HITId": hit.id,
            "HITTypeId": hit_type.id,
            "HITGroupId": hit.group_id,
            "CreationTime": hit.created,
            "Title": hit_type.title,
            "Description": hit_type.description,
            "Question": hit.question,
            "Keywords": hit_type.keywords,
            "HITStatus": "Assignable" if len(done) < hit.max_assignments else "Reviewable",
            "MaxAssignments": hit.max_assignments,
            "Reward": str(hit_type.reward.quantize(Decimal("0.01"))),
            "AutoApprovalDelayInSeconds": hit_type.auto_approval_delay,
            "Expiration": hit.created + hit.lifetime,
            "AssignmentDurationInSeconds": hit_type.duration,
            "QualificationRequirements": hit_type.qualifications,
            "HITReviewStatus": "NotReviewed",
            "NumberOfAssignmentsPending": 0,
            "NumberOfAssignmentsAvailable": hit.max_assignments - len(done),
            "NumberOfAssignmentsCompleted": sum(1 for a in done if a.status != "Submitted"),
        }
        if hit.annotation is not None:
            view["RequesterAnnotation"] = hit.annotation
        return view

    def op_GetHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"HIT": self._hit_view(self._hit(body["HITId"]))}

    def op_ListHITs(self, body: dict[str, Any]) -> dict[str, Any]:
        hits = sorted(self.hits.values(), key=lambda h: h.created)
        page, next_token = _page(hits, body, "hits")
        return {
            "HITs": [self._hit_view(h) for h in page],
            "NumResults": len(page),
            **next_token,
        }

    def op_ListAssignmentsForHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        hit = self._hit(body["HITId"])
        statuses = body.get("AssignmentStatuses") or ["Submitted", "Approved", "Rejected"]
        found = [
            a for a in self.assignments.values() if a.hit_id == hit.id and a.status in statuses
        ]
        page, next_token = _page(found, body, hit.id)
        return {
            "Assignments": [_assignment_view(a) for a in page],
            "NumResults": len(page),
            **next_token,
        }

    def op_ApproveAssignment(self, body: dict[str, Any]) -> dict[str, Any]:
        assignment = self._assignment(body["AssignmentId"])
        override = body.get("OverrideRejection", False)
        if not (assignment.status == "Submitted" or (assignment.status == "Rejected" and override)):
            raise RequestError(
                f"This operation can be called with a status of: Submitted "
                f"(assignment {assignment.id} is {assignment.status}).",
                "AWS.MechanicalTurk.InvalidAssignmentState",
            )
        _feedback(body.get("RequesterFeedback"), required=False)
        hit = self.hits[assignment.hit_id]
        reward = hit.hit_type.reward
        self._pay(
            Payment(
                "reward",
                assignment.worker_id,
                assignment.id,
                reward,
                _fee(reward, hit.max_assignments),
            )
        )
        assignment.status = "Approved"
        assignment.approved = time.time()
        assignment.feedback = body.get("RequesterFeedback")
        return {}

    def op_RejectAssignment(self, body: dict[str, Any]) -> dict[str, Any]:
        assignment = self._assignment(body["AssignmentId"])
        if assignment.status != "Submitted":
            raise RequestError(
                f"This operation can be called with a status of: Submitted "
                f"(assignment {assignment.id} is {assignment.status}).",
                "AWS.MechanicalTurk.InvalidAssignmentState",
            )
        assignment.feedback = _feedback(body["RequesterFeedback"], required=True)
        assignment.status = "Rejected"
        assignment.rejected = time.time()
        return {}

    def op_SendBonus(self, body: dict[str, Any]) -> dict[str, Any]:
        token = body.get("UniqueRequestToken")
        if self._seen("SendBonus", token) is not None:
            raise RequestError(
                f'The idempotency token "{token}" has already been processed.',
                "AWS.MechanicalTurk.DuplicateRequest",
            )
        assignment = self._assignment(body["AssignmentId"])
        if assignment.worker_id != body["WorkerId"]:
            raise RequestError(
                f"Assignment {assignment.id} was not done by worker {body['WorkerId']}.",
                "AWS.MechanicalTurk.InvalidParameterValue",
            )
        amount = _amount(body["BonusAmount"], "BonusAmount")
        if not body["Reason"].strip():
            raise RequestError("Reason must not be empty: the worker sees it.")
        self._pay(
            Payment(
                "bonus",
                body["WorkerId"],
                assignment.id,
                amount,
                _fee(amount, 1),
                body["Reason"],
            )
        )
        if token:
            self.tokens[("SendBonus", token)] = assignment.id
        return {}

    def op_GetAssignment(self, body: dict[str, Any]) -> dict[str, Any]:
        assignment = self._assignment(body["AssignmentId"])
        if assignment.status == "Accepted":
            raise RequestError(
                f"Assignment {assignment.id} is not submitted yet.",
                "AWS.MechanicalTurk.AssignmentDoesNotExist",
            )
        return {
            "Assignment": _assignment_view(assignment),
            "HIT": self._hit_view(self.hits[assignment.hit_id]),
        }

    def op_UpdateExpirationForHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        hit = self._hit(body["HITId"])
        when = body["ExpireAt"]
        self.expirations[hit.id] = float(when)
        return {}

    def op_CreateAdditionalAssignmentsForHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        hit = self._hit(body["HITId"])
        token = body.get("UniqueRequestToken")
        if self._seen("CreateAdditionalAssignmentsForHIT", token) is not None:
            raise RequestError(
                f'The idempotency token "{token}" has already been processed.',
                "AWS.MechanicalTurk.DuplicateRequest",
            )
        more = body["NumberOfAdditionalAssignments"]
        if not 1 <= more <= 1_000_000:
            raise RequestError("NumberOfAdditionalAssignments must be 1 or more.")
        hit.max_assignments += more
        if token:
            self.tokens[("CreateAdditionalAssignmentsForHIT", token)] = hit.id
        return {}

    def op_AssociateQualificationWithWorker(self, body: dict[str, Any]) -> dict[str, Any]:
        self.qualifications[(body["WorkerId"], body["QualificationTypeId"])] = int(
            body.get("IntegerValue", 1)
        )
        return {}

    def op_DisassociateQualificationFromWorker(self, body: dict[str, Any]) -> dict[str, Any]:
        self.qualifications.pop((body["WorkerId"], body["QualificationTypeId"]), None)
        return {}

    def op_CreateWorkerBlock(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body["Reason"].strip():
            raise RequestError("Reason must not be empty.")
        self.blocks[body["WorkerId"]] = body["Reason"]
        return {}

    def op_DeleteWorkerBlock(self, body: dict[str, Any]) -> dict[str, Any]:
        # Documented: unblocking a worker who is not blocked succeeds.
        self.blocks.pop(body["WorkerId"], None)
        return {}

    def op_NotifyWorkers(self, body: dict[str, Any]) -> dict[str, Any]:
        subject, text, workers = body["Subject"], body["MessageText"], body["WorkerIds"]
        if not subject.strip() or len(subject) > 200:
            raise RequestError("Subject must be 1 to 200 characters.")
        if not text.strip() or len(text) > 4096:
            raise RequestError("MessageText must be 1 to 4096 characters.")
        if not 1 <= len(workers) <= 100:
            raise RequestError(f"WorkerIds holds {len(workers)} ids; give 1 to 100 per call.")
        # MTurk only e-mails workers who have worked for this requester.
        known = {a.worker_id for a in self.assignments.values()}
        failures = [
            {
                "NotifyWorkersFailureCode": "HardFailure",
                "NotifyWorkersFailureMessage": "Cannot send notification to a worker who has "
                "not done work for you.",
                "WorkerId": worker,
            }
            for worker in workers
            if worker not in known
        ]
        sent = [worker for worker in workers if worker in known]
        self.notifications.append((sent, subject, text))
        return {"NotifyWorkersFailureStatuses": failures}


# -- checks ------------------------------------------------------------------------------------


def _check_shape(shape: Any, value: Any, where: str) -> None:
    """Check `value` against botocore's model of MTurk's input: what MTurk's front end does."""
    label = where or "request"
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            raise RequestError(f"{label} must be an object.")
        for name in value:
            if name not in shape.members:
                raise RequestError(f"{label} has an unknown member {name}.")
        for name in shape.required_members:
            if name not in value:
                raise RequestError(f"{label} is missing the required member {name}.")
        for name, item in value.items():
            _check_shape(shape.members[name], item, f"{where}.{name}" if where else name)
    elif kind == "list":
        if not isinstance(value, list):
            raise RequestError(f"{label} must be a list.")
        for index, item in enumerate(value):
            _check_shape(shape.member, item, f"{where}[{index}]")
    elif kind == "string":
        if not isinstance(value, str):
            raise RequestError(f"{label} must be a string.")
        meta = shape.metadata
        if "min" in meta and len(value) < meta["min"] or "max" in meta and len(value) > meta["max"]:
            raise RequestError(f"{label} must be {meta.get('min', 0)} to {meta.get('max')} long.")
        if "pattern" in meta and not re.match(meta["pattern"], value):
            raise RequestError(f"Value {value!r} at {label} must match {meta['pattern']}.")
        if shape.enum and value not in shape.enum:
            raise RequestError(f"{label} must be one of {', '.join(shape.enum)}.")
    elif kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise RequestError(f"{label} must be a whole number.")
        meta = shape.metadata
        if "min" in meta and value < meta["min"] or "max" in meta and value > meta["max"]:
            raise RequestError(f"{label} must be in {meta.get('min')}..{meta.get('max')}.")
    elif kind == "boolean" and not isinstance(value, bool):
        raise RequestError(f"{label} must be true or false.")


def _amount(value: str, name: str) -> Decimal:
    if not AMOUNT.match(value):
        raise RequestError(
            f"{name} {value!r} is not a valid amount: use dollars with at most two decimals, "
            "without a currency sign.",
            "AWS.MechanicalTurk.InvalidCurrencyAmount",
        )
    amount = Decimal(value)
    if amount <= 0:
        raise RequestError(f"{name} must be more than 0.00.")
    return amount


def _range(value: int, name: str, low: int = MIN_SECONDS, high: int = MAX_SECONDS) -> int:
    if not low <= value <= high:
        raise RequestError(f"{name} {value} is not in {low}..{high}.")
    return value


def _feedback(value: str | None, required: bool) -> str | None:
    if value is None or not value.strip():
        if required:
            raise RequestError("RequesterFeedback is required: the worker sees why.")
        return value
    if len(value) > MAX_FEEDBACK:
        raise RequestError(f"RequesterFeedback is longer than {MAX_FEEDBACK} characters.")
    return value


def _check_qualifications(requirements: list[dict[str, Any]]) -> None:
    if len(requirements) > 10:
        raise RequestError("A HIT can have at most 10 QualificationRequirements.")
    for requirement in requirements:
        type_id = requirement["QualificationTypeId"]
        if not re.match(r"^[A-Z0-9]{1,64}$", type_id):
            raise RequestError(
                f"QualificationTypeId {type_id!r} does not exist.",
                "AWS.MechanicalTurk.QualificationTypeDoesNotExist",
            )
        comparator = requirement["Comparator"]
        integers = requirement.get("IntegerValues", [])
        locales = requirement.get("LocaleValues", [])
        if integers and locales:
            raise RequestError("Give IntegerValues or LocaleValues, not both.")
        values = integers or locales
        if comparator in ("Exists", "DoesNotExist"):
            if values:
                raise RequestError(f"{comparator} takes no values.")
        elif comparator in ("In", "NotIn"):
            if not values:
                raise RequestError(f"{comparator} needs at least one value.")
        elif len(values) != 1:
            raise RequestError(f"{comparator} needs exactly one value.")
        if locales and comparator not in ("EqualTo", "NotEqualTo", "In", "NotIn"):
            raise RequestError("LocaleValues only go with EqualTo, NotEqualTo, In, NotIn.")
        for locale in locales:
            if not re.match(r"^[A-Z]{2}$", locale["Country"]):
                raise RequestError(f"Country {locale['Country']!r} is not an ISO 3166 code.")
        if "RequiredToPreview" in requirement and "ActionsGuarded" in requirement:
            raise RequestError("Give RequiredToPreview or ActionsGuarded, not both.")


def _check_external_question(question: str) -> str:
    if len(question.encode()) > MAX_QUESTION_BYTES:
        raise RequestError(f"Question is larger than {MAX_QUESTION_BYTES} bytes.")
    invalid = "The value of the Question parameter is not a valid ExternalQuestion"
    try:
        root = ET.fromstring(question)
    except ET.ParseError as error:
        raise RequestError(f"{invalid}: {error}.") from None
    ns = "{" + EXTERNAL_QUESTION_NS + "}"
    if root.tag != ns + "ExternalQuestion":
        raise RequestError(f"{invalid}: the root must be ExternalQuestion in its namespace.")
    children = [child.tag for child in root]
    if children != [ns + "ExternalURL", ns + "FrameHeight"]:
        raise RequestError(f"{invalid}: it must hold ExternalURL then FrameHeight.")
    url = (root.findtext(ns + "ExternalURL") or "").strip()
    parts = urlsplit(url)
    local_http = parts.scheme == "http" and parts.hostname in LOCAL_HOSTS
    if not (parts.scheme == "https" and parts.hostname) and not local_http:
        raise RequestError(f"{invalid}: ExternalURL {url!r} must be an https URL.")
    height = (root.findtext(ns + "FrameHeight") or "").strip()
    if not height.isdigit():
        raise RequestError(f"{invalid}: FrameHeight {height!r} must be a whole number.")
    return url


def _page(items: list[Any], body: dict[str, Any], scope: str) -> tuple[list[Any], dict[str, str]]:
    """One page of `items` and the NextToken for the next (also after an exactly full page)."""
    size = body.get("MaxResults", DEFAULT_PAGE)
    start = 0
    if "NextToken" in body:
        match = re.match(rf"^{re.escape(scope)}:(\d+)$", body["NextToken"])
        if not match:
            raise RequestError("The NextToken is not valid for this request.")
        start = int(match.group(1))
    page = items[start : start + size]
    # Like MTurk, a full page comes with a token even when nothing follows it.
    more = {"NextToken": f"{scope}:{start + size}"} if len(page) == size else {}
    return page, more


def _assignment_view(assignment: Assignment) -> dict[str, Any]:
    view: dict[str, Any] = {
        "AssignmentId": assignment.id,
        "WorkerId": assignment.worker_id,
        "HITId": assignment.hit_id,
        "AssignmentStatus": assignment.status,
        "AcceptTime": assignment.accepted,
        "SubmitTime": assignment.submitted,
        "Answer": assignment.answer,
    }
    if assignment.approved is not None:
        view["ApprovalTime"] = assignment.approved
    if assignment.rejected is not None:
        view["RejectionTime"] = assignment.rejected
    if assignment.feedback is not None:
        view["RequesterFeedback"] = assignment.feedback
    return view


def _answer_xml(answers: dict[str, str]) -> str:
    """MTurk's QuestionFormAnswers, as an ExternalQuestion's form post is stored."""
    ns = (
        "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/"
        "QuestionFormAnswers.xsd"
    )
    root = ET.Element("QuestionFormAnswers", xmlns=ns)
    for key, value in answers.items():
        answer = ET.SubElement(root, "Answer")
        ET.SubElement(answer, "QuestionIdentifier").text = key
        ET.SubElement(answer, "FreeText").text = value
    return '<?xml version="1.0" encoding="ASCII"?>' + ET.tostring(root, encoding="unicode")


def _handler(server: MTurkServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as botocore's connection pool expects.
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle each answer would wait ~40 ms.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test output is no place for an access log

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.split("?")[0] == "/mturk/externalSubmit":
                self._external_submit(raw)
                return
            try:
                operation, body = self._parse(raw)
                result = server.handle(operation, body)
            except RequestError as error:
                status = 500 if error.kind == "ServiceFault" else 400
                self._reply(
                    status,
                    {
                        "__type": error.kind,
                        "Message": error.message,
                        "TurkErrorCode": error.turk_code,
                    },
                )
                return
            self._reply(200, result)

        def _parse(self, raw: bytes) -> tuple[str, dict[str, Any]]:
            if self.path != "/":
                raise RequestError(f"MTurk answers at /, not {self.path}.")
            target = self.headers.get("X-Amz-Target", "")
            if not target.startswith(TARGET_PREFIX):
                raise RequestError(
                    f"X-Amz-Target {target!r} is not {TARGET_PREFIX}<Operation>.",
                    kind="UnknownOperationException",
                )
            if self.headers.get("Content-Type") != CONTENT_TYPE:
                raise RequestError(f"Content-Type must be {CONTENT_TYPE}.")
            if not CREDENTIAL_SCOPE.search(self.headers.get("Authorization", "")):
                raise RequestError(
                    "The request is not signed with SigV4 for mturk-requester in us-east-1.",
                    kind="UnrecognizedClientException",
                )
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                raise RequestError("The body is not JSON.", kind="SerializationException") from None
            return target[len(TARGET_PREFIX) :], body

        def _external_submit(self, raw: bytes) -> None:
            fields = {key: values[-1] for key, values in parse_qs(raw.decode()).items()}
            try:
                server.external_submit(fields)
            except RequestError as error:
                page, status = f"<p>{error.message}</p>".encode(), 400
            else:
                page, status = b"<p>Thank you: your HIT was submitted.</p>", 200
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-amzn-RequestId", f"{random.getrandbits(64):016x}")
            self.end_headers()
            self.wfile.write(data)

    return Handler
