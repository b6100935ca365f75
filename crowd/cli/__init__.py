"""The `crowd` command line.

Starting it stays light (`crowd --help` in well under a second of CPU): a command's module is
imported when the command line names it (or `crowd --help` lists it), and imports click and
little else at the top; what a command needs (the database, the HIT types, torch) it
imports inside. tests/crowd/test_cli_startup.py checks it, benchmarks/cli_startup.py times
it.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from pathlib import Path

import click

from crowd.cli.common import ACTING

# Each command: "module:attribute", imported when used.
COMMANDS = {
    "init": "crowd.cli.system:init",
    "serve": "crowd.cli.system:serve",
    "worker": "crowd.cli.system:worker",
    "keys": "crowd.cli.system:keys",
    "demo": "crowd.cli.system:demo",
    "study": "crowd.cli.study:study",
    "review": "crowd.cli.review:review",
    "users": "crowd.cli.review:users",
    "qc": "crowd.cli.qc:qc",
    "webhooks": "crowd.cli.webhooks:webhooks",
    "mturk": "crowd.cli.platforms:mturk",
    "prolific": "crowd.cli.platforms:prolific",
    "train": "crowd.cli.train:train",
    "llm-eval": "crowd.cli.llm_eval:llm_eval",
}


def live_package_names() -> list[str]:
    """The HIT types with a live package (tasks/<type>/live/, the layout pyproject's import
    contracts name), found without importing them: importing a type loads its analyses."""
    spec = importlib.util.find_spec("tasks")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations)))
    return sorted(path.parent.parent.name for path in root.glob("*/live/__init__.py"))


class CrowdGroup(click.Group):
    """The crowd commands, each imported when named, and the command of each HIT type's live
    package (its `command`, e.g. `crowd taboo`), loaded when the command line names it."""

    def _live_commands(self) -> dict[str, click.Command]:
        from crowd.plugins import live_modules

        found: dict[str, click.Command] = {}
        for _hit_type, live in live_modules():
            command = getattr(live, "command", None)
            if isinstance(command, click.Command) and command.name:
                found[command.name] = command
        return found

    def _builtin(self, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, _, attribute = COMMANDS[name].partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{COMMANDS[name]} is not a click command")
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *live_package_names()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._builtin(cmd_name) or self._live_commands().get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # As click's, over the built-in commands only: the live ones are listed by name.
        shown = [(name, self._builtin(name)) for name in sorted(COMMANDS)]
        rows = [(name, command) for name, command in shown if command and not command.hidden]
        live = [name for name in live_package_names() if name not in COMMANDS]
        limit = formatter.width - 6 - max(len(name) for name in [*COMMANDS, *live])
        with formatter.section("Commands"):
            formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])
        if live:
            with formatter.section("Commands of HIT types played live (loaded when named)"):
                formatter.write_dl([(name, f"see `crowd {name} --help`") for name in live])


@click.group(cls=CrowdGroup)
@click.option(
    "--as",
    "acting_as",
    metavar="NAME",
    default=None,
    help="Act as experimenter NAME (made with `crowd keys create NAME`); default: "
    "CROWD_EXPERIMENTER, else the only experimenter there is.",
)
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
@click.pass_context
def main(ctx: click.Context, acting_as: str | None, verbose: bool) -> None:
    """crowd: crowdsourcing for NLP evaluation and human-feedback data.

    Commands act as one experimenter and see only their studies: the one named with
    `crowd --as NAME` or CROWD_EXPERIMENTER, or the only one there is. Start with
    `crowd keys create NAME`.

    Settings come from CROWD_DATABASE_URL, CROWD_REDIS_URL, CROWD_DATA_DIR,
    CROWD_SECRET_KEY and CROWD_EXPERIMENTER; without them crowd uses SQLite and an embedded
    Redis in ./.crowd.
    """
    ctx.meta[ACTING] = acting_as.strip() if acting_as else None
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
