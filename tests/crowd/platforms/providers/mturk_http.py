"""The MTurk stand-in's HTTP side: JSON 1.1 requests in, MTurk's answers and errors out."""

from __future__ import annotations

import json
import uuid
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from tests.crowd.platforms.providers.mturk_state import (
    CONTENT_TYPE,
    CREDENTIAL_SCOPE,
    TARGET_PREFIX,
    RequestError,
    ResponseCut,
)

if TYPE_CHECKING:
    from tests.crowd.platforms.providers.mturk_server import MTurkServer


def _handler(server: MTurkServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as botocore's connection pool expects.
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle each answer would wait ~40 ms.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test output is no place for an access log

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.split("?")[0] == "/mturk/externalSubmit":
                self._external_submit(raw)
                return
            request_id = str(uuid.uuid4())
            try:
                operation, body = self._parse(raw)
                result = server.handle(operation, body, request_id)
            except ResponseCut:
                self.close_connection = True  # handled, but no answer goes back
                return
            except RequestError as error:
                status = 500 if error.kind == "ServiceFault" else 400
                self._reply(
                    status,
                    {
                        "__type": error.kind,
                        "Message": error.message,
                        "TurkErrorCode": error.turk_code,
                    },
                    request_id,
                )
                return
            self._reply(200, result, request_id)

        def _parse(self, raw: bytes) -> tuple[str, dict[str, Any]]:
            if self.path != "/":
                raise RequestError(f"MTurk answers at /, not {self.path}.")
            target = self.headers.get("X-Amz-Target", "")
            if not target.startswith(TARGET_PREFIX):
                raise RequestError(
                    f"X-Amz-Target {target!r} is not {TARGET_PREFIX}<Operation>.",
                    kind="UnknownOperationException",
                )
            if self.headers.get("Content-Type") != CONTENT_TYPE:
                raise RequestError(f"Content-Type must be {CONTENT_TYPE}.")
            if not CREDENTIAL_SCOPE.search(self.headers.get("Authorization", "")):
                raise RequestError(
                    "The request is not signed with SigV4 for mturk-requester in us-east-1.",
                    kind="UnrecognizedClientException",
                )
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                raise RequestError("The body is not JSON.", kind="SerializationException") from None
            return target[len(TARGET_PREFIX) :], body

        def _external_submit(self, raw: bytes) -> None:
            fields = {key: values[-1] for key, values in parse_qs(raw.decode()).items()}
            try:
                server.external_submit(fields)
            except RequestError as error:
                page, status = f"<p>{error.message}</p>".encode(), 400
            else:
                page, status = b"<p>Thank you: your HIT was submitted.</p>", 200
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def _reply(self, status: int, payload: dict[str, Any], request_id: str) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-amzn-RequestId", request_id)
            self.end_headers()
            self.wfile.write(data)

    return Handler
