"""Prolific messages and participant groups, driving ProlificClient over HTTP against the
local Prolific stand-in, which checks the bodies as Prolific does."""

from __future__ import annotations

from typing import Any

import pytest

from crowd.exceptions import ProlificError, ValidationError
from crowd.platforms.providers import prolific_checks as prolific
from crowd.platforms.providers.prolific_api import ProlificClient
from tests.crowd.platforms.providers.prolific_server import ProlificServer
from tests.crowd.platforms.providers.prolific_support import (
    STUDY_CODE,
    TASK_URL,
    create,
    done,
    publish,
)

# The fixtures `server` and `client`, imported so that pytest finds them here.
from tests.crowd.platforms.providers.prolific_support import client_fixture as client_fixture
from tests.crowd.platforms.providers.prolific_support import server_fixture as server_fixture

STRANGER = "5f0c1d2e3a4b5c6d7e8f9a0b"
NOBODY = "0" * 24  # a well-formed id that names nothing


def _took_part(server: ProlificServer, study_id: str, n: int) -> list[str]:
    """n participants who took part in the study; their participant ids."""
    return [server.submissions[done(server, study_id)].participant_id for _ in range(n)]


def _study_with(client: ProlificClient, filters: list[dict[str, Any]]) -> str:
    created = client.create_study(
        name="A second study",
        description="Read a passage and say where a machine took over.",
        external_study_url=prolific.external_url(TASK_URL, allow_http=True),
        completion_code=STUDY_CODE,
        total_available_places=5,
        estimated_completion_time=10,
        reward=150,
        filters=filters,
        allow_http=True,
    )
    client.publish_study(str(created["id"]))
    return str(created["id"])


# -- messages --------------------------------------------------------------------------------


def test_one_participant_gets_a_message_and_several_one_bulk_message(
    server: ProlificServer, client: ProlificClient
) -> None:
    study_id = publish(client)
    first, second, third = _took_part(server, study_id, 3)
    assert client.send_message([first], "Thanks for taking part.", study_id) is None
    client.send_message([second, third], "A follow-up study is open.", study_id)
    assert server.calls_to("send_message") == 1 and server.calls_to("bulk_message") == 1
    assert [(m.recipient_id, m.body, m.bulk) for m in server.messages] == [
        (first, "Thanks for taking part.", False),
        (second, "A follow-up study is open.", True),
        (third, "A follow-up study is open.", True),
    ]
    assert {m.study_id for m in server.messages} == {study_id}
    sent = [body for name, body in server.calls if name in ("send_message", "bulk_message")]
    assert sent == [
        {"recipient_id": first, "body": "Thanks for taking part.", "study_id": study_id},
        {"ids": [second, third], "body": "A follow-up study is open.", "study_id": study_id},
    ]


@pytest.mark.parametrize("several", [False, True])
def test_a_message_to_someone_who_did_not_take_part_is_refused(
    server: ProlificServer, client: ProlificClient, several: bool
) -> None:
    study_id = publish(client)
    (member,) = _took_part(server, study_id, 1)
    recipients = [member, STRANGER] if several else [STRANGER]
    with pytest.raises(ProlificError, match="has not taken part") as error:
        client.send_message(recipients, "Hello", study_id)
    field = "ids" if several else "recipient_id"
    assert error.value.http_status == 400
    assert error.value.detail == {
        field: [f"Participant {STRANGER} has not taken part in the study."]
    }
    assert server.messages == []
    assert server.calls_to("bulk_message" if several else "send_message") == 1  # not retried


REQUIRED = ["This field is required."]
NOT_A_LIST = ["Expected a non-empty list of participant ids."]


