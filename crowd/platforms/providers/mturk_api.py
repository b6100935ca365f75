"""The pieces of an MTurk provider that talk to MTurk: money, questions, qualifications, calls.

Everything here goes through a real boto3 ``mturk`` client (made by make_client) and checks
its arguments first, so that a bad reward or URL fails here with a hint instead of as an
opaque RequestError from MTurk. Errors MTurk itself answers with (botocore's ClientError)
are left to the caller, except the ones that mean "this was already done", which make a
retried publish or bonus harmless.

boto3 is imported inside functions: importing this module must stay free, and most
installations never talk to MTurk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from crowd.exceptions import ConfigurationError, InvalidAction, ValidationError

# A boto3 client is built at run time from botocore's service model; there is no class to name.
MTurkClient = Any

SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
# MTurk's requester API lives in us-east-1 only.
REGION = "us-east-1"

EXTERNAL_QUESTION_NS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
    "ExternalQuestion.xsd"
)
MAX_URL_LENGTH = 1024
MAX_FRAME_HEIGHT = 4000

# System qualification types every MTurk account has.
APPROVAL_RATE_QUALIFICATION = "000000000000000000L0"  # Worker_PercentAssignmentsApproved
LOCALE_QUALIFICATION = "00000000000000000071"  # Worker_Locale
COMPARATORS = (
    "LessThan",
    "LessThanOrEqualTo",
    "GreaterThan",
    "GreaterThanOrEqualTo",
    "EqualTo",
    "NotEqualTo",
    "Exists",
    "DoesNotExist",
    "In",
    "NotIn",
)
# Comparators that test presence only and take no value.
VALUELESS_COMPARATORS = ("Exists", "DoesNotExist")
MAX_QUALIFICATION_REQUIREMENTS = 10

# MTurk's published pricing (https://www.mturk.com/pricing): a 20% commission on rewards and
# bonuses, 20% more on the reward of HITs with 10 or more assignments, and at least $0.01
# per assignment or bonus.
FEE_RATE = Decimal("0.20")
LARGE_HIT_FEE_RATE = Decimal("0.40")
LARGE_HIT_ASSIGNMENTS = 10
MINIMUM_FEE = Decimal("0.01")
CENT = Decimal("0.01")
MAX_REWARD = Decimal("1000")

# MTurk's documented limits (API reference, 2017-01-17).
MAX_TITLE = 128
MAX_DESCRIPTION = 2000
MAX_KEYWORDS = 1000
MIN_DURATION_S = 30
MAX_DURATION_S = 365 * 24 * 3600
MAX_AUTO_APPROVAL_DELAY_S = 30 * 24 * 3600
MAX_ASSIGNMENTS = 1_000_000
MAX_FEEDBACK = 1024
MAX_TOKEN = 64
MAX_SUBJECT = 200
MAX_MESSAGE = 4096
NOTIFY_BATCH = 100
PAGE_SIZE = 100
# Tries per call, the first included, with botocore's exponential backoff between them.
MAX_ATTEMPTS = 5

ENTITY_ID = re.compile(r"^[A-Z0-9]{1,64}$")
WORKER_ID = re.compile(r"^A[A-Z0-9]{1,63}$")
COUNTRY = re.compile(r"^[A-Z]{2}$")
CREDENTIALS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
# How MTurk says a UniqueRequestToken was seen before; seen in the wild:
# 'The idempotency token "..." has already been processed. (1626172412406)'.
ALREADY_DONE = re.compile(
    r"already been processed|already been used|already exists|is a duplicate", re.IGNORECASE
)
# HIT ids are 30 characters; at least 20 keeps the millisecond stamp MTurk appends out.
HIT_ID_IN_MESSAGE = re.compile(r"\b[A-Z0-9]{20,64}\b")


def make_client(
    sandbox: bool,
    endpoint_url: str | None = None,
    region: str = REGION,
    **credentials: str,
) -> MTurkClient:
    """A boto3 MTurk client for the sandbox or production, or for `endpoint_url` when given."""
    unknown = sorted(set(credentials) - set(CREDENTIALS))
    if unknown:
        raise ConfigurationError(
            f"unknown MTurk credential argument(s) {', '.join(unknown)}: "
            f"pass only {', '.join(CREDENTIALS)}"
        )
    if endpoint_url is not None and not endpoint_url.startswith(("https://", "http://")):
        raise ConfigurationError(
            f"CROWD_MTURK_ENDPOINT_URL={endpoint_url!r} is not a URL: use https://HOST[:PORT], "
            "or leave it unset for MTurk's own endpoint"
        )
    import boto3
    from botocore.config import Config

    # Retrying is safe because every call that creates a HIT or moves money carries a
    # UniqueRequestToken; "standard" mode also retries MTurk's 5xx ServiceFaults.
    config = Config(
        retries={"mode": "standard", "max_attempts": MAX_ATTEMPTS},
        connect_timeout=10,
        read_timeout=60,
    )
    return boto3.client(
        "mturk",
        region_name=region,
        endpoint_url=endpoint_url or (SANDBOX_ENDPOINT if sandbox else PRODUCTION_ENDPOINT),
        config=config,
        **credentials,
    )


def _decimal(amount: Decimal | str | float | int, where: str) -> Decimal:
    # bool is an int; True dollars is a bug, not an amount.
    if isinstance(amount, bool) or not isinstance(amount, Decimal | str | float | int):
        raise ValidationError(f"{amount!r} is not an amount of dollars: use e.g. '0.50'", where)
    try:
        # Through str() so that a float like 0.1 means 0.1, not its binary expansion.
        value = amount if isinstance(amount, Decimal) else Decimal(str(amount).strip())
    except InvalidOperation:
        raise ValidationError(
            f"{amount!r} is not an amount of dollars: use e.g. '0.50'", where
        ) from None
    if not value.is_finite():
        raise ValidationError(f"{amount!r} is not an amount of dollars: use e.g. '0.50'", where)
    return value


def format_reward(amount: Decimal | str | float | int, where: str = "reward") -> str:
    """The dollar amount as MTurk's CurrencyAmount string with two decimals, e.g. '0.50'."""
    value = _decimal(amount, where)
    if value <= 0:
        raise ValidationError(f"{amount!r} must be more than $0.00: use e.g. '0.50'", where)
    if value > MAX_REWARD:
        raise ValidationError(
            f"{amount!r} is more than ${MAX_REWARD}: this is surely a typo; split large "
            "payments into smaller bonuses if it is not",
            where,
        )
    if value != value.quantize(CENT):
        raise ValidationError(
            f"{amount!r} has fractions of a cent; MTurk pays whole cents: round it, e.g. "
            f"'{value.quantize(CENT, ROUND_HALF_UP)}'",
            where,
        )
    return str(value.quantize(CENT))


