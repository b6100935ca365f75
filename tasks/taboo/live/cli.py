"""crowd taboo tournament | summary | export | agents: Adversarial Taboo studies."""

from __future__ import annotations

import json
import sys

import click

from crowd.cli.common import handle_errors, open_database


@click.group()
def taboo() -> None:
    """Adversarial Taboo: agent tournaments, outcome rates, leaderboards, transcripts."""


@taboo.command("agents")
def agents() -> None:
    """List the agent plugins, their roles and settings."""
    from tasks.taboo.agents import AGENTS

    for name, agent in AGENTS.items():
        settings = ", ".join(f"{key}: {text}" for key, text in agent.settings.items())
        click.echo(f"{name} ({agent.role}){' - ' + settings if settings else ''}")


@taboo.command("tournament")
@click.argument("study_id", metavar="STUDY", type=int)
@click.option("--name", required=True, help="Name the games are stored under (run once).")
@click.option("--attacker", "attackers", multiple=True, default=("retrieval",),
              show_default=True, help="Attacker agent (repeat for several).")  # fmt: skip
@click.option("--defender", "defenders", multiple=True, default=("threshold",),
              show_default=True, help="Defender agent (repeat for several).")  # fmt: skip
@click.option("--games", "games_per_pair", type=int, default=1, show_default=True,
              help="Games per word and pair of agents.")  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--no-judge", is_flag=True, help="Do not judge the tournament's utterances.")
@click.option("--detach", is_flag=True,
              help="Queue the job and exit; a crowd-models worker plays it.")  # fmt: skip
@handle_errors
def tournament(study_id: int, name: str, attackers: tuple[str, ...], defenders: tuple[str, ...],
               games_per_pair: int, seed: int, no_judge: bool, detach: bool) -> None:  # fmt: skip
    """Agents play every word of STUDY against each other, as a job on crowd-models.

    Games use the study's rules and agent settings and are judged in one batch by its
    judge. Without --detach the job runs here when no worker takes it.
    """
    from crowd.queue import MODELS, redis_connection
    from crowd.queue.runner import ensure_redis, see_through
    from tasks.taboo.live.jobs import enqueue_tournament

    settings, db = open_database()
    if detach and not settings.redis_url:
        raise click.ClickException("--detach needs a Redis that outlives this command: "
                                   "set CROWD_REDIS_URL")  # fmt: skip
    settings, embedded = ensure_redis(settings)
    try:
        connection = redis_connection(settings.redis_url or "")
        job = enqueue_tournament(
            connection, study_id=study_id, name=name, attackers=list(attackers),
            defenders=list(defenders), games_per_pair=games_per_pair, seed=seed,
            judge=not no_judge,
        )  # fmt: skip
        click.echo(f"tournament {name!r} queued (job {job.id})")
        if detach:
            return
        # A running `crowd worker` may take the job: then this waits for it.
        status = see_through(settings, job, MODELS)
        if status != "finished":
            raise click.ClickException(f"the tournament job {status}: "
                                       f"{(job.latest_result() or job).__dict__.get('exc_string')}")
        click.echo(json.dumps(job.return_value()))
    finally:
        if embedded is not None:
            embedded.stop()
    _summary(db, study_id, as_json=False, tournament=name)


@taboo.command("summary")
@click.argument("study_id", metavar="STUDY", type=int)
@click.option("--tournament", help="Only this tournament's games.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole analysis as JSON.")
@handle_errors
def summary(study_id: int, tournament: str | None, as_json: bool) -> None:
    """Attacker / defender / tie rates and mean turns, by pairing and word, and the
    leaderboard of players (filtered set: QC-excluded workers' games left out)."""
    _, db = open_database()
    _summary(db, study_id, as_json, tournament)


def _summary(db: object, study_id: int, as_json: bool, tournament: str | None) -> None:
    from crowd.studies.lifecycle import get_study
    from crowd.studies.reports import excluded_workers
    from tasks import get_hit_type
    from tasks.taboo.live import records as taboo_records

    with db.session() as session:  # type: ignore[attr-defined]
        study = get_study(session, study_id)
        excluded = set().union(*excluded_workers(session, study, refresh=False).values())
        games = taboo_records.records(session, study, tournament)
        data = get_hit_type("taboo").analyze(games, excluded, study.config)
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    filtered = data["filtered"]
    for pairing, numbers in filtered["by_pairing"].items():
        if numbers["n_games"]:
            rates = numbers["rates"]
            click.echo(
                f"{pairing}: {numbers['n_games']} games ({numbers['n_abandoned']} abandoned), "
                f"attacker {_pct(rates['attacker'])} / defender {_pct(rates['defender'])} / "
                f"tie {_pct(rates['tie'])}, mean turns {numbers['turns']['mean']}"
            )
    click.echo("leaderboard:")
    for row in data["leaderboard"][:10]:
        click.echo(f"  {row['rank']:>2}. {row['name']} ({row['kind']}): {row['points']} points "
                   f"in {row['games']} games")  # fmt: skip


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


@taboo.command("export")
@click.argument("study_id", metavar="STUDY", type=int)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl",
              show_default=True)  # fmt: skip
@click.option("--tournament", help="Only this tournament's games.")
@handle_errors
def export(study_id: int, fmt: str, tournament: str | None) -> None:
    """Write full transcripts with judge scores to stdout (JSONL: one game a line; CSV:
    one utterance a row)."""
    from crowd.studies.lifecycle import get_study
    from tasks.taboo import export as taboo_export
    from tasks.taboo.live import records as taboo_records

    _, db = open_database()
    with db.session() as session:
        records = taboo_records.records(session, get_study(session, study_id), tournament)
    taboo_export.write(records, fmt, sys.stdout)
