"""Declared operations: one pydantic model per body gives validation and the OpenAPI description.

A view declares what it takes and returns::

    @bp.post("/studies")
    @operation("Create a study", body=NewStudy, responses={201: StudyReply},
               auth=EXPERIMENTER, tags=("studies",))
    def create_study(body: NewStudy) -> Any: ...

The wrapper reads the query string and the JSON body (checked by crowd.web.bodies) into the
models, so a view only ever sees valid input; a mistake is a 422 naming the field path. What
the view returns is dumped through the declared reply model, so a response cannot drift from
its description. crowd.web.openapi builds /openapi.json from the same declarations.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic
from flask import Response, jsonify, request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo

from crowd.exceptions import AuthenticationError, CrowdError, ValidationError
from crowd.web.bodies import field_path, loads

# Where worker tokens travel (crowd.web.common reads them there too).
WORKER_COOKIE = "crowd_worker"
WORKER_HEADER = "X-Crowd-Worker"
EXPERIMENTER = "experimenter"
WORKER = "worker"
SCALE = "scale"
# An operation open to anyone that reads a worker token when one is sent.
ANYONE = "anyone"

View = Callable[..., Any]


class Body(BaseModel):
    """A request body or query: unknown keys are refused so typos never pass silently."""

    model_config = ConfigDict(extra="forbid")


class Reply(BaseModel):
    """A response body, exactly as documented: nothing undeclared goes out."""

    model_config = ConfigDict(extra="forbid")


class FieldProblem(Reply):
    field: str = Field(description="path of the field in the body or query, e.g. items[3].text")
    message: str


class ErrorReply(Reply):
    """Every error of the JSON APIs."""

    error: str = Field(description="what went wrong and how to fix it")
    type: str = Field(description="the kind of error, e.g. ValidationError or Not Found")
    field: str | None = Field(default=None, description="the field to fix, when one is at fault")
    errors: list[FieldProblem] | None = Field(
        default=None, description="every problem found, when the body or query was invalid"
    )


class InvalidInput(ValidationError):
    """A body or query that its declared model refused; `problems` lists every field."""

    kind = "ValidationError"

    def __init__(self, problems: list[FieldProblem]) -> None:
        first = problems[0]
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        super().__init__(first.message + more, first.field)
        self.problems = problems


class UnsupportedMedia(CrowdError):
    status = 415


@dataclass(frozen=True)
class Media:
    """A body that is not a JSON object of a model: CSV, HTML, JSON lines, a file."""

    types: tuple[str, ...]
    description: str


Returns = type[BaseModel] | Media


@dataclass(frozen=True)
class Operation:
    summary: str
    responses: dict[int, Returns]
    body: type[BaseModel] | None = None
    body_required: bool = True
    # A raw request body (e.g. JSON lines or CSV) accepted beside or instead of `body`.
    raw_body: Media | None = None
    query: type[BaseModel] | None = None
    auth: tuple[str, ...] = ()
    errors: tuple[int, ...] = ()
    tags: tuple[str, ...] = ()
    description: str | None = None
    error_model: type[BaseModel] = ErrorReply
    # Headers a client may send (name -> description, or a pydantic Field whose description
    # and string constraints describe it), e.g. Idempotency-Key.
    headers: dict[str, str | FieldInfo] = field(default_factory=dict)

    @property
    def ok_status(self) -> int:
        return min(status for status in self.responses if status < 300)


def _message(error: Any, allowed: list[str]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"unknown field: the allowed fields are {', '.join(allowed) or 'none'}"
    if kind == "missing":
        return "is required"
    return str(error["msg"])


def problems_of(error: pydantic.ValidationError, model: type[BaseModel], prefix: str = "") -> (
    list[FieldProblem]
):
    """The fields a pydantic error names, as 'items[3].text: what is allowed'."""
    problems = []
    for item in error.errors(include_url=False):
        location = tuple(item["loc"])
        allowed = sorted(model.model_fields) if len(location) <= 1 else _allowed(model, location)
        where = field_path(location)
        problems.append(
            FieldProblem(field=f"{prefix}{where}" if prefix else where,
                         message=_message(item, allowed))
        )  # fmt: skip
    return problems


def _allowed(model: type[BaseModel], location: tuple[int | str, ...]) -> list[str]:
    """The field names of the nested model an unknown key sits in, when it is one."""
    current: Any = model
    for part in location[:-1]:
        current = _inner_model(current)
        if isinstance(part, int):
            continue
        if not _is_model(current) or part not in current.model_fields:
            return []
        current = current.model_fields[part].annotation
    current = _inner_model(current)
    return sorted(current.model_fields) if _is_model(current) else []


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _inner_model(annotation: Any) -> Any:
    """The model inside list[M], M | None and the like, or the annotation itself."""
    if _is_model(annotation):
        return annotation
    for argument in typing.get_args(annotation):
        inner = _inner_model(argument)
        if _is_model(inner):
            return inner
    return annotation


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(argument) for argument in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _is_list(typing.get_args(annotation)[0])
    return False


def read_query(model: type[BaseModel]) -> BaseModel:
    """The query string as `model`; repeated parameters fill list fields."""
    raw: dict[str, Any] = {}
    for name in request.args:
        info = model.model_fields.get(name)
        values = request.args.getlist(name)
        raw[name] = values if info is not None and _is_list(info.annotation) else values[-1]
    try:
        return model.model_validate(raw)
    except pydantic.ValidationError as error:
        raise InvalidInput(problems_of(error, model)) from None


def read_json() -> Any:
    """The request's JSON value (checked by crowd.web.bodies), None when the body is empty."""
    data = request.get_data(cache=True)
    if not data.strip():
        return None
    if not request.is_json:
        raise UnsupportedMedia("send a JSON body with Content-Type: application/json")
    return loads(data)