def external_question(url: str, frame_height: int = 0, allow_http: bool = False) -> str:
    """MTurk's ExternalQuestion XML that shows `url` in a frame (height 0: the whole window)."""
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise ValidationError(
            f"{url!r} contains spaces or control characters: percent-encode them", "url"
        )
    parts = urlsplit(url)
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes or not parts.hostname:
        raise ValidationError(
            f"{url!r} is not an https URL: MTurk shows only https pages in its frame; "
            "serve the study over https (CROWD_BASE_URL=https://...)",
            "url",
        )
    if len(url) > MAX_URL_LENGTH:
        raise ValidationError(
            f"the URL is {len(url)} characters long; MTurk takes at most {MAX_URL_LENGTH}: "
            "move parameters into the study instead of the query string",
            "url",
        )
    if isinstance(frame_height, bool) or not isinstance(frame_height, int):
        raise ValidationError(f"{frame_height!r} is not a whole number of pixels", "frame_height")
    if not 0 <= frame_height <= MAX_FRAME_HEIGHT:
        raise ValidationError(
            f"{frame_height} is not between 0 and {MAX_FRAME_HEIGHT} pixels "
            "(0 lets the frame fill the window)",
            "frame_height",
        )
    return (
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_NS}">'
        f"<ExternalURL>{escape(url)}</ExternalURL>"
        f"<FrameHeight>{frame_height}</FrameHeight>"
        "</ExternalQuestion>"
    )


def _entity_id(value: str, where: str) -> str:
    if not isinstance(value, str) or not ENTITY_ID.match(value):
        raise ValidationError(
            f"{value!r} is not an MTurk id (capital letters and digits, at most 64): "
            "copy it from the requester site or from the API's answer",
            where,
        )
    return value


