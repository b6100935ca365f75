"""The MTurk stand-in's records and checks: constants, errors, HITs, assignments, payments.

Everything here is plain data and pure functions; mturk_server.MTurkServer keeps the state and
mturk_operations.MTurkOperations answers the operations with them.
"""

from __future__ import annotations

import re
import string
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from urllib.parse import urlsplit

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
# MTurk remembers a UniqueRequestToken for 24 hours; a later call with it is a new request.
TOKEN_TTL = 24 * 3600


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


class ResponseCut(Exception):
    """The request was handled, but its answer never reaches the client (a network cut)."""


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
    granted: float = field(default_factory=time.time)


def _fee(amount: Decimal, assignments: int) -> Decimal:
    # Kept apart from crowd.platforms.providers.mturk_api on purpose: the server is the reference.
    rate = Decimal("0.40") if assignments >= 10 else Decimal("0.20")
    return max(Decimal("0.01"), (amount * rate).quantize(Decimal("0.01"), ROUND_HALF_UP))


def _load_model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("mturk")


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


def _bonus_view(payment: Payment) -> dict[str, Any]:
    """A BonusPayment as ListBonusPayments answers it (no request token: MTurk shows none)."""
    return {
        "WorkerId": payment.worker_id,
        "BonusAmount": str(payment.amount.quantize(Decimal("0.01"))),
        "AssignmentId": payment.assignment_id,
        "Reason": payment.reason,
        "GrantTime": payment.granted,
    }


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
