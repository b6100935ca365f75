"""Item uploads over HTTP: CSV beside JSON lines and {"items": [...]}, and a check first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flask.testing import FlaskClient

from crowd.accounts import create_api_key
from crowd.storage import Database
from tests.conftest import passage

TASKS = Path(__file__).resolve().parents[3] / "tasks"
CSV = "text/csv"
GOOD = 'id,sentences,boundary,category\na,"One.\nTwo.\nThree.",2,news\nb,One.|Two.,1,\n'
BAD = GOOD + "c,One.|Two.,9,\nd,One.,1,\n"


def _study(client: FlaskClient, auth: dict[str, str], hit_type: str = "boundary") -> str:
    created = client.post("/api/studies", headers=auth, json={"name": "s", "hit_type": hit_type})
    assert created.status_code == 201, created.get_json()
    return f"/api/studies/{created.get_json()['id']}"


def _items(client: FlaskClient, auth: dict[str, str], url: str) -> dict[str, int]:
    reply = client.get(url, headers=auth)
    assert reply.status_code == 200
    counts: dict[str, int] = reply.get_json()["progress"]["items"]
    return counts


def _post(client: FlaskClient, auth: dict[str, str], url: str, body: Any, media: str) -> Any:
    data = body.encode("utf-8") if isinstance(body, str) else body
    return client.post(url, headers=auth, data=data, content_type=media)


def test_a_csv_is_checked_line_by_line_then_stored(
    client: FlaskClient, auth: dict[str, str]
) -> None:
    url = _study(client, auth)
    checked = _post(client, auth, f"{url}/items/check", BAD, CSV)
    assert checked.status_code == 200, checked.get_json()
    preview = checked.get_json()
    assert {key: preview[key] for key in ("format", "total", "valid", "invalid")} == {
        "format": "csv", "total": 4, "valid": 2, "invalid": 2,
    }  # fmt: skip
    assert preview["lines"][0] == {
        "line": 2, "id": "a", "kind": "real", "ok": True, "error": None, "field": None,
        "summary": "One. Two. Three.",
    }  # fmt: skip
    assert [(line["line"], line["field"]) for line in preview["lines"][2:]] == [
        (6, "boundary"), (7, "sentences"),
    ]  # fmt: skip
    assert _items(client, auth, url) == {}  # a check stores nothing
    refused = _post(client, auth, f"{url}/items", BAD, CSV)
    assert refused.status_code == 422
    assert refused.get_json()["field"] == "line 6, boundary"
    assert "1 more lines have problems" in refused.get_json()["error"]
    assert _items(client, auth, url) == {}  # all or none
    added = _post(client, auth, f"{url}/items", GOOD, "text/csv; charset=utf-8")
    assert added.status_code == 201 and added.get_json() == {"added": 2}
    assert _items(client, auth, url) == {"real": 2}
    again = _post(client, auth, f"{url}/items/check", GOOD, CSV).get_json()
    assert again["invalid"] == 2 and "already in study" in again["lines"][0]["error"]


def test_every_types_sample_csv_uploads(client: FlaskClient, auth: dict[str, str]) -> None:
    for hit_type in ("boundary", "likert", "comparison", "taboo"):
        url = _study(client, auth, hit_type)
        data = (TASKS / hit_type / "samples" / "items.csv").read_bytes()
        preview = _post(client, auth, f"{url}/items/check", data, CSV).get_json()
        assert preview["format"] == "csv" and preview["invalid"] == 0, (hit_type, preview)
        added = _post(client, auth, f"{url}/items", data, CSV)
        assert added.get_json() == {"added": preview["total"]}, hit_type


def test_json_lines_and_json_bodies_are_checked_too(
    client: FlaskClient, auth: dict[str, str]
) -> None:
    url = _study(client, auth)
    lines = json.dumps(passage("a", 2)) + "\n{oops\n" + json.dumps(passage("a", 3)) + "\n"
    preview = _post(client, auth, f"{url}/items/check", lines, "application/x-ndjson").get_json()
    assert preview["format"] == "jsonl"
    assert [(line["line"], line["ok"], line["field"]) for line in preview["lines"]] == [
        (1, True, None), (2, False, None), (3, False, "id"),
    ]  # fmt: skip
    assert preview["lines"][1]["summary"] == "{oops"
    # No Content-Type of ours: the first line says which format it is.
    detected = _post(client, auth, f"{url}/items/check", GOOD, "text/plain").get_json()
    assert detected["format"] == "csv" and detected["valid"] == 2
    body = {"items": [passage("a", 2), {"id": "b", "sentences": ["x"], "boundary": 1}]}
    checked = client.post(f"{url}/items/check", headers=auth, json=body).get_json()
    assert checked["format"] == "json"
    assert [(line["line"], line["field"]) for line in checked["lines"] if not line["ok"]] == [
        (2, "sentences"),
    ]  # fmt: skip
    typo = client.post(f"{url}/items/check", headers=auth, json={"item": []})
    assert typo.status_code == 422
    # Stored from a JSON body, a bad item is named by its place and the field.
    for items, field in (
        ([passage("a", 2), passage("x" * 201, 2)], "items[1].id"),  # past the items table's 200
        ([passage("a", 2), passage("a", 3)], "items[1].id"),
        ([passage("a", 2, category="c" * 101)], "items[0].category"),
        ([passage("a", 9)], "items[0].boundary"),
    ):
        refused = client.post(f"{url}/items", headers=auth, json={"items": items})
        assert refused.status_code == 422 and refused.get_json()["field"] == field, field
    assert _items(client, auth, url) == {}


def test_bad_uploads_are_4xx_naming_the_line_never_500(
    client: FlaskClient, auth: dict[str, str]
) -> None:
    url = _study(client, auth)
    for path in (f"{url}/items", f"{url}/items/check"):
        for data, media, status, field in (
            (b"id,colour\na,red\n", CSV, 422, "line 1, column 'colour'"),
            (b'id,sentences,boundary\na,"One.|Two.,1\n', CSV, 422, "line 2"),
            (b"id,sentences,boundary\na,caf\xe9|b,1\n", CSV, 422, "line 2"),
            ("id,sentences\n".encode("utf-16"), CSV, 422, "line 1"),
            (b"id,sentences\na,b\x00|c\n", CSV, 422, "line 2"),
            (b"\n\n", CSV, 422, "body"),
            (b"id,sentences,boundary\n", CSV, 422, None),
            (b"items=a", "application/x-www-form-urlencoded", 415, None),
        ):
            reply = _post(client, auth, path, data, media)
            assert reply.status_code == status, (path, data[:40], reply.get_json())
            if field is not None:
                assert reply.get_json()["field"] == field, (path, data[:40], reply.get_json())
        # A BOM is fine, and so is a semicolon-separated file from a spreadsheet.
        bom = "\ufeffid;sentences;boundary\nz;One.|Two.;1\n".encode()
        assert _post(client, auth, f"{url}/items/check", bom, CSV).get_json()["valid"] == 1
    assert _items(client, auth, url) == {}


def test_only_the_owner_uploads_and_a_closed_study_takes_nothing(
    client: FlaskClient, auth: dict[str, str], db: Database
) -> None:
    url = _study(client, auth)
    with db.session() as session:
        other = {"Authorization": f"Bearer {create_api_key(session, 'mallory')}"}
    for path in (f"{url}/items", f"{url}/items/check"):
        assert _post(client, {}, path, GOOD, CSV).status_code == 401
        assert _post(client, other, path, GOOD, CSV).status_code == 404
    closed = client.post(f"{url}/status", headers=auth, json={"action": "close"})
    assert closed.status_code == 200
    for path in (f"{url}/items", f"{url}/items/check"):
        reply = _post(client, auth, path, GOOD, CSV)
        assert reply.status_code == 409 and "completed" in reply.get_json()["error"]


def test_the_preview_is_described_in_the_openapi(client: FlaskClient) -> None:
    spec = client.get("/openapi.json").get_json()
    check = spec["paths"]["/api/studies/{study_id}/items/check"]["post"]
    reply = check["responses"]["200"]["content"]["application/json"]["schema"]
    assert reply == {"$ref": "#/components/schemas/ItemsChecked"}
    line = spec["components"]["schemas"]["CheckedLine"]
    assert set(line["properties"]) == {"line", "id", "kind", "ok", "error", "field", "summary"}
    assert {"409", "415", "422"} <= set(check["responses"])