def _worker_id(value: str, where: str = "worker_id") -> str:
    if not isinstance(value, str) or not WORKER_ID.match(value):
        raise ValidationError(
            f"{value!r} is not an MTurk worker id (an A followed by capital letters and "
            "digits, e.g. A1B2C3D4E5F6G7)",
            where,
        )
    return value


def qualification_requirements(
    approval_rate: int | None = 95,
    locales: Sequence[str] | None = ("US",),
    custom: Sequence[tuple[str, str, int | None]] = (),
    block_qualification_id: str | None = None,
) -> list[dict[str, Any]]:
    """MTurk's QualificationRequirements: approval rate, countries, custom ones, our block list."""
    requirements: list[dict[str, Any]] = []
    if approval_rate is not None:
        if isinstance(approval_rate, bool) or not isinstance(approval_rate, int):
            raise ValidationError(f"{approval_rate!r} is not a whole percent", "approval_rate")
        if not 0 <= approval_rate <= 100:
            raise ValidationError(
                f"{approval_rate} is not a percent between 0 and 100", "approval_rate"
            )
        requirements.append(
            {
                "QualificationTypeId": APPROVAL_RATE_QUALIFICATION,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [approval_rate],
            }
        )
    if locales:
        countries = []
        for locale in locales:
            country = locale.upper() if isinstance(locale, str) else ""
            if not COUNTRY.match(country):
                raise ValidationError(
                    f"{locale!r} is not a two-letter ISO 3166 country code, e.g. 'US', 'GB'",
                    "locales",
                )
            if country not in countries:
                countries.append(country)
        requirements.append(
            {
                "QualificationTypeId": LOCALE_QUALIFICATION,
                "Comparator": "In",
                "LocaleValues": [{"Country": country} for country in countries],
            }
        )
    for index, entry in enumerate(custom):
        where = f"custom[{index}]"
        if not isinstance(entry, tuple | list) or len(entry) != 3:
            raise ValidationError(
                f"{entry!r} is not (qualification_type_id, comparator, value)", where
            )
        type_id, comparator, value = entry
        _entity_id(type_id, where)
        if comparator not in COMPARATORS:
            raise ValidationError(
                f"{comparator!r} is not an MTurk comparator: use one of {', '.join(COMPARATORS)}",
                where,
            )
        requirement: dict[str, Any] = {"QualificationTypeId": type_id, "Comparator": comparator}
        if comparator in VALUELESS_COMPARATORS:
            if value is not None:
                raise ValidationError(f"{comparator} takes no value: use None", where)
        elif isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"{comparator} needs a whole number, not {value!r}", where)
        else:
            requirement["IntegerValues"] = [value]
        requirements.append(requirement)
    if block_qualification_id is not None:
        _entity_id(block_qualification_id, "block_qualification_id")
        # Guarding discovery too means blocked workers do not even see the HIT listed.
        requirements.append(
            {
                "QualificationTypeId": block_qualification_id,
                "Comparator": "DoesNotExist",
                "ActionsGuarded": "DiscoverPreviewAndAccept",
            }
        )
    if len(requirements) > MAX_QUALIFICATION_REQUIREMENTS:
        raise ValidationError(
            f"{len(requirements)} qualification requirements; MTurk takes at most "
            f"{MAX_QUALIFICATION_REQUIREMENTS}: drop some custom ones",
            "qualification_requirements",
        )
    return requirements


def fee(reward: Decimal, assignments: int) -> Decimal:
    """MTurk's commission on one payment of `reward` on a HIT with `assignments` assignments.

    MTurk's published pricing: 20% of the reward (and of any bonus: use assignments=1), 40%
    when the HIT has 10 or more assignments, at least $0.01, in whole cents.
    """
    amount = _decimal(reward, "reward")
    _count(assignments, "assignments")
    rate = LARGE_HIT_FEE_RATE if assignments >= LARGE_HIT_ASSIGNMENTS else FEE_RATE
    return max(MINIMUM_FEE, (amount * rate).quantize(CENT, ROUND_HALF_UP))


