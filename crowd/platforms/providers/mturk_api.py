"""The calls of an MTurk provider: a boto3 client, balances, HIT types and HITs, decisions,
bonuses, blocks, notifications and qualifications.

Everything here goes through a real boto3 ``mturk`` client (made by make_client) and checks
its arguments first, so that a bad reward or URL fails here with a hint instead of as an
opaque RequestError from MTurk. Errors MTurk itself answers with (botocore's ClientError)
are left to the caller, except the ones that mean "this was already done", which make a
retried publish harmless. Whether a bonus was paid is never read from an error's wording:
MTurk's own records (ListBonusPayments) decide.

boto3 is imported inside functions: importing this module must stay free, and most
installations never talk to MTurk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from crowd.exceptions import ConfigurationError, InvalidAction, PaymentUnknown, ValidationError
from crowd.platforms.providers.mturk_checks import (
    MAX_ASSIGNMENTS,
    MAX_AUTO_APPROVAL_DELAY_S,
    MAX_DESCRIPTION,
    MAX_DURATION_S,
    MAX_FEEDBACK,
    MAX_KEYWORDS,
    MAX_MESSAGE,
    MAX_SUBJECT,
    MAX_TITLE,
    MIN_DURATION_S,
    check_count,
    check_entity_id,
    check_seconds,
    check_text,
    check_token,
    check_worker_id,
    external_url,
    format_reward,
)

# A boto3 client is built at run time from botocore's service model; there is no class to name.
MTurkClient = Any

SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
# MTurk's requester API lives in us-east-1 only.
REGION = "us-east-1"

NOTIFY_BATCH = 100
PAGE_SIZE = 100
# Retries per call after the first (botocore's max_attempts), with exponential backoff.
MAX_ATTEMPTS = 5

CREDENTIALS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
# How MTurk says a UniqueRequestToken was seen before; seen in the wild:
# 'The idempotency token "..." has already been processed. (1626172412406)'.
ALREADY_DONE = re.compile(
    r"already been processed|already been used|already exists|is a duplicate", re.IGNORECASE
)
# What a HIT's request token gets when MTurk keeps the token for a HIT we may not adopt.
RETOKEN = "-r"
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
        Title=check_text(title, "title", MAX_TITLE),
        Description=check_text(description, "description", MAX_DESCRIPTION),
        Reward=format_reward(reward),
        AssignmentDurationInSeconds=check_seconds(
            duration_s, "duration_s", MIN_DURATION_S, MAX_DURATION_S
        ),
        AutoApprovalDelayInSeconds=check_seconds(
            auto_approval_delay_s, "auto_approval_delay_s", 0, MAX_AUTO_APPROVAL_DELAY_S
        ),
        Keywords=check_text(words, "keywords", MAX_KEYWORDS, required=False),
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
    """CreateHITWithHITType; a retry with the same token answers the HIT made the first time.

    That HIT is adopted only while it takes workers and shows this Question's page (see
    find_hits); otherwise a HIT is made under a token derived from this one, with the same
    annotation, so that later retries find it.
    """
    check_entity_id(hit_type_id, "hit_type_id")
    token = check_token(unique_request_token)
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
            LifetimeInSeconds=check_seconds(
                lifetime_s, "lifetime_s", MIN_DURATION_S, MAX_DURATION_S
            ),
            MaxAssignments=max_assignments,
            UniqueRequestToken=token,
            RequesterAnnotation=annotation,
        )
    except ClientError as error:
        if not _already_done(error):
            raise
        existing = _existing_hit(client, error, hit_type_id, question_xml, token, annotation)
        if existing is not None:
            return existing
        # MTurk keeps the token for 24 hours for a HIT that is not ours to adopt.
        return create_hit(
            client, hit_type_id, question_xml, lifetime_s, max_assignments,
            f"{token}{RETOKEN}", annotation,
        )  # fmt: skip
    return str(response["HIT"]["HITId"])


# The states of a HIT workers can still take (MTurk: Assignable, then Unassignable once
# every assignment is taken; Reviewable once all are submitted or the HIT has expired).
LIVE_HIT_STATES = ("Assignable", "Unassignable")


def find_hits(
    client: MTurkClient, hit_type_id: str, annotations: Iterable[str], page_url: str
) -> dict[str, dict[str, Any]]:
    """Live HITs of the HIT type that carry one of `annotations` (our per-HIT request
    tokens) and show `page_url`, by annotation: ListHITs over the account's HITs, until each
    is found. Ask only where an earlier try may have made them: the account may hold many.

    MTurk forgets a UniqueRequestToken after 24 hours, and a call with it then makes a second
    HIT; the annotation stays on the HIT, so a publish that failed before we recorded its HITs
    is found again by it, however late it is retried. A HIT that no longer takes workers, or
    whose page is not ours (another deployment on the same account), is not ours to adopt.
    """
    wanted = set(annotations)
    found: dict[str, dict[str, Any]] = {}
    for page in client.get_paginator("list_hits").paginate(
        PaginationConfig={"PageSize": PAGE_SIZE}
    ):
        for hit in page.get("HITs", []):
            annotation = hit.get("RequesterAnnotation")
            if (
                annotation in wanted
                and annotation not in found
                and _adoptable(hit, hit_type_id, page_url)
            ):
                found[str(annotation)] = hit
        if len(found) == len(wanted):
            break
    return found


def _adoptable(hit: dict[str, Any], hit_type_id: str, page_url: str) -> bool:
    """Whether a HIT of ours (by its annotation) may be adopted: of the HIT type, showing
    `page_url`, and still taking workers."""
    expires = hit.get("Expiration")
    return (
        hit.get("HITTypeId") == hit_type_id
        and external_url(str(hit.get("Question", ""))) == page_url
        and hit.get("HITStatus") in LIVE_HIT_STATES
        and isinstance(expires, datetime)
        and expires > datetime.now(UTC)
    )


def _existing_hit(
    client: MTurkClient, error: Exception, hit_type_id: str, question_xml: str, token: str,
    annotation: str,
) -> str | None:  # fmt: skip
    """The HIT an earlier call with `token` created (MTurk refused to make a second), if it
    may be adopted; None if not."""
    from botocore.exceptions import ClientError

    page_url = external_url(question_xml) or ""
    # MTurk documents that the message names the HIT; the token may look like an id too.
    message = str(getattr(error, "response", {}).get("Error", {}).get("Message", ""))
    for candidate in HIT_ID_IN_MESSAGE.findall(message.replace(token, " ")):
        try:
            hit = client.get_hit(HITId=candidate)["HIT"]
        except ClientError:
            continue  # not a HIT id after all
        if hit.get("RequesterAnnotation") == annotation and _adoptable(hit, hit_type_id, page_url):
            return str(hit["HITId"])
    # Not named, or not adoptable: a retry under a derived token may have made one since.
    found = find_hits(client, hit_type_id, [annotation], page_url)
    return str(found[annotation]["HITId"]) if annotation in found else None


def approve(
    client: MTurkClient,
    assignment_id: str,
    feedback: str | None = None,
    override_rejection: bool = False,
) -> None:
    """ApproveAssignment: pay the reward (and MTurk's fee), with optional feedback; with
    `override_rejection`, overturn an earlier rejection (MTurk allows it for 30 days)."""
    params: dict[str, Any] = {"AssignmentId": check_entity_id(assignment_id, "assignment_id")}
    if override_rejection:
        params["OverrideRejection"] = True
    if feedback:
        params["RequesterFeedback"] = check_text(feedback, "feedback", MAX_FEEDBACK)
    client.approve_assignment(**params)


def reject(client: MTurkClient, assignment_id: str, feedback: str) -> None:
    """RejectAssignment; the worker sees `feedback`, which MTurk requires."""
    client.reject_assignment(
        AssignmentId=check_entity_id(assignment_id, "assignment_id"),
        RequesterFeedback=check_text(feedback, "feedback", MAX_FEEDBACK),
    )


def list_bonus_payments(client: MTurkClient, assignment_id: str) -> list[dict[str, Any]]:
    """ListBonusPayments of one assignment, every page: the bonuses MTurk says it paid."""
    payments: list[dict[str, Any]] = []
    for page in client.get_paginator("list_bonus_payments").paginate(
        AssignmentId=check_entity_id(assignment_id, "assignment_id"),
        PaginationConfig={"PageSize": PAGE_SIZE},
    ):
        payments.extend(page.get("BonusPayments", []))
    return payments


def bonuses_alike(
    client: MTurkClient, worker_id: str, assignment_id: str, amount: Decimal | str, reason: str
) -> int:
    """How many bonuses MTurk lists for the assignment with this worker, amount and reason.

    ListBonusPayments shows no request token, so these are what tell our bonus apart.
    """
    wanted = Decimal(format_reward(amount, "amount"))
    alike = 0
    for payment in list_bonus_payments(client, assignment_id):
        try:
            paid = Decimal(str(payment.get("BonusAmount", "")).strip())
        except ArithmeticError:
            continue
        if (
            payment.get("WorkerId") == worker_id
            and paid == wanted
            and payment.get("Reason") == reason
        ):
            alike += 1
    return alike


def paid_since(
    client: MTurkClient,
    worker_id: str,
    assignment_id: str,
    amount: Decimal | str,
    reason: str,
    token: str,
    alike_before: int,
) -> bool:
    """Whether MTurk's records show more bonuses like this one than `alike_before`: asked
    before trying again a bonus an earlier try with `token` may have paid. Raises
    PaymentUnknown when the records cannot be read, never a plain failure: whether it was
    paid is then unknown, and paying it by hand could pay it twice."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return bonuses_alike(client, worker_id, assignment_id, amount, reason) > alike_before
    except (ClientError, BotoCoreError) as error:
        raise PaymentUnknown(
            f"an earlier try of bonus {token!r} may have paid it, and ListBonusPayments "
            f"failed ({error}): whether it was paid is unknown; it is asked again before "
            "anything is sent"
        ) from error


def send_bonus(
    client: MTurkClient,
    worker_id: str,
    assignment_id: str,
    amount: Decimal | str,
    reason: str,
    token: str,
    alike_before: int,
) -> bool:
    """SendBonus once per token: True when its answer says it paid, False when MTurk's own
    records show the bonus paid though the call failed.

    A call may fail after MTurk paid (a timeout, a dropped connection), and a retry is then
    refused as a duplicate token in words MTurk does not document. So on any failure
    ListBonusPayments decides: more bonuses like this one (worker, amount, reason) than
    `alike_before`, the count before the first try with `token`, means it was paid; otherwise
    the failure is raised, and a retry with the same token stays safe.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    params = {
        "WorkerId": check_worker_id(worker_id),
        "AssignmentId": check_entity_id(assignment_id, "assignment_id"),
        "BonusAmount": format_reward(amount, "amount"),
        "Reason": check_text(reason, "reason", MAX_MESSAGE),
        "UniqueRequestToken": check_token(token),
    }
    try:
        client.send_bonus(**params)
    except (ClientError, BotoCoreError) as error:
        try:
            paid = bonuses_alike(client, worker_id, assignment_id, amount, reason) > alike_before
        except (ClientError, BotoCoreError) as listing:
            raise PaymentUnknown(
                f"SendBonus failed ({error}) and ListBonusPayments failed too ({listing}): "
                f"whether bonus {token!r} was paid is unknown; a retry asks MTurk's records "
                "before sending it again"
            ) from error
        if paid:
            return False
        raise
    return True


def block(client: MTurkClient, worker_id: str, reason: str) -> None:
    """CreateWorkerBlock; the reason is for our records, the worker does not see it."""
    client.create_worker_block(
        WorkerId=check_worker_id(worker_id), Reason=check_text(reason, "reason", MAX_MESSAGE)
    )


def unblock(client: MTurkClient, worker_id: str, reason: str = "") -> None:
    """DeleteWorkerBlock; MTurk succeeds when the worker was not blocked."""
    params: dict[str, Any] = {"WorkerId": check_worker_id(worker_id)}
    if reason:
        params["Reason"] = check_text(reason, "reason", MAX_MESSAGE)
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
        "HITId": check_entity_id(hit_id, "hit_id"),
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
    check_text(subject, "subject", MAX_SUBJECT)
    check_text(message, "message", MAX_MESSAGE)
    # Order kept, duplicates dropped: nobody should get the same e-mail twice.
    unique = list(dict.fromkeys(check_worker_id(worker_id) for worker_id in worker_ids))
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
        HITId=check_entity_id(hit_id, "hit_id"), ExpireAt=datetime(2015, 1, 1, tzinfo=UTC)
    )


def extend_hit(
    client: MTurkClient, hit_id: str, seconds: int, more_assignments: int, token: str
) -> datetime | None:
    """Keep a HIT open `seconds` longer (from now) and/or add assignments (once per token)."""
    from botocore.exceptions import ClientError

    check_entity_id(hit_id, "hit_id")
    expires: datetime | None = None
    if seconds:
        expires = datetime.now(UTC) + timedelta(
            seconds=check_seconds(seconds, "seconds", MIN_DURATION_S, MAX_DURATION_S)
        )
        client.update_expiration_for_hit(HITId=hit_id, ExpireAt=expires)
    if more_assignments:
        check_count(more_assignments, "more_assignments")
        try:
            client.create_additional_assignments_for_hit(
                HITId=hit_id,
                NumberOfAdditionalAssignments=more_assignments,
                UniqueRequestToken=check_token(token),
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
        QualificationTypeId=check_entity_id(qualification_id, "qualification_id"),
        WorkerId=check_worker_id(worker_id),
        IntegerValue=value,
        SendNotification=False,
    )


def revoke_qualification(
    client: MTurkClient, worker_id: str, qualification_id: str, reason: str = ""
) -> None:
    """DisassociateQualificationFromWorker."""
    params: dict[str, Any] = {
        "QualificationTypeId": check_entity_id(qualification_id, "qualification_id"),
        "WorkerId": check_worker_id(worker_id),
    }
    if reason:
        params["Reason"] = check_text(reason, "reason", MAX_MESSAGE)
    client.disassociate_qualification_from_worker(**params)
