"""What the CLI commands share: settings, an upgraded database, errors as messages."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from crowd.exceptions import CrowdError
from crowd.settings import Settings
from crowd.storage import Database

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn our errors into a one-line message and exit status 1, with no traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except CrowdError as error:
            raise click.ClickException(str(error)) from None

    return wrapper  # type: ignore[return-value]


def open_database(settings: Settings | None = None) -> tuple[Settings, Database]:
    from tasks import load_builtin

    settings = settings or Settings.from_env()
    load_builtin()
    db = Database(settings.database_url)
    db.upgrade()
    return settings, db
