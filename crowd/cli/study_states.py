"""crowd study pause | resume | close | archive | unarchive: a study's state, as
POST /api/studies/{id}/status changes it (crowd.studies.lifecycle.change_status, archive)."""

from __future__ import annotations

import click

from crowd.cli.common import handle_errors, open_database, study_of_cli

# (command, what it does), in the order a study goes through them.
CHANGES = (
    ("pause", "Pause a published study.\n\nNo new assignments; work already handed out "
              "can still be finished, and platform syncs go on."),
    ("resume", "Resume a paused study.\n\nIt hands out work again."),
    ("close", "Close a study for good.\n\nNo new work and no new items: it cannot be "
              "published again (create a new study for more)."),
    ("archive", "Close a study and hide it from the list.\n\nIt leaves `crowd study list` "
                "(see `crowd study list --archived`); its data stays."),
    ("unarchive", "Bring an archived study back to the list.\n\nIt stays closed."),
)  # fmt: skip


def _state_command(change: str, help_text: str) -> click.Command:
    @click.command(change, help=f"{help_text}\n\nPrints the study's state afterwards.")
    @click.argument("study_id", type=int)
    @handle_errors
    def command(study_id: int) -> None:
        from crowd.studies.lifecycle import archive, change_status

        settings, db = open_database(hit_types=False)
        with db.session() as session:
            found = study_of_cli(session, settings, study_id)
            if change in ("archive", "unarchive"):
                archive(session, found, archived=change == "archive")
            else:
                change_status(session, found, change)
            state = f"{found.status}{', archived' if found.archived_at else ''}"
        click.echo(f"study {study_id} {found.name!r}: {state}")

    return command


# Added to `crowd study` by crowd.cli.
STATE_COMMANDS = [_state_command(change, help_text) for change, help_text in CHANGES]
