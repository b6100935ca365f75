"""POST /api/studies/{id}/status: pause, resume, close, archive, as workers then see it."""

from __future__ import annotations

from collections.abc import Callable

from flask.testing import FlaskClient

from tests.conftest import join


def _status(client: FlaskClient, auth: dict[str, str], study_id: int, action: str) -> object:
    return client.post(f"/api/studies/{study_id}/status", json={"action": action}, headers=auth)


def test_a_paused_study_serves_no_new_work_until_resumed(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int]
) -> None:
    study_id = make_study()
    worker = join(client, name="ann")
    reply = _status(client, auth, study_id, "pause")
    assert reply.status_code == 200 and reply.get_json()["status"] == "paused"
    refused = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=worker)
    assert refused.status_code == 409 and "paused" in refused.get_json()["error"]
    assert _status(client, auth, study_id, "resume").get_json()["status"] == "published"
    served = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=worker)
    assert served.status_code == 200 and "task" in served.get_json()


def test_closed_is_for_good_and_archived_leaves_the_list(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int]
) -> None:
    study_id = make_study()
    assert _status(client, auth, study_id, "close").get_json()["status"] == "completed"
    again = client.post(
        f"/api/studies/{study_id}/publish", json={"providers": ["local"]}, headers=auth
    )
    assert again.status_code == 409 and "closed" in again.get_json()["error"]
    assert _status(client, auth, study_id, "resume").status_code == 409
    archived = _status(client, auth, study_id, "archive").get_json()
    assert archived["archived_at"] is not None
    assert client.get("/api/studies", headers=auth).get_json()["studies"] == []
    listed = client.get("/api/studies?archived=true", headers=auth).get_json()["studies"]
    assert [study["id"] for study in listed] == [study_id]
    _status(client, auth, study_id, "unarchive")
    assert len(client.get("/api/studies", headers=auth).get_json()["studies"]) == 1


def test_an_unknown_action_names_the_field(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int]
) -> None:
    reply = _status(client, auth, make_study(), "delete")
    assert reply.status_code == 422 and reply.get_json()["field"] == "action"
