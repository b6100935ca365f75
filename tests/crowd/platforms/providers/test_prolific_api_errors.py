"""The Prolific groundwork's errors and checks: what our client and the Prolific stand-in refuse."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from crowd.exceptions import ProlificError, ValidationError
from crowd.platforms.providers import prolific_checks as prolific
from crowd.platforms.providers.prolific_api import ProlificClient
from tests.conftest import free_port
from tests.crowd.platforms.providers.prolific_server import ProlificServer
from tests.crowd.platforms.providers.prolific_support import (
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

# -- errors and checks -----------------------------------------------------------------------

GOOD_STUDY: dict[str, Any] = {
    "name": "n",
    "description": "d",
    "external_study_url": prolific.external_url(TASK_URL, allow_http=True),
    "completion_code": STUDY_CODE,
    "total_available_places": 3,
    "estimated_completion_time": 10,
    "reward": 150,
    "allow_http": True,
}
SUBMISSION = "0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("create_study", {"reward": 1.5}),
        ("create_study", {"reward": "150"}),
        ("create_study", {"reward": 0}),
        ("create_study", {"reward": True}),
        ("create_study", {"total_available_places": 0}),
        ("create_study", {"estimated_completion_time": 0}),
        ("create_study", {"maximum_allowed_time": 20}),  # under 2 + 2*10 + 2*sqrt(10)
        ("create_study", {"external_study_url": TASK_URL}),  # no placeholders
        ("create_study", {"allow_http": False}),
        ("create_study", {"completion_code": "abc"}),
        ("create_study", {"name": " "}),
        ("create_study", {"description": "d" * 20_001}),
        ("create_study", {"device_compatibility": ["phone"]}),
        ("create_study", {"device_compatibility": []}),
        ("create_study", {"filters": [{"selected_values": ["1"]}]}),
        ("create_study", {"project": "my-project"}),
        ("get_study", {"study_id": "64395e9c2332b8a59a65d51"}),  # 23 characters
        ("approve", {"submission_id": "64395E9C2332B8A59A65D51E"}),  # upper case
        ("reject", {"submission_id": SUBMISSION, "message": "x" * 99, "category": "OTHER"}),
        ("create_bonus", {"study_id": SUBMISSION, "participant_id": SUBMISSION, "amount": 1.25}),
        ("create_bonus", {"study_id": SUBMISSION, "participant_id": "p1", "amount": 125}),
        ("create_bonus", {"study_id": SUBMISSION, "participant_id": SUBMISSION, "amount": 10**6}),
        ("pay_bonus", {"bonus_id": "latest"}),
        ("list_submissions", {"study_id": SUBMISSION, "statuses": ["AWAITING_REVIEW"]}),
        ("list_submissions", {"study_id": SUBMISSION, "page_size": 1000}),
        ("balance", {"workspace_id": ""}),
        ("increase_places", {"study_id": SUBMISSION, "total": -1}),
        (
            "bonus",
            {
                "study_id": SUBMISSION,
                "participant_id": SUBMISSION,
                "amount": 100,
                "token": "",
                "ledger": {},
            },
        ),
    ],
)
def test_bad_input_is_refused_before_any_request(
    server: ProlificServer, client: ProlificClient, call: str, args: dict[str, Any]
) -> None:
    kwargs = {**GOOD_STUDY, **args} if call == "create_study" else args
    with pytest.raises(ValidationError):
        getattr(client, call)(**kwargs)
    assert server.calls == []


def test_a_wrong_token_is_a_prolific_error_with_its_status(server: ProlificServer) -> None:
    client = ProlificClient("not-the-token", base_url=server.base_url, backoff_s=0)
    with pytest.raises(ProlificError, match="refused the token") as error:
        client.me()
    assert error.value.http_status == 401
    assert error.value.detail == "Invalid token."
    assert error.value.status == 502  # what our own web layer answers with
    assert server.calls_to("me") == 1  # a 401 is not retried
    good = ProlificClient(TOKEN, base_url=server.base_url)
    assert good.me()["id"] == server.user_id


def test_prolific_validation_errors_name_the_field(
    server: ProlificServer, client: ProlificClient
) -> None:
    with pytest.raises(ProlificError, match="reward: A whole number") as error:
        client._call("POST", "/studies/", json={**_study_body(), "reward": 1.5}, retry=False)
    assert error.value.detail == {
        "reward": ["A whole number is required (the reward is in pence/cents)."]
    }


def _study_body() -> dict[str, Any]:
    return {
        "name": "n",
        "description": "d",
        "external_study_url": prolific.external_url(TASK_URL, allow_http=True),
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {
                "code": STUDY_CODE,
                "code_type": "COMPLETED",
                "actions": [{"action": "MANUALLY_REVIEW"}],
            }
        ],
        "total_available_places": 3,
        "estimated_completion_time": 10,
        "reward": 150,
    }


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"reward": 1.5}, "reward"),
        ({"reward": 0}, "reward"),
        ({"total_available_places": 2.5}, "total_available_places"),
        ({"external_study_url": "http://x.example.org/?PROLIFIC_PID={{%PROLIFIC_PID%}}"}, "https"),
        ({"external_study_url": "https://crowd.example.org/"}, "PROLIFIC_PID"),
        ({"prolific_id_option": "url"}, "prolific_id_option"),
        ({"completion_codes": []}, "at least one"),
        (
            {"completion_codes": [{"code": "A", "code_type": "X", "actions": [{"action": "PAY"}]}]},
            "PAY",
        ),
        (
            {
                "completion_codes": [
                    {
                        "code": "A",
                        "code_type": "COMPLETED",
                        "actions": [
                            {"action": "MANUALLY_REVIEW"},
                            {"action": "AUTOMATICALLY_APPROVE"},
                        ],
                    }
                ]
            },
            "exclude",
        ),
        ({"maximum_allowed_time": 5}, "maximum_allowed_time"),
        ({"reward_cents": 150}, "Unknown field"),
        ({"description": ""}, "blank"),
    ],
)
def test_the_server_refuses_what_prolific_refuses(
    server: ProlificServer, change: dict[str, Any], fragment: str
) -> None:
    # Straight through requests, past our own checks, to prove the stand-in's.
    answer = requests.post(
        f"{server.base_url}/api/v1/studies/",
        json={**_study_body(), **change},
        headers={"Authorization": f"Token {TOKEN}"},
        timeout=5,
    )
    assert answer.status_code == 400
    assert fragment in str(answer.json()["error"])
    assert server.studies == {}


def test_missing_required_fields_are_refused(server: ProlificServer) -> None:
    body = _study_body()
    del body["estimated_completion_time"]
    answer = requests.post(
        f"{server.base_url}/api/v1/studies/",
        json=body,
        headers={"Authorization": f"Token {TOKEN}"},
        timeout=5,
    )
    assert answer.json()["error"]["detail"] == {
        "estimated_completion_time": ["This field is required."]
    }


def test_reads_are_retried_after_server_errors_and_give_up(
    server: ProlificServer, client: ProlificClient
) -> None:
    study_id = str(create(client)["id"])
    server.lose_next_response("get_study", times=2)
    assert client.get_study(study_id)["id"] == study_id
    assert server.calls_to("get_study") == 3
    server.lose_next_response("get_study", times=4)
    with pytest.raises(ProlificError, match="after 4 tries") as error:
        client.get_study(study_id)
    assert error.value.http_status == 502
    assert "Bad Gateway" in str(error.value.detail)


def test_no_server_is_a_prolific_error_without_a_status() -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    client = ProlificClient(TOKEN, base_url=nobody, attempts=2, backoff_s=0)
    with pytest.raises(ProlificError, match="no answer") as error:
        client.pay_bonus(SUBMISSION)
    assert error.value.http_status is None
    # Never connected, so even a pay was tried again, and the message does not cry wolf.
    assert "after 2 tries" in str(error.value)
    assert "may have taken effect" not in str(error.value)


def test_a_missing_study_is_a_404(server: ProlificServer, client: ProlificClient) -> None:
    with pytest.raises(ProlificError, match="found nothing") as error:
        client.get_study(SUBMISSION)
    assert error.value.http_status == 404


def test_the_balance_of_the_workspace(server: ProlificServer, client: ProlificClient) -> None:
    study_id = publish(client)
    client.approve(done(server, study_id))
    balance = client.balance(server.workspace_id)
    assert balance["available_balance"] == 100_000 - 150 - 50
    assert balance["currency_code"] == "GBP"
    with pytest.raises(ProlificError) as error:
        client.balance(SUBMISSION)
    assert error.value.http_status == 404
