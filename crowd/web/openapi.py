"""/openapi.json (OpenAPI 3.1), generated from the operations the views declare.

Each view decorated with crowd.web.contract.operation contributes its path, parameters,
request body and every response with its schema; the JSON Schemas come from the same
pydantic models that validate the requests and dump the replies, so the description cannot
drift from what the server does.
"""

from __future__ import annotations

from typing import Annotated, Any

from flask import Blueprint, Flask, current_app
from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo
from pydantic.json_schema import models_json_schema
from werkzeug.routing import IntegerConverter, Rule

from crowd import __version__
from crowd.storage import MAX_ID
from crowd.web.contract import ANYONE, EXPERIMENTER, SCALE, WORKER, Media, Operation, operation_of

bp = Blueprint("openapi", __name__)

REF = "#/components/schemas/{model}"
SECURITY_SCHEMES: dict[str, dict[str, Any]] = {
    "experimenterKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "An experimenter's API key (`crowd keys create NAME`).",
    },
    "workerToken": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Crowd-Worker",
        "description": "The signed worker token POST /api/work/join gives (also sent as the "
        "crowd_worker cookie).",
    },
    "scaleKey": {
        "type": "http",
        "scheme": "basic",
        "description": "An experimenter's API key as the user name (what scaleapi sends).",
    },
}
SECURITY = {
    EXPERIMENTER: "experimenterKey",
    WORKER: "workerToken",
    SCALE: "scaleKey",
}
ERROR_TEXT = {
    400: "The body is not JSON we can take (malformed, too deep, a value out of range)",
    401: "No valid credentials were sent",
    403: "The credentials may not do this",
    404: "Nothing with this id is yours to see",
    409: "The request conflicts with the current state",
    413: "The body is too large",
    415: "The body's Content-Type is not one this operation takes",
    422: "A field is invalid: `field` names it and `errors` lists every problem",
    503: "The database or the queue is unavailable: retry after Retry-After seconds",
}


def _path_parameter(rule: Rule, name: str) -> dict[str, Any]:
    converter = rule._converters.get(name)  # the rule's own converters, after binding
    if isinstance(converter, IntegerConverter):
        schema: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": MAX_ID}
    else:
        schema = {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}
    return {"name": name, "in": "path", "required": True, "schema": schema}


def _content(returns: Any, schemas: dict[Any, Any], mode: str) -> dict[str, Any]:
    if isinstance(returns, Media):
        return {media: {"schema": {"type": "string"}} for media in returns.types}
    return {"application/json": {"schema": schemas[(returns, mode)]}}


def _description(returns: Any, status: int) -> str:
    if isinstance(returns, Media):
        return returns.description
    doc = (returns.__doc__ or "").strip().splitlines()
    return doc[0] if doc and status < 300 else ERROR_TEXT.get(status, "Error")


def _statuses(op: Operation, rule: Rule) -> dict[int, str]:
    """The error statuses of the operation, each with its description."""
    statuses = {400, 413, 422, 503, *op.errors}
    if set(op.auth) - {ANYONE}:
        statuses |= {401, 403}
    if rule.arguments:
        statuses.add(404)
    if op.body is not None or op.raw_body is not None:
        statuses.add(415)
    # An API whose error model answers some statuses as others (Scale's 422s are 400s) or
    # never (None) says so in the model's `answered_as`.
    answered_as: dict[int, int | None] = getattr(op.error_model, "answered_as", {})
    texts: dict[int, list[str]] = {}
    for status in sorted(statuses):
        answer = answered_as.get(status, status)
        if answer is not None and answer not in op.responses:
            texts.setdefault(answer, []).append(ERROR_TEXT.get(status, "Error"))
    return {status: "; or ".join(part if i == 0 else part[0].lower() + part[1:]
                                 for i, part in enumerate(parts))
            for status, parts in sorted(texts.items())}  # fmt: skip


