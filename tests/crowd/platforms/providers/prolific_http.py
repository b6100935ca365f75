"""The Prolific stand-in's HTTP side: JSON requests in, Prolific's answers and errors out."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.crowd.platforms.providers.prolific_state import ApiError

if TYPE_CHECKING:
    from tests.crowd.platforms.providers.prolific_server import ProlificServer


def _handler(server: ProlificServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as requests' connection pool expects.
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle each answer would wait ~40 ms.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test output is no place for an access log

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def _serve(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            parts = urlsplit(self.path)
            try:
                body = None
                if raw:
                    if "application/json" not in self.headers.get("Content-Type", ""):
                        raise ApiError(415, "Unsupported media type: send application/json.")
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        raise ApiError(400, "JSON parse error.") from None
                operation, status, result, lost = server.handle(
                    method,
                    parts.path,
                    parse_qs(parts.query),
                    body,
                    self.headers.get("Authorization", ""),
                )
            except ApiError as error:
                envelope = {
                    "status": error.status,
                    "error_code": error.status * 1000,
                    "title": error.title,
                    "detail": error.detail,
                }
                self._reply(error.status, json.dumps({"error": envelope}), "application/json")
                return
            if lost is True:
                self.close_connection = True  # no answer at all: the client sees a reset
                return
            if lost is False:
                self._reply(502, "<html><body>502 Bad Gateway</body></html>", "text/html")
                return
            self._reply(status, json.dumps(result), "application/json")

        def _reply(self, status: int, text: str, content_type: str) -> None:
            self.send_response(status)
            if status == 204:  # No Content: no body, and no Content-Length (RFC 9110)
                self.end_headers()
                return
            data = text.encode()
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
