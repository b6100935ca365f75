"""PostgreSQL going away under load, through a proxy the test owns: every request is
answered (a 503 with Retry-After while it is away, never a 500) and the app recovers by
itself when it is back."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from crowd.demo import BackgroundServer
from crowd.settings import Settings
from crowd.storage import Database
from tests.conftest import free_port

pytestmark = pytest.mark.skipif(
    "postgresql" not in (__import__("os").environ.get("CROWD_TEST_DATABASE_URL") or ""),
    reason="needs PostgreSQL (CROWD_TEST_DATABASE_URL): the suite's second run in CI",
)


class Proxy:
    """A TCP relay to the database that can go down (listener closed, every connection
    cut, as a restarting server does) and come back on the same port."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = free_port()
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listener: socket.socket | None = None
        self.up()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        with self.lock:
            doomed, self.sockets = self.sockets, []
            listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self.lock:
                self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxy(settings: Settings) -> Iterator[Proxy]:
    url = make_url(settings.database_url)
    relay = Proxy(url.host or "127.0.0.1", url.port or 5432)
    yield relay
    relay.down()


def _call(base: str, path: str, auth: dict[str, str], body: dict[str, Any] | None) -> tuple:
    data = None if body is None else json.dumps(body).encode()
    headers = {**auth, **({"Content-Type": "application/json"} if body is not None else {})}
    request = urllib.request.Request(base + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, None, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Retry-After"), error.read().decode()


def test_a_database_restart_under_load_is_503s_then_recovery(
    settings: Settings, db: Database, api_key: str, proxy: Proxy
) -> None:
    via_proxy = make_url(settings.database_url).set(port=proxy.port)
    app_settings = replace(settings, database_url=via_proxy.render_as_string(hide_password=False))
    auth = {"Authorization": f"Bearer {api_key}"}
    results: list[tuple[float, int, str | None, str]] = []
    stop = threading.Event()

    with BackgroundServer(app_settings) as server:

        def client(number: int) -> None:
            calls = 0
            while not stop.is_set():
                calls += 1
                if calls % 2:
                    outcome = _call(server.url, "/api/studies", auth, None)
                else:
                    body = {"provider": "sim", "external_id": f"w{number}-{calls}"}
                    outcome = _call(server.url, "/api/work/join", auth, body)
                results.append((time.monotonic(), *outcome))
                time.sleep(0.02)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(2)
        went_down = time.monotonic()
        proxy.down()
        time.sleep(3)
        proxy.up()
        came_back = time.monotonic()
        time.sleep(6)
        stop.set()
        for thread in threads:
            thread.join()

    statuses = {status for _, status, _, _ in results}
    assert statuses <= {200, 201, 503}, [r for r in results if r[1] not in (200, 201, 503)][:3]
    during = [r for r in results if went_down < r[0] < came_back]
    assert any(status == 503 for _, status, _, _ in during)
    for _, status, retry_after, text in results:
        if status == 503:
            assert retry_after is not None and int(retry_after) > 0
            assert "database is unavailable" in json.loads(text)["error"]
    # Healed by itself: everything in the last seconds succeeded.
    tail = [status for at, status, _, _ in results if at > came_back + 3]
    assert tail and set(tail) <= {200, 201}, tail
