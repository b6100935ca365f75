"""What the CLI commands share: settings, an upgraded database, errors as messages."""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from crowd.exceptions import CrowdError
from crowd.settings import Settings
from crowd.storage import Database

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn our errors into a one-line message and exit status 1, with no traceback; and
    SIGTERM or SIGHUP into an exit that runs the command's clean-up (e.g. stopping the
    embedded Redis it started), as Ctrl-C does."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _exit_on_signals():
            try:
                return func(*args, **kwargs)
            except CrowdError as error:
                raise click.ClickException(str(error)) from None

    return wrapper  # type: ignore[return-value]


def _exit(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def _exit_on_signals() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread (e.g. CliRunner in a thread)
        return
    previous = {signum: signal.signal(signum, _exit) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def open_database(settings: Settings | None = None) -> tuple[Settings, Database]:
    from tasks import load_builtin

    settings = settings or Settings.from_env()
    load_builtin()
    db = Database(settings.database_url)
    db.upgrade()
    return settings, db