@pytest.mark.parametrize(
    ("route", "body", "detail"),
    [
        ("/messages/", {"body": "Hi", "study_id": NOBODY}, {"recipient_id": REQUIRED}),
        ("/messages/", {"recipient_id": STRANGER, "body": "Hi"}, {"study_id": REQUIRED}),
        ("/messages/", {"recipient_id": STRANGER, "study_id": NOBODY}, {"body": REQUIRED}),
        (
            "/messages/",
            {"recipient_id": 7, "body": "Hi", "study_id": NOBODY},
            {"recipient_id": ["Not a valid string."]},
        ),
        (
            "/messages/",
            {"recipient_id": STRANGER, "body": " ", "study_id": NOBODY},
            {"body": ["This field may not be blank."]},
        ),
        (
            "/messages/",
            {"recipient_id": STRANGER, "body": "Hi", "study_id": NOBODY, "subject": "x"},
            {"subject": ["Unknown field."]},
        ),
        (
            "/messages/bulk/",
            {"ids": STRANGER, "body": "Hi", "study_id": NOBODY},
            {"ids": NOT_A_LIST},
        ),
        ("/messages/bulk/", {"ids": [], "body": "Hi", "study_id": NOBODY}, {"ids": NOT_A_LIST}),
        (
            "/messages/bulk/",
            {"recipient_id": STRANGER, "body": "Hi", "study_id": NOBODY},
            {"recipient_id": ["Unknown field."]},
        ),
        (
            "/participant-groups/",
            {"name": "g"},
            {"workspace_id": ["Either a workspace or organisation ID must be specified."]},
        ),
        ("/participant-groups/", {"workspace_id": NOBODY}, {"name": REQUIRED}),
    ],
)
def test_the_stand_in_checks_bodies_as_prolific_does(
    server: ProlificServer, client: ProlificClient, route: str, body: Any, detail: Any
) -> None:
    with pytest.raises(ProlificError) as error:
        client._call("POST", route, json=body, retry=False)
    assert error.value.http_status == 400
    assert error.value.detail == detail


def test_a_message_about_an_unknown_study_is_not_found(
    server: ProlificServer, client: ProlificClient
) -> None:
    with pytest.raises(ProlificError, match="found nothing") as error:
        client.send_message([STRANGER], "Hello", NOBODY)
    assert error.value.http_status == 404


@pytest.mark.parametrize(
    ("ids", "body", "field"),
    [
        ([], "Hello", "participant_ids"),
        (["not-an-id"], "Hello", "participant_ids"),
        ([STRANGER, STRANGER], "Hello", "participant_ids"),
        (STRANGER, "Hello", "participant_ids"),  # a string is not a list of ids
        ([STRANGER], "   ", "body"),
        ([STRANGER], "x" * (prolific.MAX_MESSAGE + 1), "body"),
    ],
)
def test_bad_messages_are_refused_before_any_request(
    server: ProlificServer, client: ProlificClient, ids: Any, body: str, field: str
) -> None:
    with pytest.raises(ValidationError) as error:
        client.send_message(ids, body, NOBODY)
    assert error.value.where == field
    assert server.calls == []


def test_at_most_the_bulk_limit_goes_in_one_message(
    server: ProlificServer, client: ProlificClient
) -> None:
    too_many = [f"{n:024x}" for n in range(prolific.MAX_MESSAGE_RECIPIENTS + 1)]
    with pytest.raises(ValidationError, match="1 to 4000 participants"):
        client.send_message(too_many, "Hello", NOBODY)
    assert server.calls == []


# -- participant groups ----------------------------------------------------------------------


def test_a_group_is_made_in_a_workspace_and_members_come_and_go(
    server: ProlificServer, client: ProlificClient
) -> None:
    (workspace,) = client.workspaces()
    assert workspace["id"] == server.workspace_id
    other = "6a0b1c2d3e4f5a6b7c8d9e0f"
    group = client.create_group("blocked", server.workspace_id, "why", [STRANGER])
    assert group["participant_count"] == 1 and group["workspace_id"] == server.workspace_id
    assert list(server.groups[group["id"]].members) == [STRANGER]
    assert client.add_to_group(group["id"], [other, STRANGER]) == [STRANGER, other]  # once each
    assert server.calls[-1] == ("add_to_group", {"participant_ids": [other, STRANGER]})
    assert client.remove_from_group(group["id"], [STRANGER]) == [other]
    assert client.remove_from_group(group["id"], [STRANGER]) == [other]  # not a member: ignored
    assert server.calls[-1] == ("remove_from_group", {"participant_ids": [STRANGER]})
    assert list(server.groups[group["id"]].members) == [other]
    with pytest.raises(ProlificError, match="found nothing") as error:
        client.add_to_group(NOBODY, [other])
    assert error.value.http_status == 404
    with pytest.raises(ProlificError, match="workspace_id") as error:
        client.create_group("blocked", NOBODY)
    assert error.value.detail == {"workspace_id": [f"Workspace {'0' * 24} not found."]}