def _count(value: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{value!r} is not a whole number of at least 1", where)
    return value


def cost(reward: Decimal, assignments: int, hits: int) -> Decimal:
    """What `hits` HITs of `assignments` assignments at `reward` each cost with MTurk's fees."""
    amount = _decimal(reward, "reward")
    return (amount + fee(amount, assignments)) * assignments * _count(hits, "hits")


def check_balance(client: MTurkClient, needed: Decimal) -> Decimal:
    """Refuse when the account's AvailableBalance is below `needed`; return the balance."""
    available = Decimal(client.get_account_balance()["AvailableBalance"])
    if available < needed:
        raise InvalidAction(
            f"the MTurk account has ${available} but this needs ${needed}: add "
            f"${needed - available} of prepaid HITs on the requester site "
            "(My Account > Prepay for HITs), or publish fewer HITs or assignments",
            "balance",
        )
    return available


def _text(value: str, where: str, limit: int, required: bool = True) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValidationError("is empty: MTurk requires it", where)
    if len(value) > limit:
        raise ValidationError(
            f"is {len(value)} characters long; MTurk takes at most {limit}: shorten it", where
        )
    return value


def _seconds(value: int, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{value!r} is not a whole number of seconds in {low}..{high}", where)
    return value


def _token(value: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_TOKEN:
        raise ValidationError(
            f"{value!r} must be 1 to {MAX_TOKEN} characters: derive it from our own ids",
            "unique_request_token",
        )
    return value


def _already_done(error: Exception) -> bool:
    """Whether a botocore ClientError is MTurk saying a UniqueRequestToken was seen before."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return False
    details = response.get("Error", {})
    if details.get("Code") != "RequestError":
        return False
    # botocore puts the modelled TurkErrorCode next to "Error" (e.g. ...HitAlreadyExists).
    turk_code = str(response.get("TurkErrorCode", ""))
    return turk_code.endswith("AlreadyExists") or bool(
        ALREADY_DONE.search(str(details.get("Message", "")))
    )


def create_hit_type(
    client: MTurkClient,
    title: str,
    description: str,
    reward: Decimal | str,
    duration_s: int,
    auto_approval_delay_s: int,
    keywords: str | Sequence[str],
    qualification_requirements: list[dict[str, Any]],
) -> str:
    """CreateHITType; MTurk answers the same id for the same properties."""
    words = keywords if isinstance(keywords, str) else ", ".join(keywords)
    response = client.create_hit_type(
        Title=_text(title, "title", MAX_TITLE),
        Description=_text(description, "description", MAX_DESCRIPTION),
        Reward=format_reward(reward),
        AssignmentDurationInSeconds=_seconds(
            duration_s, "duration_s", MIN_DURATION_S, MAX_DURATION_S
        ),
        AutoApprovalDelayInSeconds=_seconds(
            auto_approval_delay_s, "auto_approval_delay_s", 0, MAX_AUTO_APPROVAL_DELAY_S
        ),
        Keywords=_text(words, "keywords", MAX_KEYWORDS, required=False),
        QualificationRequirements=qualification_requirements,
    )
    return str(response["HITTypeId"])


def create_hit(
    client: MTurkClient,
    hit_type_id: str,
    question_xml: str,
    lifetime_s: int,
    max_assignments: int,
    unique_request_token: str,
    annotation: str | None = None,
) -> str:
    """CreateHITWithHITType; a retry with the same token answers the HIT made the first time."""
    _entity_id(hit_type_id, "hit_type_id")
    token = _token(unique_request_token)
    # The annotation (private to us) lets us find the HIT again if MTurk's duplicate answer
    # does not name it; by default it is the token itself.
    annotation = token if annotation is None else annotation
    if isinstance(max_assignments, bool) or not isinstance(max_assignments, int):
        raise ValidationError(f"{max_assignments!r} is not a whole number", "max_assignments")
    if not 1 <= max_assignments <= MAX_ASSIGNMENTS:
        raise ValidationError(
            f"{max_assignments} is not between 1 and {MAX_ASSIGNMENTS}", "max_assignments"
        )
    from botocore.exceptions import ClientError

    try:
        response = client.create_hit_with_hit_type(
            HITTypeId=hit_type_id,
            Question=question_xml,
            LifetimeInSeconds=_seconds(lifetime_s, "lifetime_s", MIN_DURATION_S, MAX_DURATION_S),
            MaxAssignments=max_assignments,
            UniqueRequestToken=token,
            RequesterAnnotation=annotation,
        )
    except ClientError as error:
        if not _already_done(error):
            raise
        return _existing_hit(client, error, hit_type_id, token, annotation)
    return str(response["HIT"]["HITId"])


def _existing_hit(
    client: MTurkClient, error: Exception, hit_type_id: str, token: str, annotation: str
) -> str:
    """The HIT that an earlier call with `token` created (MTurk refused to make a second)."""
    from botocore.exceptions import ClientError

    def ours(hit: dict[str, Any]) -> bool:
        return hit.get("HITTypeId") == hit_type_id and hit.get("RequesterAnnotation") == annotation

    # MTurk documents that the message names the HIT; the token may look like an id too.
    message = str(getattr(error, "response", {}).get("Error", {}).get("Message", ""))
    for candidate in HIT_ID_IN_MESSAGE.findall(message.replace(token, " ")):
        try:
            hit = client.get_hit(HITId=candidate)["HIT"]
        except ClientError:
            continue  # not a HIT id after all
        if ours(hit):
            return str(hit["HITId"])
    for page in client.get_paginator("list_hits").paginate(
        PaginationConfig={"PageSize": PAGE_SIZE}
    ):
        for hit in page.get("HITs", []):
            if ours(hit):
                return str(hit["HITId"])
    raise InvalidAction(
        f"MTurk says a HIT was already created with token {token!r} but none of our HITs "
        "carries it: find it on the requester site, or publish again with a new token",
        "unique_request_token",
    )


def approve(
    client: MTurkClient,
    assignment_id: str,
    feedback: str | None = None,
    override_rejection: bool = False,
) -> None:
    """ApproveAssignment: pay the reward (and MTurk's fee), with optional feedback; with
    `override_rejection`, overturn an earlier rejection (MTurk allows it for 30 days)."""
    params: dict[str, Any] = {"AssignmentId": _entity_id(assignment_id, "assignment_id")}
    if override_rejection:
        params["OverrideRejection"] = True
    if feedback:
        params["RequesterFeedback"] = _text(feedback, "feedback", MAX_FEEDBACK)
    client.approve_assignment(**params)


def reject(client: MTurkClient, assignment_id: str, feedback: str) -> None:
    """RejectAssignment; the worker sees `feedback`, which MTurk requires."""
    client.reject_assignment(
        AssignmentId=_entity_id(assignment_id, "assignment_id"),
        RequesterFeedback=_text(feedback, "feedback", MAX_FEEDBACK),
    )


def send_bonus(
    client: MTurkClient,
    worker_id: str,
    assignment_id: str,
    amount: Decimal | str,
    reason: str,
    token: str,
) -> bool:
    """SendBonus once per token: False when MTurk says the token was already paid."""
    from botocore.exceptions import ClientError

    try:
        client.send_bonus(
            WorkerId=_worker_id(worker_id),
            AssignmentId=_entity_id(assignment_id, "assignment_id"),
            BonusAmount=format_reward(amount, "amount"),
            Reason=_text(reason, "reason", MAX_MESSAGE),
            UniqueRequestToken=_token(token),
        )
    except ClientError as error:
        # A repeated token means an earlier try (maybe one whose answer was lost) paid it.
        if _already_done(error):
            return False
        raise
    return True


def block(client: MTurkClient, worker_id: str, reason: str) -> None:
    """CreateWorkerBlock; the reason is for our records, the worker does not see it."""
    client.create_worker_block(
        WorkerId=_worker_id(worker_id), Reason=_text(reason, "reason", MAX_MESSAGE)
    )


def unblock(client: MTurkClient, worker_id: str, reason: str = "") -> None:
    """DeleteWorkerBlock; MTurk succeeds when the worker was not blocked."""
    params: dict[str, Any] = {"WorkerId": _worker_id(worker_id)}
    if reason:
        params["Reason"] = _text(reason, "reason", MAX_MESSAGE)
    client.delete_worker_block(**params)


def list_assignments(
    client: MTurkClient,
    hit_id: str,
    statuses: Iterable[str] = ("Submitted", "Approved", "Rejected"),
    page_size: int = PAGE_SIZE,
) -> list[dict[str, Any]]:
    """Every assignment of the HIT in `statuses`, following NextToken across pages."""
    wanted = list(statuses)
    for status in wanted:
        if status not in ("Submitted", "Approved", "Rejected"):
            raise ValidationError(
                f"{status!r} is not an assignment status: use Submitted, Approved or Rejected",
                "statuses",
            )
    if not 1 <= page_size <= PAGE_SIZE:
        raise ValidationError(f"{page_size} is not between 1 and {PAGE_SIZE}", "page_size")
    params: dict[str, Any] = {
        "HITId": _entity_id(hit_id, "hit_id"),
        "MaxResults": page_size,
        "AssignmentStatuses": wanted,
    }
    assignments: list[dict[str, Any]] = []
    while True:
        response = client.list_assignments_for_hit(**params)
        assignments.extend(response.get("Assignments", []))
        next_token = response.get("NextToken")
        # MTurk may hand back a token with an empty last page; stop on either.
        if not next_token or not response.get("Assignments"):
            return assignments
        params["NextToken"] = next_token


def notify(
    client: MTurkClient, worker_ids: Sequence[str], subject: str, message: str
) -> list[dict[str, Any]]:
    """NotifyWorkers in batches of 100; the failures MTurk reports (e.g. unknown workers)."""
    _text(subject, "subject", MAX_SUBJECT)
    _text(message, "message", MAX_MESSAGE)
    # Order kept, duplicates dropped: nobody should get the same e-mail twice.
    unique = list(dict.fromkeys(_worker_id(worker_id) for worker_id in worker_ids))
    failures: list[dict[str, Any]] = []
    for start in range(0, len(unique), NOTIFY_BATCH):
        response = client.notify_workers(
            Subject=subject, MessageText=message, WorkerIds=unique[start : start + NOTIFY_BATCH]
        )
        failures.extend(response.get("NotifyWorkersFailureStatuses", []))
    return failures


def expire_hit(client: MTurkClient, hit_id: str) -> None:
    """UpdateExpirationForHIT to a past time: no new workers; accepted work goes on."""
    client.update_expiration_for_hit(
        HITId=_entity_id(hit_id, "hit_id"), ExpireAt=datetime(2015, 1, 1, tzinfo=UTC)
    )


def extend_hit(
    client: MTurkClient, hit_id: str, seconds: int, more_assignments: int, token: str
) -> datetime | None:
    """Keep a HIT open `seconds` longer (from now) and/or add assignments (once per token)."""
    from botocore.exceptions import ClientError

    _entity_id(hit_id, "hit_id")
    expires: datetime | None = None
    if seconds:
        expires = datetime.now(UTC) + timedelta(
            seconds=_seconds(seconds, "seconds", MIN_DURATION_S, MAX_DURATION_S)
        )
        client.update_expiration_for_hit(HITId=hit_id, ExpireAt=expires)
    if more_assignments:
        _count(more_assignments, "more_assignments")
        try:
            client.create_additional_assignments_for_hit(
                HITId=hit_id,
                NumberOfAdditionalAssignments=more_assignments,
                UniqueRequestToken=_token(token),
            )
        except ClientError as error:
            if not _already_done(error):
                raise
    return expires


def grant_qualification(
    client: MTurkClient, worker_id: str, qualification_id: str, value: int = 1
) -> None:
    """AssociateQualificationWithWorker, without e-mailing the worker about it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{value!r} is not a whole number", "value")
    client.associate_qualification_with_worker(
        QualificationTypeId=_entity_id(qualification_id, "qualification_id"),
        WorkerId=_worker_id(worker_id),
        IntegerValue=value,
        SendNotification=False,
    )


def revoke_qualification(
    client: MTurkClient, worker_id: str, qualification_id: str, reason: str = ""
) -> None:
    """DisassociateQualificationFromWorker."""
    params: dict[str, Any] = {
        "QualificationTypeId": _entity_id(qualification_id, "qualification_id"),
        "WorkerId": _worker_id(worker_id),
    }
    if reason:
        params["Reason"] = _text(reason, "reason", MAX_MESSAGE)
    client.disassociate_qualification_from_worker(**params)


def answer_fields(answer_xml: str) -> dict[str, str]:
    """The fields of MTurk's Answer XML (QuestionFormAnswers): identifier -> free text."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(answer_xml)
    except ET.ParseError:
        return {}
    fields: dict[str, str] = {}
    for answer in root.iter():
        if not answer.tag.endswith("Answer") or answer.tag.endswith("QuestionFormAnswers"):
            continue
        name = text = None
        for child in answer:
            if child.tag.endswith("QuestionIdentifier"):
                name = child.text or ""
            elif child.tag.endswith("FreeText"):
                text = child.text or ""
        if name is not None and text is not None:
            fields[name] = text
    return fields
