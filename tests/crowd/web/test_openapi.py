"""/openapi.json is generated from the declared operations: complete, and valid OpenAPI 3.1."""

from __future__ import annotations

import re
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

# JSON APIs: every route under these prefixes is a declared operation.
API_PREFIXES = ("/api/", "/v1/")


def _documented_path(rule: str) -> str:
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule)


def test_every_api_route_is_declared(app: Flask, client: FlaskClient) -> None:
    spec = client.get("/openapi.json").get_json()
    missing = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith(API_PREFIXES):
            continue
        path = _documented_path(rule.rule)
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}:
            if method.lower() not in spec["paths"].get(path, {}):
                missing.append(f"{method} {path}")
    assert not missing, missing


def test_every_response_has_a_schema(client: FlaskClient) -> None:
    spec = client.get("/openapi.json").get_json()
    assert spec["openapi"].startswith("3.1")
    bare = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            assert operation["summary"], (method, path)
            for status, response in operation["responses"].items():
                contents = response.get("content", {})
                if not contents or not all("schema" in c for c in contents.values()):
                    bare.append(f"{method} {path} {status}")
    assert not bare, bare


def test_the_description_is_valid_openapi(client: FlaskClient) -> None:
    from schemathesis.openapi import from_dict

    schema: Any = from_dict(client.get("/openapi.json").get_json())
    schema.validate()  # against the OpenAPI 3.1 meta-schema
    # Every operation loads, each $ref resolved.
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 4


def test_request_bodies_refuse_unknown_keys(client: FlaskClient) -> None:
    spec = client.get("/openapi.json").get_json()
    schemas = spec["components"]["schemas"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            ref = content.get("application/json", {}).get("schema", {}).get("$ref")
            if ref:
                body = schemas[ref.rsplit("/", 1)[-1]]
                assert body.get("additionalProperties") is False, (method, path)


def test_every_operation_with_security_refuses_a_caller_without_credentials(
    app: Flask, client: FlaskClient
) -> None:
    spec = client.get("/openapi.json").get_json()
    open_to_all = []
    for path, operations in spec["paths"].items():
        url = re.sub(r"\{[^}]+\}", "1", path)
        for method, operation in operations.items():
            if not operation["security"] or {} in operation["security"]:
                continue
            # Even with a body the model refuses: credentials come first.
            reply = client.open(url, method=method.upper(), json={"unknown": 1})
            if reply.status_code != 401:
                open_to_all.append(f"{method} {path} {reply.status_code}")
            assert "401" in operation["responses"], (method, path)
    assert not open_to_all, open_to_all
