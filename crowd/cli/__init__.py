"""The `crowd` command line."""

from __future__ import annotations

import logging

import click

from crowd.cli.llm_eval import llm_eval
from crowd.cli.platforms import mturk, prolific
from crowd.cli.qc import qc
from crowd.cli.review import review, users
from crowd.cli.study import study
from crowd.cli.system import demo, init, keys, serve, worker
from crowd.cli.train import train
from crowd.cli.webhooks import webhooks
from crowd.plugins import live_modules


class CrowdGroup(click.Group):
    """The crowd commands, and the command of each HIT type's live package (its `command`,
    e.g. `crowd taboo`), loaded when the command line asks for them, not on import."""

    def _live_commands(self) -> dict[str, click.Command]:
        found: dict[str, click.Command] = {}
        for _hit_type, live in live_modules():
            command = getattr(live, "command", None)
            if isinstance(command, click.Command) and command.name:
                found[command.name] = command
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._live_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or self._live_commands().get(cmd_name)


@click.group(cls=CrowdGroup)
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
def main(verbose: bool) -> None:
    """crowd: crowdsourcing for NLP evaluation and human-feedback data.

    Settings come from CROWD_DATABASE_URL, CROWD_REDIS_URL, CROWD_DATA_DIR and
    CROWD_SECRET_KEY; without them crowd uses SQLite and an embedded Redis in ./.crowd.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


for command in (init, serve, worker, keys, demo, study, review, users, qc):
    main.add_command(command)
main.add_command(webhooks)
main.add_command(mturk)
main.add_command(prolific)
main.add_command(train)
main.add_command(llm_eval)
