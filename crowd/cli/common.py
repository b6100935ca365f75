"""What the CLI commands share: settings, an upgraded database, the experimenter the CLI acts
as, their studies, errors as messages, progress on stderr.

Nothing here imports SQLAlchemy, the models or the HIT types at import time: `crowd --help`
imports every command module, and must stay well under a second (see
benchmarks/cli_startup.py).
"""

from __future__ import annotations

import functools
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from crowd.exceptions import CrowdError, NotFound
from crowd.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from crowd.storage import Database, Experimenter, Study

F = TypeVar("F", bound=Callable[..., Any])

# Where `crowd --as NAME` leaves the name for the commands below it (click's Context.meta
# is shared by a command and its parents).
ACTING = "crowd.acting_as"


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


# How long after a stop signal the command is asked again while it still runs.
SIGNAL_AGAIN_SECONDS = 5.0


def _exit(signum: int, _frame: Any) -> None:
    # An exception a signal handler raises is lost when the signal lands while Python runs a
    # weakref callback or a __del__ (it prints "Exception ignored in ..." and goes on): e.g.
    # SQLAlchemy's registry callbacks during `crowd worker`'s start, which then worked on,
    # deaf to that SIGTERM. So the signal is delivered again a little later, unless the
    # command has ended (its handler is then Python's default again); a command that has by
    # then started RQ's worker gets it as RQ's own stop request.
    main = threading.main_thread().ident
    threading.Thread(target=_again, args=(signum, main), name="signal-again", daemon=True).start()
    raise SystemExit(128 + signum)


def _again(signum: int, main: int | None) -> None:
    time.sleep(SIGNAL_AGAIN_SECONDS)
    # A real signal to the main thread, which also wakes it from a blocking read (RQ's BLPOP).
    if main is not None and callable(signal.getsignal(signum)):  # ours, or RQ's by then
        signal.pthread_kill(main, signum)


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


def open_database(
    settings: Settings | None = None, hit_types: bool = True
) -> tuple[Settings, Database]:
    """The settings and the database, its schema brought up to date. `hit_types=False` for
    commands that never touch a study's type (keys, lists): loading the built-in types
    imports their analyses (pandas, scipy), a second of CPU."""
    from crowd.storage import Database

    settings = settings or Settings.from_env()
    if hit_types:
        from tasks import load_builtin

        load_builtin()
    db = Database(settings.database_url)
    if not schema_is_current(db):
        db.upgrade()
    return settings, db


_REVISION = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*(None|'[^']*'|\"[^\"]*\")\s*$")


def _head_revision() -> str | None:
    """The one head of our migrations, read from their files without importing them (what
    Alembic would import them for); None where they are not a plain chain (a merge)."""
    from crowd.storage.db import MIGRATIONS

    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found: dict[str, str | None] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            match = _REVISION.match(line)
            if match:
                found[match.group(1)] = None if match.group(2) == "None" else match.group(2)[1:-1]
        if "revision" not in found:
            continue  # __init__.py
        revisions.add(str(found["revision"]))
        if "down_revision" not in found:
            return None  # a tuple of parents, or something else Alembic reads and we do not
        if found["down_revision"] is not None:
            parents.add(str(found["down_revision"]))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def schema_is_current(db: Database) -> bool:
    """Whether the database is at our migrations' head, asked with one query instead of
    Alembic's upgrade (which imports every migration: a quarter of a light command's time).
    Anything unexpected answers False, and the upgrade runs."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    head = _head_revision()
    if head is None:
        return False
    try:
        with db.engine.connect() as connection:
            current = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    except SQLAlchemyError:
        return False  # a new database: no table yet
    return [tuple(row) for row in current] == [(head,)]


def acting_name() -> str | None:
    """The name given with `crowd --as NAME`, if any."""
    ctx = click.get_current_context(silent=True)
    name = ctx.meta.get(ACTING) if ctx is not None else None
    return name or None


def acting_experimenter(session: Session, settings: Settings) -> Experimenter:
    """The experimenter the CLI acts as: `crowd --as NAME`, else CROWD_EXPERIMENTER, else
    the only experimenter in the database. Never one made up: an unknown name, no
    experimenter or several without a name are errors that say what to run."""
    from crowd.accounts import acting_experimenter as find

    return find(session, acting_name() or settings.experimenter)


def owned_study(session: Session, experimenter: Experimenter, study_id: int) -> Study:
    """One of the experimenter's studies, or NotFound naming the command that lists them
    (and, for another experimenter's study, how to act as them)."""
    from crowd.storage import Experimenter as ExperimenterRow
    from crowd.storage import Study as StudyRow

    found = session.get(StudyRow, study_id)
    if found is None:
        raise NotFound(
            f"no study {study_id}: list {experimenter.name}'s with `crowd study list` "
            "(everyone's: `crowd study list --all`)"
        )
    if found.experimenter_id != experimenter.id:
        owner = session.get(ExperimenterRow, found.experimenter_id)
        name = owner.name if owner is not None else "another experimenter"
        raise NotFound(
            f"study {study_id} is {name}'s, not {experimenter.name}'s: act as them with "
            f"`crowd --as {name} ...` (yours: `crowd study list`)"
        )
    return found


def study_of_cli(session: Session, settings: Settings, study_id: int) -> Study:
    """Study `study_id` of the experimenter the CLI acts as (see owned_study)."""
    return owned_study(session, acting_experimenter(session, settings), study_id)


def progress(message: str) -> None:
    """A line for the person waiting on stderr, so stdout stays what scripts read."""
    click.echo(message, err=True)
