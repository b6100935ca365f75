"""crowd qc ...: refresh QC standing, aggregate labels, promote gold."""

from __future__ import annotations

import json

import click

from crowd.cli.common import handle_errors, open_database, study_of_cli

METHODS = ("majority_vote", "dawid_skene", "mace", "ordinal_mean", "first_change", "bradley_terry")


@click.group()
def qc() -> None:
    """Quality control: worker standing, aggregated labels, gold promotion."""


@qc.command("refresh")
@click.argument("study_id", type=int)
@handle_errors
def refresh(study_id: int) -> None:
    """Recompute every worker's evidence and let the study's rules act (audited)."""
    from crowd.quality import standing as quality

    settings, db = open_database()
    with db.session() as session:
        n = quality.refresh_study(session, study_of_cli(session, settings, study_id))
    click.echo(f"refreshed the QC standing of {n} worker(s)")


@qc.command("aggregate")
@click.argument("study_id", type=int)
@click.option(
    "--method",
    "methods",
    multiple=True,
    type=click.Choice(METHODS),
    help="Aggregation method (repeatable; default: all that fit the HIT type).",
)
@click.option("--full", is_flag=True, help="Use every worker, not the filtered set.")
@handle_errors
def aggregate(study_id: int, methods: tuple[str, ...], full: bool) -> None:
    """Aggregate repeated labels and store labels and worker skills per method."""
    from crowd.quality import labels
    from crowd.quality import standing as quality

    settings, db = open_database()
    with db.session() as session:
        study = study_of_cli(session, settings, study_id)
        quality.refresh_study(session, study)
        summary = labels.aggregate_study(
            session, study, filtered=not full, methods=methods or METHODS
        )
    click.echo(json.dumps(summary, indent=2))


@qc.command("promote-gold")
@click.argument("study_id", type=int)
@click.option("--min-agreeing", default=3, show_default=True,
              help="Trusted workers who must give the same answer.")  # fmt: skip
@click.option("--min-share", default=1.0, show_default=True,
              help="Share of the trusted workers on the item who must agree.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Show what would be promoted, change nothing.")
@handle_errors
def promote_gold(study_id: int, min_agreeing: int, min_share: float, dry_run: bool) -> None:
    """Turn real items into gold where trusted workers agree (their answer becomes gold)."""
    from crowd.quality import labels

    settings, db = open_database()
    with db.session() as session:
        study = study_of_cli(session, settings, study_id)
        try:
            promoted = labels.promote(
                session, study, "cli", min_agreeing, min_share, dry_run=dry_run
            )
        except ValueError as error:
            raise click.BadParameter(str(error)) from None
    verb = "would promote" if dry_run else "promoted"
    click.echo(f"{verb} {len(promoted)} item(s) to gold")
    for item, expected in promoted.items():
        click.echo(f"  {item}: {json.dumps(expected)}")
