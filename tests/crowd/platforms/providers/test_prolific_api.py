"""The Prolific groundwork, driving ProlificClient over HTTP against the local Prolific stand-in."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from crowd.exceptions import ConfigurationError, ProlificError, ValidationError
from crowd.platforms.providers import prolific_checks as prolific
from crowd.platforms.providers.prolific_api import ProlificClient
from tests.crowd.platforms.providers.prolific_server import ApiError, ProlificServer
from tests.crowd.platforms.providers.prolific_support import (
    REASON,
    SECRET,
    STUDY_CODE,
    TASK_URL,
    TOKEN,
    create,
    done,
    publish,
)

# The fixtures `server` and `client`, imported so that pytest finds them here.
from tests.crowd.platforms.providers.prolific_support import client_fixture as client_fixture
from tests.crowd.platforms.providers.prolific_support import server_fixture as server_fixture

# -- pure pieces -----------------------------------------------------------------------------


def test_external_url_adds_the_placeholders_verbatim() -> None:
    url = prolific.external_url("https://crowd.example.org/work/7?kind=a#top")
    assert url == (
        "https://crowd.example.org/work/7?kind=a&PROLIFIC_PID={{%PROLIFIC_PID%}}"
        "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}#top"
    )
    assert prolific.external_url("https://crowd.example.org/w").startswith(
        "https://crowd.example.org/w?PROLIFIC_PID="
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://crowd.example.org/work",  # http without allow_http
        "/work/7",
        "https:///work",
        "https://crowd.example.org/work me",
        "https://crowd.example.org/work?PROLIFIC_PID=x",
        "ftp://crowd.example.org/work",
    ],
)
def test_bad_task_urls_are_refused(url: str) -> None:
    with pytest.raises(ValidationError):
        prolific.external_url(url)


def test_completion_codes_are_per_submission_and_checkable() -> None:
    sessions = [f"{n:024x}" for n in range(1, 201)]
    codes = [prolific.completion_code(SECRET, s) for s in sessions]
    assert all(re.fullmatch(r"[A-Z2-7]{10}", code) for code in codes)
    assert len(set(codes)) == len(codes)
    first, second = sessions[:2]
    assert prolific.code_matches(SECRET, first, codes[0])
    assert prolific.code_matches(SECRET, first, f"  {codes[0].lower()} ")
    assert not prolific.code_matches(SECRET, first, codes[1])  # another participant's code
    assert not prolific.code_matches(SECRET, second, codes[0])
    assert not prolific.code_matches(SECRET, first, codes[0][:-1])
    assert not prolific.code_matches(SECRET, first, STUDY_CODE)  # the study-wide code
    assert not prolific.code_matches("another-secret-of-16-bytes", first, codes[0])
    assert not prolific.code_matches(SECRET, first, None)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="16 bytes"):
        prolific.completion_code("short", first)
    with pytest.raises(ValidationError, match="Prolific id"):
        prolific.completion_code(SECRET, "not-a-session")


def test_completion_url_sends_the_code_back_to_prolific() -> None:
    assert prolific.completion_url("ABC234") == (
        "https://app.prolific.com/submissions/complete?cc=ABC234"
    )
    with pytest.raises(ValidationError):
        prolific.completion_url("ABC 234")


def test_client_configuration_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="tokens"):
        ProlificClient("")
    with pytest.raises(ConfigurationError, match="https origin"):
        ProlificClient(TOKEN, base_url="http://api.prolific.com")
    with pytest.raises(ConfigurationError, match="without a path"):
        ProlificClient(TOKEN, base_url="https://api.prolific.com/api/v1/")
    assert ProlificClient(TOKEN).base_url == "https://api.prolific.com"


# -- studies ---------------------------------------------------------------------------------


def test_a_study_is_created_as_a_draft_then_published(
    server: ProlificServer, client: ProlificClient
) -> None:
    study = create(client)
    assert study["status"] == "UNPUBLISHED"
    assert study["reward"] == 150 and study["total_available_places"] == 3
    assert study["prolific_id_option"] == "url_parameters"
    assert study["completion_codes"] == [
        {"code": STUDY_CODE, "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]}
    ]
    assert study["external_study_url"] == prolific.external_url(TASK_URL, allow_http=True)
    assert client.publish_study(study["id"])["status"] == "ACTIVE"
    assert client.get_study(study["id"])["status"] == "ACTIVE"
    # Prolific fills in the placeholders: our page learns who came, from which study.
    submission_id, session_id = server.start_submission(study["id"])
    sent = urlsplit(server.participant_url(submission_id))
    query = parse_qs(sent.query)
    assert sent.fragment == "top" and query["kind"] == ["boundary"]
    assert query["STUDY_ID"] == [study["id"]]
    assert query["SESSION_ID"] == [session_id] == [submission_id]
    assert query["PROLIFIC_PID"] == [server.submissions[submission_id].participant_id]


def test_study_transitions_follow_prolifics_table(
    server: ProlificServer, client: ProlificClient
) -> None:
    study_id = publish(client)
    with pytest.raises(ProlificError, match="Cannot PUBLISH a study that is ACTIVE") as error:
        client.publish_study(study_id)
    assert error.value.http_status == 400
    assert client.pause_study(study_id)["status"] == "PAUSED"
    assert client.resume_study(study_id)["status"] == "ACTIVE"
    assert client.stop_study(study_id)["status"] == "COMPLETED"
    with pytest.raises(ProlificError):
        client.resume_study(study_id)


@pytest.mark.parametrize("disconnect", [False, True])
def test_a_publish_whose_answer_was_lost_is_not_sent_again(
    server: ProlificServer, client: ProlificClient, disconnect: bool
) -> None:
    study_id = str(create(client)["id"])
    server.lose_next_response("transition_study", disconnect=disconnect)
    assert client.publish_study(study_id)["status"] == "ACTIVE"
    assert server.calls_to("transition_study") == 1
    assert server.calls_to("get_study") == 1


def test_a_publish_that_never_happened_is_sent_again(
    server: ProlificServer, client: ProlificClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    study_id = str(create(client)["id"])
    # The first try fails before doing anything (a 500 from Prolific's side), then succeeds.
    server.lose_next_response("get_study")  # the status check's own answer is lost once too
    original = server.op_transition_study
    calls = {"n": 0}

    def flaky(*args: Any) -> tuple[int, Any]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ApiError(500, "Internal error.", "Server error")
        return original(*args)

    monkeypatch.setattr(server, "op_transition_study", flaky)
    assert client.publish_study(study_id)["status"] == "ACTIVE"
    assert server.calls_to("transition_study") == 2
    assert server.calls_to("get_study") == 2  # the lost answer retried: a read is safe


def test_publishing_needs_funds(server: ProlificServer, client: ProlificClient) -> None:
    study_id = str(create(client, places=1000, reward=1000)["id"])
    with pytest.raises(ProlificError, match="Insufficient balance"):
        client.publish_study(study_id)
    assert server.studies[study_id].status == "UNPUBLISHED"


# -- submissions -----------------------------------------------------------------------------


@pytest.mark.parametrize("links", [True, False])
def test_submissions_are_listed_across_pages(links: bool) -> None:
    # links=False answers as the OpenAPI document shows: results only; we count pages.
    with ProlificServer(token=TOKEN, links=links) as server:
        client = ProlificClient(TOKEN, base_url=server.base_url, backoff_s=0)
        study_id = publish(client, places=25)
        ids = [done(server, study_id) for _ in range(25)]
        listed = client.list_submissions(study_id, page_size=7)
        assert [s["id"] for s in listed] == ids
        assert server.calls_to("list_submissions") == 4
        assert listed[0]["status"] == "AWAITING REVIEW"
        # An exactly full last page: the next link is empty, or the next page is "Invalid".
        assert len(client.list_submissions(study_id, page_size=5)) == 25
        assert server.calls_to("list_submissions") == 4 + (5 if links else 6)
        client.approve(ids[0])
        approved = client.list_submissions(study_id, ["APPROVED"])
        assert [s["id"] for s in approved] == [ids[0]]
        assert len(client.list_submissions(study_id, ["AWAITING REVIEW"])) == 24


def test_a_next_link_to_another_host_is_not_followed(
    server: ProlificServer, client: ProlificClient
) -> None:
    study_id = publish(client, places=3)
    for _ in range(3):
        done(server, study_id)
    server.link_origin = "https://elsewhere.example.org"
    with pytest.raises(ProlificError, match="elsewhere.*not following it"):
        client.list_submissions(study_id, page_size=2)
    assert server.calls_to("list_submissions") == 1


def test_approve_pays_the_reward_once(server: ProlificServer, client: ProlificClient) -> None:
    study_id = publish(client)
    submission_id = done(server, study_id)
    assert client.approve(submission_id)["status"] == "APPROVED"
    # Prolific documents the transition as idempotent: a repeat is ignored, nothing is paid.
    assert client.approve(submission_id)["status"] == "APPROVED"
    second = done(server, study_id)
    server.lose_next_response("transition_submission")
    assert client.approve(second)["status"] == "APPROVED"
    assert server.calls_to("transition_submission") == 4  # 1 + 1 + (lost + retry)
    assert [(p.kind, p.amount) for p in server.payments] == [("reward", 150), ("reward", 150)]
    assert server.balance == 100_000 - 2 * (150 + 50)


def test_an_active_submission_cannot_be_approved(
    server: ProlificServer, client: ProlificClient
) -> None:
    study_id = publish(client)
    submission_id, _ = server.start_submission(study_id)
    with pytest.raises(ProlificError, match="ACTIVE") as error:
        client.approve(submission_id)
    assert error.value.http_status == 400
    assert server.payments == []


def test_reject_needs_a_long_message_and_a_category(
    server: ProlificServer, client: ProlificClient
) -> None:
    study_id = publish(client)
    submission_id = done(server, study_id)
    with pytest.raises(ValidationError, match="100 characters"):
        client.reject(submission_id, "Random answers.", "LOW_EFFORT")
    with pytest.raises(ValidationError, match="TOO_QUICKLY"):
        client.reject(submission_id, REASON, "RANDOM")
    assert server.calls_to("transition_submission") == 0
    # Prolific itself refuses a short message too (straight through requests, past our checks).
    answer = requests.post(
        f"{server.base_url}/api/v1/submissions/{submission_id}/transition/",
        json={"action": "REJECT", "message": "No.", "rejection_category": "LOW_EFFORT"},
        headers={"Authorization": f"Token {TOKEN}"},
        timeout=5,
    )
    assert answer.status_code == 400
    assert "message" in answer.json()["error"]["detail"]
    assert client.reject(submission_id, REASON, "FAILED_CHECK")["status"] == "REJECTED"
    assert server.submissions[submission_id].rejection == ("FAILED_CHECK", REASON)
    assert server.payments == []
    with pytest.raises(ProlificError):
        client.approve(submission_id)


def test_the_reviewer_checks_each_submissions_own_code(
    server: ProlificServer, client: ProlificClient
) -> None:
    study_id = publish(client)
    honest = done(server, study_id)
    copier, session = server.start_submission(study_id)
    server.complete(copier, prolific.completion_code(SECRET, honest))  # someone else's code
    guesser, _ = server.start_submission(study_id)
    server.complete(guesser, STUDY_CODE)  # the study-wide code, e.g. read on a forum
    verdicts = {
        s["id"]: prolific.code_matches(SECRET, s["id"], s["study_code"] or "")
        for s in client.list_submissions(study_id, ["AWAITING REVIEW"])
    }
    assert verdicts == {honest: True, copier: False, guesser: False}
    assert session == copier


# -- places ----------------------------------------------------------------------------------


def test_places_of_returned_and_timed_out_submissions(
    server: ProlificServer, client: ProlificClient
) -> None:
    study_id = publish(client, places=3)
    first, second, third = (done(server, study_id) for _ in range(3))
    with pytest.raises(ValueError, match="no place"):
        server.start_submission(study_id)
    server.return_submission(second)
    late, _ = server.start_submission(study_id)  # Prolific reopened the returned place
    server.time_out(late)
    assert {s["id"] for s in client.returned_or_timed_out(study_id)} == {second, late}
    client.reject(third, REASON, "LOW_EFFORT")
    lost = client.returned_or_timed_out(study_id, include_rejected=True)
    assert {s["id"] for s in lost} == {second, late, third}
    assert first not in {s["id"] for s in lost}
    # More places (here after stopping) reopen the study for new participants.
    client.stop_study(study_id)
    study = client.increase_places(study_id, 5)
    assert study["status"] == "ACTIVE" and study["total_available_places"] == 5
    assert client.increase_places(study_id, 5)["total_available_places"] == 5  # no PATCH
    assert server.calls_to("update_study") == 1
    with pytest.raises(ValidationError, match="only lets them grow"):
        client.increase_places(study_id, 4)
    assert server.calls_to("update_study") == 1
    server.lose_next_response("update_study")
    assert client.increase_places(study_id, 6)["total_available_places"] == 6
    assert server.calls_to("update_study") == 3  # a PATCH to an absolute value is retried


# -- bonuses ---------------------------------------------------------------------------------


def test_a_bonus_is_set_up_in_currency_units_then_paid(
    server: ProlificServer, client: ProlificClient
) -> None:
    study_id = publish(client)
    participant = "60ffe5c8371090c7041d43f8"
    submission_id = done(server, study_id, participant)
    bonus = client.create_bonus(study_id, participant, 125)
    assert server.calls[-1] == (
        "create_bonus",
        {"study_id": study_id, "csv_bonuses": f"{participant},1.25\n"},
    )
    assert bonus["amount"] == 125 and bonus["total_amount"] == 125 + 41
    assert server.bonuses() == []  # set up, not paid
    client.pay_bonus(bonus["id"])
    assert [(p.participant_id, p.amount) for p in server.bonuses()] == [(participant, 125)]
    assert client.get_submission(submission_id)["bonus_payments"] == [125]
    with pytest.raises(ProlificError, match="did not take part"):
        client.create_bonus(study_id, "0123456789abcdef01234567", 100)


def test_a_bonus_retried_with_its_token_pays_once(
    server: ProlificServer, client: ProlificClient
) -> None:
    study_id = publish(client)
    participant = "60ffe5c8371090c7041d43f8"
    done(server, study_id, participant)
    ledger: dict[str, str] = {}
    bonus_id = client.bonus(study_id, participant, 200, "study-7/p1/streak", ledger)
    assert ledger == {"study-7/p1/streak": f"paid {bonus_id}"}
    assert client.bonus(study_id, participant, 200, "study-7/p1/streak", ledger) == bonus_id
    assert server.calls_to("create_bonus") == 1 and server.calls_to("pay_bonus") == 1
    # The set-up's answer is lost: retried, leaving one unpaid set-up behind; one payment.
    server.lose_next_response("create_bonus")
    client.bonus(study_id, participant, 300, "study-7/p1/top10", ledger)
    assert server.calls_to("create_bonus") == 3
    assert [p.amount for p in server.bonuses()] == [200, 300]
    assert sorted(b.paid for b in server.bulk_bonuses.values()) == [0, 1, 1]


@pytest.mark.parametrize("disconnect", [False, True])
def test_a_bonus_whose_pay_answer_was_lost_is_never_paid_twice(
    server: ProlificServer, client: ProlificClient, disconnect: bool
) -> None:
    study_id = publish(client)
    participant = "60ffe5c8371090c7041d43f8"
    done(server, study_id, participant)
    ledger: dict[str, str] = {}
    server.lose_next_response("pay_bonus", disconnect=disconnect)
    with pytest.raises(ProlificError, match="may have taken effect"):
        client.bonus(study_id, participant, 200, "b-1", ledger)
    state, bonus_id = ledger["b-1"].split()
    assert state == "paying"
    with pytest.raises(ProlificError, match="could pay twice"):
        client.bonus(study_id, participant, 200, "b-1", ledger)
    assert server.calls_to("pay_bonus") == 1
    assert [p.amount for p in server.bonuses()] == [200]  # it did go through, once
    # Once the caller has seen it paid, the ledger says so and nothing more happens.
    ledger["b-1"] = f"paid {bonus_id}"
    assert client.bonus(study_id, participant, 200, "b-1", ledger) == bonus_id
    assert server.calls_to("pay_bonus") == 1


def test_a_refused_pay_can_be_paid_later(server: ProlificServer, client: ProlificClient) -> None:
    study_id = publish(client)
    participant = "60ffe5c8371090c7041d43f8"
    done(server, study_id, participant)
    server.balance = 100  # not enough for 200 + fees
    ledger: dict[str, str] = {}
    with pytest.raises(ProlificError, match="Insufficient balance") as error:
        client.bonus(study_id, participant, 200, "b-2", ledger)
    assert error.value.http_status == 400
    assert ledger["b-2"].startswith("created ")  # refused: nothing was paid
    server.balance = 10_000
    bonus_id = client.bonus(study_id, participant, 200, "b-2", ledger)
    assert ledger["b-2"] == f"paid {bonus_id}"
    assert server.calls_to("create_bonus") == 1  # the same set-up, paid now
    assert [p.amount for p in server.bonuses()] == [200]
