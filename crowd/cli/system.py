"""crowd init | serve | worker | keys create | list | revoke | demo."""

from __future__ import annotations

from typing import Any

import click

from crowd.cli.common import handle_errors, open_database, progress


class QueueName(click.ParamType):
    """One of crowd.queue.ALL_QUEUES, read when the option is used or shown: importing
    crowd.queue loads redis and rq, which `crowd --help` does without."""

    name = "queue"

    @staticmethod
    def names() -> tuple[str, ...]:
        from crowd.queue import ALL_QUEUES

        return ALL_QUEUES

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "[" + "|".join(self.names()) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if value not in self.names():
            self.fail(f"{value!r} is not one of {', '.join(self.names())}", param, ctx)
        return str(value)


@click.command()
@handle_errors
def init() -> None:
    """Create the data dir and bring the database schema up to date."""
    settings, db = open_database(hit_types=False)
    click.echo(f"data dir: {settings.data_dir}")
    click.echo(f"database: {db.engine.url.render_as_string(hide_password=True)} (up to date)")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=5000, show_default=True, help="Port to listen on.")
@handle_errors
def serve(host: str, port: int) -> None:
    """Run the web server for development (use gunicorn in production: see README)."""
    from crowd.app import create_app
    from crowd.queue.runner import ensure_redis

    settings, db = open_database()
    db.dispose()
    settings, embedded = ensure_redis(settings)
    try:
        app = create_app(settings)
        click.echo(f"game: http://{host}:{port}/play   dashboard: http://{host}:{port}/dashboard")
        app.run(host=host, port=port, threaded=True)
    finally:
        if embedded is not None:
            embedded.stop()


@click.command()
@click.option("--burst", is_flag=True, help="Run the queued jobs, then exit.")
@click.option("--queue", "queues", multiple=True, type=QueueName(),
              help="Listen on this queue only (repeatable); default: all of them. Give "
              "reward-model training and LLM evaluation (crowd-models) workers of their own "
              "so long jobs never hold up answers' events.")  # fmt: skip
@handle_errors
def worker(burst: bool, queues: tuple[str, ...]) -> None:
    """Run an RQ worker on the crowd queues, with the sweeps (outbox, orphaned jobs, due
    deliveries, platform syncs, stale assignments).

    It survives Redis going away (it waits and starts again) and stops on Ctrl-C or SIGTERM
    after its current job.
    """
    from crowd.queue.runner import ensure_redis, run_worker

    settings, db = open_database()
    db.dispose()
    settings, embedded = ensure_redis(settings)
    try:
        ran = run_worker(settings, burst=burst, queues=queues or None)
        if burst:
            click.echo(f"ran {ran} jobs")
    finally:
        if embedded is not None:
            embedded.stop()


@click.group()
def keys() -> None:
    """Experimenters and their API keys.

    `crowd keys create NAME` makes experimenter NAME (the only way one is made); the CLI
    acts as them (`crowd --as NAME`, or alone)."""


@keys.command("create")
@click.argument("name")
@handle_errors
def create_key(name: str) -> None:
    """Create an API key for NAME, a new experimenter if new.

    The key is printed (stdout) and shown only this once. The CLI acts as NAME when NAME is
    the only experimenter, or with `crowd --as NAME`."""
    from sqlalchemy import func, select

    from crowd.accounts import create_api_key
    from crowd.storage import Experimenter

    who = name.strip()
    _settings, db = open_database(hit_types=False)
    with db.session() as session:
        known = session.scalar(select(Experimenter.id).where(Experimenter.name == who))
        token = create_api_key(session, who)
        experimenters = session.scalar(select(func.count(Experimenter.id)))
    click.echo(token)
    made = f"new API key for {who}" if known else f"experimenter {who} created, with an API key"
    if experimenters == 1:
        acting = f"the CLI acts as {who} (the only experimenter)"
    else:
        acting = f"act as {who} with `crowd --as {who} ...` or CROWD_EXPERIMENTER={who}"
    progress(f"{made}, shown only now: keep it; {acting}")


@keys.command("list")
@click.option("--experimenter", help="Only this experimenter's keys.")
@handle_errors
def list_keys(experimenter: str | None) -> None:
    """List API keys: prefix, experimenter, created, revoked (the secrets are never kept)."""
    from crowd.accounts import api_keys

    _settings, db = open_database(hit_types=False)
    with db.read_session() as session:
        found = api_keys(session, experimenter)
        for key in found:
            revoked = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
            click.echo(f"{key.prefix}  {key.experimenter.name}  "
                       f"created {key.created_at:%Y-%m-%d %H:%M}  {revoked}")  # fmt: skip
    if not found:
        click.echo("no API keys: create one with `crowd keys create NAME`")


@keys.command("revoke")
@click.argument("key")
@handle_errors
def revoke_key(key: str) -> None:
    """Revoke API key KEY (its prefix from `crowd keys list`, or the whole key): requests
    with it are refused from now on."""
    from crowd.accounts import revoke_api_key

    _settings, db = open_database(hit_types=False)
    with db.session() as session:
        revoked = revoke_api_key(session, key)
        click.echo(f"revoked {revoked.prefix} ({revoked.experimenter.name})")


@click.command()
@click.option("--workers", default=40, show_default=True,
              help="Simulated workers of the boundary study.")  # fmt: skip
@click.option("--seed", default=7, show_default=True, help="Random seed of the simulation.")
@handle_errors
def demo(workers: int, seed: int) -> None:
    """Run boundary, Likert and comparison studies end to end on simulated crowds.

    Data goes to CROWD_DATA_DIR/demo (wiped first); prints each report's main numbers.
    """
    from crowd.demo import run_demo

    run_demo(workers=workers, seed=seed, echo=click.echo)
