"""The MTurk groundwork, driving the real boto3 client against the local MTurk stand-in."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

from crowd.exceptions import ConfigurationError, InvalidAction, ValidationError
from crowd.platforms.providers import mturk_api as mturk
from crowd.platforms.providers import mturk_checks as checks
from tests.crowd.platforms.providers.mturk_server import EXTERNAL_QUESTION_NS, MTurkServer

URL = "https://crowd.example.org/work/7?kind=a&b=<1>"
WORKER = "A1EXAMPLEWORKER"
CREDENTIALS = {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "not-a-secret"}


@pytest.fixture
def server() -> Iterator[MTurkServer]:
    with MTurkServer(balance="100.00") as running:
        yield running


@pytest.fixture
def client(server: MTurkServer) -> Any:
    return mturk.make_client(False, endpoint_url=server.endpoint_url, **CREDENTIALS)


def publish(client: Any, assignments: int = 3, token: str = "study-1-hit-1") -> tuple[str, str]:
    hit_type = mturk.create_hit_type(
        client,
        title="Spot the machine-written sentence",
        description="Read a passage and say where a machine took over.",
        reward=Decimal("0.50"),
        duration_s=1800,
        auto_approval_delay_s=3 * 24 * 3600,
        keywords=["text", "writing"],
        qualification_requirements=checks.qualification_requirements(
            block_qualification_id="3BLOCKQUALIFICATION"
        ),
    )
    hit = mturk.create_hit(
        client, hit_type, checks.external_question(URL, 800), 3600, assignments, token
    )
    return hit_type, hit


def error_code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


# -- the client ------------------------------------------------------------------------------


def test_clients_point_at_sandbox_production_or_the_override() -> None:
    sandbox = mturk.make_client(True, **CREDENTIALS)
    assert sandbox.meta.endpoint_url == mturk.SANDBOX_ENDPOINT
    assert sandbox.meta.region_name == "us-east-1"
    assert mturk.make_client(False, **CREDENTIALS).meta.endpoint_url == mturk.PRODUCTION_ENDPOINT
    local = mturk.make_client(True, endpoint_url="http://127.0.0.1:9", **CREDENTIALS)
    assert local.meta.endpoint_url == "http://127.0.0.1:9"
    with pytest.raises(ConfigurationError, match="CROWD_MTURK_ENDPOINT_URL"):
        mturk.make_client(True, endpoint_url="127.0.0.1:9")
    with pytest.raises(ConfigurationError, match="aws_secret_access_key"):
        mturk.make_client(True, aws_secret_key="typo")


def test_importing_the_module_does_not_import_boto3() -> None:
    code = "import sys, crowd.platforms.providers.mturk_api; print('boto3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- pure pieces -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "expected"),
    [
        (Decimal("0.5"), "0.50"),
        ("1", "1.00"),
        ("0.500", "0.50"),
        (0.1, "0.10"),
        (12, "12.00"),
        (" 2.25 ", "2.25"),
        ("1000", "1000.00"),
    ],
)
def test_rewards_have_two_decimals(amount: Any, expected: str) -> None:
    assert checks.format_reward(amount) == expected


@pytest.mark.parametrize(
    "amount",
    ["0", "-1", "0.505", 0.005, "1000.01", "NaN", "inf", float("nan"), "$1", "", True, None],
)
def test_bad_rewards_are_refused(amount: Any) -> None:
    with pytest.raises(ValidationError):
        checks.format_reward(amount)


def test_fractions_of_a_cent_get_a_rounding_hint() -> None:
    with pytest.raises(ValidationError, match="'0.51'"):
        checks.format_reward("0.505")


def test_external_question_is_escaped_xml_in_mturks_namespace() -> None:
    xml = checks.external_question(URL, 600)
    root = ET.fromstring(xml)
    ns = "{" + EXTERNAL_QUESTION_NS + "}"
    assert root.tag == ns + "ExternalQuestion"
    assert root.findtext(ns + "ExternalURL") == URL
    assert root.findtext(ns + "FrameHeight") == "600"
    assert "&amp;" in xml and "&lt;1&gt;" in xml
    assert checks.external_question("http://127.0.0.1:5000/work/1", allow_http=True)


@pytest.mark.parametrize(
    ("url", "height"),
    [
        ("http://crowd.example.org/work/1", 0),
        ("ftp://crowd.example.org/work/1", 0),
        ("https:///work/1", 0),
        ("https://crowd.example.org/work 1", 0),
        ("https://crowd.example.org/?" + "x" * 1024, 0),
        (URL, -1),
        (URL, 4001),
    ],
)
def test_bad_external_questions_are_refused(url: str, height: int) -> None:
    with pytest.raises(ValidationError):
        checks.external_question(url, height)


def test_qualification_requirements_have_mturks_shapes() -> None:
    requirements = checks.qualification_requirements(
        approval_rate=98,
        locales=["US", "gb", "US"],
        custom=[("3CUSTOMQUAL", "GreaterThan", 2), ("3OTHERQUAL", "Exists", None)],
        block_qualification_id="3BLOCKQUAL",
    )
    assert requirements == [
        {
            "QualificationTypeId": "000000000000000000L0",
            "Comparator": "GreaterThanOrEqualTo",
            "IntegerValues": [98],
        },
        {
            "QualificationTypeId": "00000000000000000071",
            "Comparator": "In",
            "LocaleValues": [{"Country": "US"}, {"Country": "GB"}],
        },
        {"QualificationTypeId": "3CUSTOMQUAL", "Comparator": "GreaterThan", "IntegerValues": [2]},
        {"QualificationTypeId": "3OTHERQUAL", "Comparator": "Exists"},
        {
            "QualificationTypeId": "3BLOCKQUAL",
            "Comparator": "DoesNotExist",
            "ActionsGuarded": "DiscoverPreviewAndAccept",
        },
    ]
    assert checks.qualification_requirements(None, None) == []
    assert len(checks.qualification_requirements()) == 2


@pytest.mark.parametrize(
    "kwargs",
    [
        {"approval_rate": 101},
        {"approval_rate": -1},
        {"locales": ["USA"]},
        {"locales": ["U1"]},
        {"custom": [("3bad-id", "EqualTo", 1)]},
        {"custom": [("3QUAL", "Equals", 1)]},
        {"custom": [("3QUAL", "EqualTo", None)]},
        {"custom": [("3QUAL", "DoesNotExist", 1)]},
        {"custom": [("3QUAL", "EqualTo", 1)] * 9},
        {"block_qualification_id": "block me"},
    ],
)
def test_bad_qualification_requirements_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        checks.qualification_requirements(**kwargs)


def test_fees_follow_mturks_pricing() -> None:
    # 20% below 10 assignments, 40% from 10 on, never under a cent.
    assert checks.fee(Decimal("1.00"), 1) == Decimal("0.20")
    assert checks.fee(Decimal("1.00"), 9) == Decimal("0.20")
    assert checks.fee(Decimal("1.00"), 10) == Decimal("0.40")
    assert checks.fee(Decimal("0.25"), 3) == Decimal("0.05")
    assert checks.fee(Decimal("0.02"), 3) == Decimal("0.01")
    assert checks.fee(Decimal("0.13"), 10) == Decimal("0.05")  # 0.052 rounds to 0.05
    assert checks.cost(Decimal("0.50"), 9, 2) == Decimal("10.80")  # (0.50 + 0.10) * 9 * 2
    assert checks.cost(Decimal("0.50"), 10, 3) == Decimal("21.00")  # (0.50 + 0.20) * 10 * 3
    with pytest.raises(ValidationError):
        checks.cost(Decimal("0.50"), 0, 1)


# -- against the server ------------------------------------------------------------------------


def test_publishing_creates_a_hit_type_and_hits(server: MTurkServer, client: Any) -> None:
    hit_type, hit_id = publish(client)
    hit = client.get_hit(HITId=hit_id)["HIT"]
    assert hit["HITTypeId"] == hit_type
    assert hit["Reward"] == "0.50"
    assert hit["MaxAssignments"] == 3
    assert hit["AssignmentDurationInSeconds"] == 1800
    assert hit["Keywords"] == "text, writing"
    assert hit["Question"] == checks.external_question(URL, 800)
    assert hit["QualificationRequirements"][-1]["Comparator"] == "DoesNotExist"
    # Same properties, same HIT type (as MTurk does); a second HIT needs its own token.
    again, second = publish(client, token="study-1-hit-2")
    assert again == hit_type and second != hit_id
    assert len(server.hits) == 2


def test_a_repeated_token_makes_one_hit(server: MTurkServer, client: Any) -> None:
    _, first = publish(client)
    _, repeated = publish(client)
    assert repeated == first
    assert len(server.hits) == 1


@pytest.mark.parametrize("named", [True, False])
def test_a_publish_whose_answer_was_lost_makes_one_hit(named: bool) -> None:
    # named=False: MTurk's duplicate answer does not name the HIT; it is found by annotation.
    with MTurkServer(hit_id_in_duplicate=named) as server:
        client = mturk.make_client(False, endpoint_url=server.endpoint_url, **CREDENTIALS)
        publish(client, token="other")
        server.lose_next_response("CreateHITWithHITType")
        _, hit_id = publish(client)
        assert server.calls_to("CreateHITWithHITType") == 3  # one, then the lost one, retried
        assert len(server.hits) == 2
        assert server.hits[hit_id].annotation == "study-1-hit-1"


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("create_hit_type", {"Reward": "0.505"}, "Reward"),
    ("create_hit_type", {"Reward": "5."}, "Reward"),
    ("create_hit_type", {"Reward": "$0.50"}, "Reward"),
    ("create_hit_type", {"Reward": "0.00"}, "Reward"),
    ("create_hit_type", {"AssignmentDurationInSeconds": 10}, "AssignmentDuration"),
    ("create_hit_type", {"Title": ""}, "Title"),
    (
        "create_hit_type",
        {
            "QualificationRequirements": [
                {"QualificationTypeId": "00000000000000000071", "Comparator": "In"}
            ]
        },
        "at least one value",
    ),
    (
        "create_hit_type",
        {
            "QualificationRequirements": [
                {
                    "QualificationTypeId": "00000000000000000071",
                    "Comparator": "GreaterThan",
                    "LocaleValues": [{"Country": "US"}],
                }
            ]
        },
        "LocaleValues",
    ),
    (
        "create_hit_type",
        {"QualificationRequirements": [{"QualificationTypeId": "x-1", "Comparator": "Exists"}]},
        "QualificationTypeId",
    ),
    ("create_hit", {"Question": "<ExternalQuestion>"}, "not a valid ExternalQuestion"),
    ("create_hit", {"Question": "<ExternalQuestion/>"}, "namespace"),
    (
        "create_hit",
        {"Question": checks.external_question("http://crowd.example.org/", allow_http=True)},
        "https",
    ),
    (
        "create_hit",
        {"Question": checks.external_question(URL).replace(">0<", ">tall<")},
        "FrameHeight",
    ),
    ("create_hit", {"LifetimeInSeconds": 5}, "LifetimeInSeconds"),
    ("create_hit", {"MaxAssignments": 0}, "MaxAssignments"),
    ("create_hit", {"HITTypeId": "3NOSUCHTYPE"}, "does not exist"),
    ("create_hit", {"HITTypeId": "lower"}, "HITTypeId"),
]


@pytest.mark.parametrize(("call", "change", "fragment"), BAD_CALLS)
def test_the_server_refuses_what_mturk_refuses(
    client: Any, call: str, change: dict[str, Any], fragment: str
) -> None:
    # Straight through the boto3 client, past our own checks, to prove the server's.
    hit_type = client.create_hit_type(
        Title="t", Description="d", Reward="0.50", AssignmentDurationInSeconds=600
    )["HITTypeId"]
    if call == "create_hit_type":
        kwargs: dict[str, Any] = {
            "Title": "t",
            "Description": "d",
            "Reward": "0.50",
            "AssignmentDurationInSeconds": 600,
        }
        method = client.create_hit_type
    else:
        kwargs = {
            "HITTypeId": hit_type,
            "Question": checks.external_question(URL),
            "LifetimeInSeconds": 3600,
            "MaxAssignments": 1,
        }
        method = client.create_hit_with_hit_type
    with pytest.raises(ClientError) as error:
        method(**{**kwargs, **change})
    assert error_code(error) == "RequestError"
    assert fragment in error.value.response["Error"]["Message"]


def test_our_checks_stop_bad_values_before_mturk(server: MTurkServer, client: Any) -> None:
    with pytest.raises(ValidationError):
        mturk.create_hit_type(client, "t", "d", "0.505", 600, 0, "", [])
    with pytest.raises(ValidationError):
        mturk.create_hit_type(client, "t" * 129, "d", "0.50", 600, 0, "", [])
    with pytest.raises(ValidationError):
        mturk.create_hit(client, "3TYPE", "<x/>", 3600, 1, "t" * 65)
    assert server.calls == []


def test_the_balance_check_names_the_shortfall(server: MTurkServer, client: Any) -> None:
    assert mturk.check_balance(client, Decimal("99.99")) == Decimal("100.00")
    needed = checks.cost(Decimal("1.00"), 10, 80)  # (1.00 + 0.40) * 800 = 1120.00
    with pytest.raises(InvalidAction, match=r"\$1020\.00") as error:
        mturk.check_balance(client, needed)
    assert "$1120.00" in str(error.value) and "$100.00" in str(error.value)


def test_assignments_are_listed_across_pages(server: MTurkServer, client: Any) -> None:
    _, hit_id = publish(client, assignments=25)
    workers = [f"A{n:03d}WORKER" for n in range(25)]
    ids = [server.add_assignment(hit_id, worker) for worker in workers]
    listed = mturk.list_assignments(client, hit_id, page_size=7)
    assert [a["AssignmentId"] for a in listed] == ids
    assert [a["WorkerId"] for a in listed] == workers
    assert "QuestionFormAnswers" in listed[0]["Answer"]
    assert server.calls_to("ListAssignmentsForHIT") == 4
    # An exactly full last page comes with a token and an empty page after it.
    assert len(mturk.list_assignments(client, hit_id, page_size=5)) == 25
    assert server.calls_to("ListAssignmentsForHIT") == 4 + 6
    mturk.approve(client, ids[0])
    assert [a["AssignmentId"] for a in mturk.list_assignments(client, hit_id, ["Approved"])] == [
        ids[0]
    ]
    assert len(mturk.list_assignments(client, hit_id, ["Submitted"])) == 24
    with pytest.raises(ValidationError):
        mturk.list_assignments(client, hit_id, ["Abandoned"])


def test_approve_pays_reward_and_fee_once(server: MTurkServer, client: Any) -> None:
    _, hit_id = publish(client)
    assignment = server.add_assignment(hit_id, WORKER)
    mturk.approve(client, assignment, "Thanks!")
    assert [(p.kind, p.amount, p.fee) for p in server.payments] == [
        ("reward", Decimal("0.50"), Decimal("0.10"))
    ]
    assert server.balance == Decimal("99.40")
    with pytest.raises(ClientError) as error:
        mturk.approve(client, assignment)
    assert "status of: Submitted" in error.value.response["Error"]["Message"]
    assert len(server.payments) == 1


def test_reject_needs_feedback(server: MTurkServer, client: Any) -> None:
    _, hit_id = publish(client)
    assignment = server.add_assignment(hit_id, WORKER)
    with pytest.raises(ValidationError):
        mturk.reject(client, assignment, "  ")
    with pytest.raises(ValidationError):
        mturk.reject(client, assignment, "x" * 1025)
    assert server.calls_to("RejectAssignment") == 0
    # MTurk itself refuses empty feedback too.
    with pytest.raises(ClientError):
        client.reject_assignment(AssignmentId=assignment, RequesterFeedback="")
    mturk.reject(client, assignment, "The answers were random.")
    (listed,) = mturk.list_assignments(client, hit_id)
    assert listed["AssignmentStatus"] == "Rejected"
    assert listed["RequesterFeedback"] == "The answers were random."
    assert server.payments == []
    with pytest.raises(ClientError):
        mturk.reject(client, assignment, "again")


def test_block_and_unblock(server: MTurkServer, client: Any) -> None:
    mturk.block(client, WORKER, "failed 4 of 5 gold items")
    assert server.blocks == {WORKER: "failed 4 of 5 gold items"}
    mturk.unblock(client, WORKER, "appeal accepted")
    assert server.blocks == {}
    mturk.unblock(client, WORKER)  # not blocked: MTurk succeeds
    with pytest.raises(ValidationError):
        mturk.block(client, "worker-7", "x")
    with pytest.raises(ValidationError):
        mturk.block(client, WORKER, "")
    with pytest.raises(ClientError):
        client.create_worker_block(WorkerId="B1NOTAWORKER", Reason="x")


def test_a_bonus_retried_with_its_token_pays_once(server: MTurkServer, client: Any) -> None:
    _, hit_id = publish(client)
    assignment = server.add_assignment(hit_id, WORKER)
    assert mturk.send_bonus(client, WORKER, assignment, "1.25", "Top 10%", "bonus-1", 0) is True
    # MTurk refuses the token again; its records show the bonus paid.
    assert mturk.send_bonus(client, WORKER, assignment, "1.25", "Top 10%", "bonus-1", 0) is False
    assert [(p.amount, p.fee) for p in server.bonuses()] == [(Decimal("1.25"), Decimal("0.25"))]
    # The answer to the first try is lost; botocore retries with the same token.
    server.lose_next_response("SendBonus")
    assert mturk.send_bonus(client, WORKER, assignment, "0.75", "Streak", "bonus-2", 0) is False
    assert server.calls_to("SendBonus") == 4
    assert [p.amount for p in server.bonuses()] == [Decimal("1.25"), Decimal("0.75")]
    assert server.balance == Decimal("100.00") - Decimal("1.50") - Decimal("0.90")


def test_a_bonus_whose_every_answer_was_lost_is_found_in_mturks_records(
    server: MTurkServer, client: Any
) -> None:
    _, hit_id = publish(client)
    assignment = server.add_assignment(hit_id, WORKER)
    # Paid on the first try; that answer and the duplicate refusals of botocore's retries
    # all get lost: the client only ever sees dropped connections.
    server.cut_next_responses("SendBonus", mturk.MAX_ATTEMPTS + 1)
    assert mturk.send_bonus(client, WORKER, assignment, "0.40", "Careful", "bonus-3", 0) is False
    assert server.calls_to("SendBonus") == mturk.MAX_ATTEMPTS + 1
    assert [p.amount for p in server.bonuses()] == [Decimal("0.40")]
    # An identical bonus already paid (counted in alike_before) is not taken for this one.
    server.balance = Decimal("0.10")
    with pytest.raises(ClientError, match="enough funds"):
        mturk.send_bonus(client, WORKER, assignment, "0.40", "Careful", "bonus-4", 1)
    assert mturk.bonuses_alike(client, WORKER, assignment, "0.4", "Careful") == 1
    assert mturk.bonuses_alike(client, WORKER, assignment, "0.40", "Other reason") == 0


def test_bonus_errors_that_are_not_repeats_are_raised(server: MTurkServer, client: Any) -> None:
    _, hit_id = publish(client)
    assignment = server.add_assignment(hit_id, WORKER)
    with pytest.raises(ClientError, match="enough funds"):
        mturk.send_bonus(client, WORKER, assignment, "999.00", "Jackpot", "bonus-big", 0)
    with pytest.raises(ClientError, match="not done by"):
        mturk.send_bonus(client, "A2SOMEONEELSE", assignment, "1.00", "x", "bonus-other", 0)
    with pytest.raises(ValidationError):
        mturk.send_bonus(client, WORKER, assignment, "0.001", "x", "bonus-tiny", 0)
    with pytest.raises(ClientError):
        client.send_bonus(WorkerId=WORKER, AssignmentId=assignment, BonusAmount="1.005", Reason="x")
    assert server.bonuses() == []


def test_bonus_payments_are_listed_per_assignment_or_hit(server: MTurkServer, client: Any) -> None:
    _, hit_id = publish(client)
    first = server.add_assignment(hit_id, WORKER)
    second = server.add_assignment(hit_id, "A2OTHERWORKER")
    for n in range(3):
        mturk.send_bonus(client, WORKER, first, f"0.{n + 1}0", "Streak", f"bonus-{n}", 0)
    mturk.send_bonus(client, "A2OTHERWORKER", second, "2.00", "Best", "bonus-other", 0)
    listed = mturk.list_bonus_payments(client, first)
    assert [(p["WorkerId"], p["BonusAmount"], p["Reason"]) for p in listed] == [
        (WORKER, "0.10", "Streak"), (WORKER, "0.20", "Streak"), (WORKER, "0.30", "Streak"),
    ]  # fmt: skip
    assert all(p["AssignmentId"] == first and p["GrantTime"] for p in listed)
    paged = client.get_paginator("list_bonus_payments").paginate(
        HITId=hit_id, PaginationConfig={"PageSize": 2}
    )
    assert [len(page["BonusPayments"]) for page in paged] == [2, 2, 0]
    # MTurk wants exactly one of HITId and AssignmentId.
    for both_or_neither in ({}, {"HITId": hit_id, "AssignmentId": first}):
        with pytest.raises(ClientError, match="Either the HITId"):
            client.list_bonus_payments(**both_or_neither)
    with pytest.raises(ClientError, match="does not exist"):
        client.list_bonus_payments(AssignmentId="3NOSUCHASSIGNMENT")


def test_a_hit_token_is_refused_for_24_hours_then_forgotten(
    server: MTurkServer, client: Any
) -> None:
    hit_type, hit_id = publish(client, token="study-9-hit-0")
    question = checks.external_question(URL, 800)
    # CreateHIT and CreateHITWithHITType share the token: MTurk names the HIT made with it.
    fields = {
        "Title": "Spot the machine-written sentence",
        "Description": "Read a passage and say where a machine took over.",
        "Reward": "0.50",
        "AssignmentDurationInSeconds": 1800,
        "LifetimeInSeconds": 3600,
        "Question": question,
        "UniqueRequestToken": "study-9-hit-0",
        "RequesterAnnotation": "study-9-hit-0",
    }
    with pytest.raises(ClientError) as error:
        client.create_hit(**fields)
    assert error.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.HitAlreadyExists"
    assert hit_id in error.value.response["Error"]["Message"]
    server.pass_time(24 * 3600 + 1)
    made = client.create_hit(**fields)["HIT"]
    assert made["HITId"] != hit_id and len(server.hits) == 2
    # Found again by its annotation, however late; the HIT of another type is not ours,
    # nor one that shows another page, nor one that no longer takes workers.
    in_3_days = datetime.now(UTC) + timedelta(days=3)  # its hour had passed: kept open
    client.update_expiration_for_hit(HITId=hit_id, ExpireAt=in_3_days)
    found = mturk.find_hits(client, hit_type, ["study-9-hit-0", "other"], URL)
    assert {annotation: hit["HITId"] for annotation, hit in found.items()} == {
        "study-9-hit-0": hit_id
    }
    assert mturk.find_hits(client, hit_type, ["study-9-hit-0"], URL + "&other") == {}
    client.update_expiration_for_hit(HITId=hit_id, ExpireAt=datetime(2020, 1, 1, tzinfo=UTC))
    assert mturk.find_hits(client, hit_type, ["study-9-hit-0"], URL) == {}


def test_notify_goes_out_in_batches_of_100(server: MTurkServer, client: Any) -> None:
    _, hit_id = publish(client, assignments=250)
    workers = [f"A{n:04d}NOTIFY" for n in range(250)]
    for worker in workers[:-1]:
        server.add_assignment(hit_id, worker)
    failures = mturk.notify(client, workers + workers[:5], "New study", "A new study is open.")
    assert server.calls_to("NotifyWorkers") == 3
    assert [len(sent) for sent, _, _ in server.notifications] == [100, 100, 49]
    # MTurk reports workers who never worked for us instead of failing the call.
    assert [f["WorkerId"] for f in failures] == [workers[-1]]
    with pytest.raises(ValidationError):
        mturk.notify(client, workers, "s" * 201, "m")
    with pytest.raises(ClientError):
        client.notify_workers(Subject="s", MessageText="m", WorkerIds=workers[:101])