def read_body(model: type[BaseModel], required: bool = True) -> BaseModel:
    # Only an empty body is an absent one: a JSON null is a value, and not an object.
    if not request.get_data(cache=True).strip():
        if required:
            raise ValidationError("send a JSON object with Content-Type: application/json")
        value: Any = {}
    else:
        value = read_json()
    if not isinstance(value, dict):
        raise ValidationError("the request body must be a JSON object", "body")
    try:
        return model.model_validate(value)
    except pydantic.ValidationError as error:
        raise InvalidInput(problems_of(error, model)) from None


def render(op: Operation, result: Any) -> Any:
    """A view's result as a response, JSON payloads dumped through their declared model."""
    if isinstance(result, Response):
        return result
    status, headers = op.ok_status, None
    if isinstance(result, tuple):
        result, status, *rest = result
        headers = rest[0] if rest else None
    declared = op.responses.get(status)
    if isinstance(result, BaseModel):
        payload = result.model_dump(mode="json")
    elif isinstance(declared, type) and issubclass(declared, BaseModel):
        payload = declared.model_validate(result).model_dump(mode="json")
    else:
        payload = result
    response = jsonify(payload)
    response.status_code = status
    if headers:
        response.headers.update(headers)
    return response


CREDENTIALS = {
    EXPERIMENTER: "your API key as 'Authorization: Bearer <key>'",
    WORKER: "your worker token in the X-Crowd-Worker header (POST /api/work/join gives one)",
    SCALE: "your API key as the user name of HTTP Basic auth (what scaleapi does)",
}


def require_credentials(auth: tuple[str, ...]) -> None:
    """A 401 before anything is read when no credentials of a declared kind came.

    The view still checks the credentials themselves (an unknown key is a 401 there); this
    makes the description's security hold at the edge, before a body is judged.
    """
    if not auth or ANYONE in auth:
        return
    header = request.headers.get("Authorization", "")
    for kind in auth:
        if kind == EXPERIMENTER and header.startswith("Bearer "):
            return
        if kind == SCALE and header.startswith(("Basic ", "Bearer ")):
            return
        if kind == WORKER and (request.headers.get(WORKER_HEADER)
                               or request.cookies.get(WORKER_COOKIE)):  # fmt: skip
            return
    raise AuthenticationError("send " + ", or ".join(CREDENTIALS[kind] for kind in auth))


def operation(
    summary: str,
    *,
    responses: dict[int, Returns],
    body: type[BaseModel] | None = None,
    body_required: bool = True,
    raw_body: Media | None = None,
    query: type[BaseModel] | None = None,
    auth: str | tuple[str, ...] = (),
    errors: tuple[int, ...] = (),
    tags: tuple[str, ...] = (),
    description: str | None = None,
    error_model: type[BaseModel] = ErrorReply,
    headers: dict[str, str | FieldInfo] | None = None,
) -> Callable[[View], View]:
    """Declare a view's query, body and replies (see the module docstring)."""
    op = Operation(
        summary=summary,
        responses=responses,
        body=body,
        body_required=body_required,
        raw_body=raw_body,
        query=query,
        auth=(auth,) if isinstance(auth, str) else auth,
        errors=errors,
        tags=tags,
        description=description,
        error_model=error_model,
        headers=headers or {},
    )

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapper(**kwargs: Any) -> Any:
            require_credentials(op.auth)
            if op.query is not None:
                kwargs["query"] = read_query(op.query)
            if op.body is not None and op.raw_body is None:
                kwargs["body"] = read_body(op.body, op.body_required)
            return render(op, view(**kwargs))

        wrapper.__operation__ = op  # type: ignore[attr-defined]
        return wrapper

    return decorate


def operation_of(view: Any) -> Operation | None:
    value = getattr(view, "__operation__", None)
    return value if isinstance(value, Operation) else None