def test_a_study_excluding_a_group_turns_its_members_away_even_those_added_later(
    server: ProlificServer, client: ProlificClient
) -> None:
    blocked, later, welcome = "a" * 24, "b" * 24, "c" * 24
    group = client.create_group("blocked", server.workspace_id, participant_ids=[blocked])
    filters = prolific.excluding_group(None, group["id"])
    assert filters == [
        {"filter_id": "participant_group_blocklist", "selected_values": [group["id"]]}
    ]
    study_id = _study_with(client, filters)
    with pytest.raises(PermissionError):
        server.start_submission(study_id, blocked)
    client.add_to_group(group["id"], [later])  # Prolific applies the group as it is now
    with pytest.raises(PermissionError):
        server.start_submission(study_id, later)
    server.start_submission(study_id, welcome)
    client.remove_from_group(group["id"], [blocked])
    server.start_submission(study_id, blocked)


def test_a_study_cannot_exclude_a_group_that_does_not_exist(
    server: ProlificServer, client: ProlificClient
) -> None:
    with pytest.raises(ProlificError, match="Unknown participant groups") as error:
        _study_with(client, prolific.excluding_group(None, NOBODY))
    assert error.value.http_status == 400 and "filters[0]" in error.value.detail


def test_the_exclusion_joins_a_blocklist_the_study_has_and_keeps_other_filters() -> None:
    mine, theirs = "a" * 24, "b" * 24
    age = {"filter_id": "age", "selected_range": {"lower": 18, "upper": 30}}
    blocklist = {"filter_id": "participant_group_blocklist", "selected_values": [theirs]}
    merged = prolific.excluding_group([age, blocklist], mine)
    assert merged == [age, {**blocklist, "selected_values": [theirs, mine]}]
    assert blocklist["selected_values"] == [theirs]  # the caller's filters are not changed
    assert prolific.excluding_group(merged, mine) == merged  # once
    assert prolific.excluding_group([age], mine)[-1]["selected_values"] == [mine]
    with pytest.raises(ValidationError, match="list of Prolific filters"):
        prolific.excluding_group({"filter_id": "age"}, mine)


# -- workspaces and projects -----------------------------------------------------------------


def test_a_project_names_its_workspace_and_a_study_excludes_only_groups_of_its_own(
    server: ProlificServer, client: ProlificClient
) -> None:
    other = server.add_workspace("Lab")
    project = server.add_project(other)
    assert [w["id"] for w in client.workspaces()] == [server.workspace_id, other]
    assert client.get_project(project)["workspace"] == other
    with pytest.raises(ProlificError, match="found nothing") as error:
        client.get_project(NOBODY)
    assert error.value.http_status == 404
    home_group = client.create_group("blocked", server.workspace_id)["id"]
    away_group = client.create_group("blocked", other)["id"]
    assert server.groups[away_group].workspace_id == other

    def study(project_id: str | None, group: str) -> dict[str, Any]:
        return client.create_study(
            name="A study",
            description="Read a passage and say where a machine took over.",
            external_study_url=prolific.external_url(TASK_URL, allow_http=True),
            completion_code=STUDY_CODE,
            total_available_places=5,
            estimated_completion_time=10,
            reward=150,
            filters=prolific.excluding_group(None, group),
            project=project_id,
            allow_http=True,
        )

    assert study(project, away_group)["project"] == project
    assert "project" not in study(None, home_group)  # the first workspace
    with pytest.raises(ProlificError, match="not in the study's workspace") as error:
        study(project, home_group)
    assert "filters[0]" in error.value.detail
    with pytest.raises(ProlificError, match="not found") as error:
        study(NOBODY, home_group)
    assert error.value.detail == {"project": [f"Project {NOBODY} not found."]}


def test_only_a_draft_study_can_be_given_a_group_to_exclude(
    server: ProlificServer, client: ProlificClient
) -> None:
    """Why the studies published before the experimenter's group existed never exclude it:
    Prolific lets a published study change only its internal name, places and submissions
    config."""
    group = client.create_group("blocked", server.workspace_id)["id"]
    filters = {"filters": prolific.excluding_group(None, group)}
    draft = str(create(client)["id"])
    client._call("PATCH", f"/studies/{draft}/", json=filters, retry=False)
    assert server.studies[draft].fields["filters"] == filters["filters"]
    published = publish(client)
    with pytest.raises(ProlificError, match="Cannot be changed once the study is ACTIVE"):
        client._call("PATCH", f"/studies/{published}/", json=filters, retry=False)
    assert "filters" not in server.studies[published].fields