def _operation(op: Operation, rule: Rule, schemas: dict[Any, Any]) -> dict[str, Any]:
    parameters = [_path_parameter(rule, name) for name in sorted(rule.arguments)]
    if op.query is not None:
        query_schema = op.query.model_json_schema(ref_template=REF)
        required = set(query_schema.get("required", []))
        for name, prop in query_schema.get("properties", {}).items():
            parameters.append({"name": name, "in": "query", "required": name in required,
                               "schema": prop, **({"description": prop["description"]}
                                                  if "description" in prop else {})})  # fmt: skip
    for name, declared in op.headers.items():
        text, schema = declared, {"type": "string"}
        if isinstance(declared, FieldInfo):
            schema = TypeAdapter(Annotated[str, declared]).json_schema()
            text = schema.pop("description", "")
        parameters.append({"name": name, "in": "header", "required": False,
                           "description": text, "schema": schema})  # fmt: skip
    responses: dict[str, Any] = {}
    for status, returns in sorted(op.responses.items()):
        responses[str(status)] = {
            "description": _description(returns, status),
            "content": _content(returns, schemas, "serialization"),
        }
    for status, text in _statuses(op, rule).items():
        responses[str(status)] = {
            "description": text,
            "content": _content(op.error_model, schemas, "serialization"),
        }
        if status == 503:
            responses[str(status)]["headers"] = {
                "Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}
            }
    result: dict[str, Any] = {
        "operationId": rule.endpoint.replace(".", "_"),
        "summary": op.summary,
        "tags": list(op.tags) or [rule.endpoint.split(".", 1)[0]],
        "parameters": parameters,
        "responses": responses,
    }
    if op.description:
        result["description"] = op.description
    security: list[dict[str, list[str]]] = [
        {SECURITY[name]: []} for name in op.auth if name in SECURITY
    ]
    if ANYONE in op.auth:
        security.append({})
    result["security"] = security
    content: dict[str, Any] = {}
    if op.body is not None:
        content.update(_content(op.body, schemas, "validation"))
    if op.raw_body is not None:
        content.update(_content(op.raw_body, schemas, "validation"))
    if content:
        result["requestBody"] = {"required": op.body_required, "content": content}
    return result


def _models(operations: list[Operation]) -> list[tuple[type[BaseModel], Any]]:
    found: dict[tuple[type[BaseModel], str], None] = {}
    for op in operations:
        for returns in [*op.responses.values(), op.error_model]:
            if isinstance(returns, type):
                found[(returns, "serialization")] = None
        if op.body is not None:
            found[(op.body, "validation")] = None
    return list(found)


def build(app: Flask) -> dict[str, Any]:
    """The OpenAPI document of every declared operation of `app`."""
    declared: list[tuple[Rule, Operation]] = []
    for rule in app.url_map.iter_rules():
        op = operation_of(app.view_functions.get(rule.endpoint))
        if op is not None:
            declared.append((rule, op))
    schemas, top = models_json_schema(
        _models([op for _, op in declared]), ref_template=REF
    )
    paths: dict[str, dict[str, Any]] = {}
    for rule, op in sorted(declared, key=lambda pair: pair[0].rule):
        path = rule.rule
        for name in rule.arguments:
            path = path.replace(f"<{name}>", f"{{{name}}}")
            for prefix in ("int", "string", "path"):
                path = path.replace(f"<{prefix}:{name}>", f"{{{name}}}")
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            paths.setdefault(path, {})[method.lower()] = _operation(op, rule, schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "crowd",
            "version": __version__,
            "description": "The experimenter API (Bearer API key), the worker and game APIs "
            "(a signed worker token in the X-Crowd-Worker header or the crowd_worker cookie) "
            "and the Scale-compatible task API under /v1 (the API key as HTTP Basic's user).",
        },
        "paths": paths,
        "components": {"schemas": top.get("$defs", {}), "securitySchemes": SECURITY_SCHEMES},
    }


@bp.get("/openapi.json")
def openapi_json() -> dict[str, Any]:
    spec = current_app.extensions.get("crowd.openapi")
    if spec is None:
        spec = current_app.extensions["crowd.openapi"] = build(current_app)
    return spec
