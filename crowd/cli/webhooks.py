"""crowd webhooks add | list | remove | deliveries: experimenters' webhooks per study."""

from __future__ import annotations

import json

import click

from crowd.cli.common import handle_errors, open_database, study_of_cli


@click.group()
def webhooks() -> None:
    """Webhooks: signed POSTs to your URL when answers, items, studies or blocks happen."""


@webhooks.command("add")
@click.argument("study_id", type=int)
@click.argument("url")
@click.option("--event", "events", multiple=True, required=True,
              help="Event to send (repeatable): response.stored, item.complete, "
              "study.complete, worker.blocked.")  # fmt: skip
@handle_errors
def add(study_id: int, url: str, events: tuple[str, ...]) -> None:
    """Subscribe URL to the study's events; prints the signing secret (shown only once)."""
    from crowd.delivery import webhooks as hooks

    settings, db = open_database()
    with db.session() as session:
        subscription = hooks.create_subscription(
            session, study_of_cli(session, settings, study_id), url, list(events)
        )
        shown = hooks.subscription_json(subscription, with_secret=True)
    click.echo(f"webhook {shown['id']}: {shown['url']} gets {', '.join(shown['events'])}")
    click.echo(f"signing secret (shown only now, keep it): {shown['secret']}")


@webhooks.command("list")
@click.argument("study_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@handle_errors
def list_(study_id: int, as_json: bool) -> None:
    """The study's active webhooks."""
    from crowd.delivery import webhooks as hooks

    settings, db = open_database()
    with db.session() as session:
        study = study_of_cli(session, settings, study_id)
        rows = [
            hooks.subscription_json(row) for row in hooks.active_subscriptions(session, study.id)
        ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"study {study_id} has no webhooks: add one with `crowd webhooks add`")
    for row in rows:
        click.echo(f"{row['id']:>5}  {row['created_at'][:19]}  {row['url']}  "
                   f"[{', '.join(row['events'])}]")  # fmt: skip


@webhooks.command("remove")
@click.argument("study_id", type=int)
@click.argument("webhook_id", type=int)
@handle_errors
def remove(study_id: int, webhook_id: int) -> None:
    """Stop sending to a webhook; its deliveries waiting for a retry are dropped."""
    from crowd.delivery import webhooks as hooks

    settings, db = open_database()
    with db.session() as session:
        hooks.remove_subscription(session, study_of_cli(session, settings, study_id), webhook_id)
    click.echo(f"webhook {webhook_id} removed")


@webhooks.command("deliveries")
@click.argument("study_id", type=int)
@click.argument("webhook_id", type=int)
@click.option("--limit", default=50, show_default=True, help="Most recent deliveries to show.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@handle_errors
def deliveries(study_id: int, webhook_id: int, limit: int, as_json: bool) -> None:
    """A webhook's recent deliveries: status, attempts, last answer or error."""
    from crowd.delivery import webhooks as hooks
    from crowd.delivery.signed import delivery_json

    settings, db = open_database()
    with db.session() as session:
        subscription = hooks.get_subscription(
            session, study_of_cli(session, settings, study_id), webhook_id
        )
        rows = [delivery_json(row) for row in hooks.recent_deliveries(session, subscription, limit)]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        outcome = row["last_error"] or (
            f"HTTP {row['last_status_code']}" if row["last_status_code"] else ""
        )
        click.echo(f"{row['id']:>6}  {row['created_at'][:19]}  {row['event']:16} "
                   f"{row['status']:9} {row['attempts']:>2}x  {outcome[:80]}")  # fmt: skip
