"""`crowd mturk ...` and `crowd prolific ...`: balance, sync, expire, extend, calls made."""

from __future__ import annotations

import json
from typing import Any

import click

from crowd.cli.common import handle_errors, open_database, study_of_cli
from crowd.exceptions import PaymentUnknown


def platform_group(name: str, label: str, task_word: str, note: str = "") -> click.Group:
    """The same commands for every crowd platform: one group per provider; `note` is what
    the group's help adds about the platform."""

    plural = f"{task_word[:-1]}ies" if task_word.endswith("y") else f"{task_word}s"

    @click.group(
        name=name, help=f"{label}: balance, sync, expire or extend {plural}.\n\n{note}".strip()
    )
    def group() -> None:
        pass

    @group.command("options")
    def options() -> None:
        """List the publish options (`crowd study publish --option KEY=VALUE`)."""
        from crowd.platforms.providers import PROVIDERS

        provider = PROVIDERS.get(name)
        described = __import__(type(provider).__module__, fromlist=["x"]).OPTION_HELP
        for key, text in described.items():
            click.echo(f"{key:24} {text}")

    @group.command("balance")
    @click.option("--sandbox/--production", default=True, show_default=True,
                  help="Which account (MTurk: the sandbox or the real marketplace).")  # fmt: skip
    @handle_errors
    def balance(sandbox: bool) -> None:
        """Print the account's available balance."""
        from crowd.platforms.providers import PROVIDERS

        settings, _db = open_database()
        click.echo(json.dumps(PROVIDERS.get(name).balance(settings, {"sandbox": sandbox})))

    @group.command("sync")
    @click.argument("study_id", type=int)
    @handle_errors
    def sync(study_id: int) -> None:
        """Sync the study's sessions with the platform now (crowd worker does it every few
        minutes): submitted, returned and abandoned work, answers to recover."""
        from crowd.platforms.sync import sync_study
        from crowd.security import WorkerSigner

        settings, db = open_database()
        with db.read_session() as session:
            study_of_cli(session, settings, study_id)
        report = sync_study(db, settings, WorkerSigner(settings.secret_key), study_id)
        click.echo(json.dumps(report.to_json(), indent=2))

    @group.command("expire")
    @click.argument("study_id", type=int)
    @click.option("--task", "task_id", default=None, help=f"Only this {task_word} id.")
    @handle_errors
    def expire(study_id: int, task_id: str | None) -> None:
        """Close the study's tasks to new workers (work in progress goes on)."""
        from crowd.platforms import publishing

        settings, db = open_database()
        with db.session() as session:
            done = publishing.expire(
                session, settings, study_of_cli(session, settings, study_id), name, task_id
            )
        click.echo(f"expired {done} {task_word}(s)")

    @group.command("extend")
    @click.argument("study_id", type=int)
    @click.option("--hours", type=float, default=0, help="Keep them open this much longer.")
    @click.option("--places", type=int, default=0, help="Add this many places to each.")
    @click.option("--task", "task_id", default=None, help=f"Only this {task_word} id.")
    @handle_errors
    def extend(study_id: int, hours: float, places: int, task_id: str | None) -> None:
        """Keep the study's tasks open longer and/or add places."""
        from crowd.platforms import publishing

        settings, db = open_database()
        with db.session() as session:
            study = study_of_cli(session, settings, study_id)
            done = publishing.extend(
                session, settings, study, name, task_id, int(hours * 3600), places
            )
        click.echo(f"extended {done} {task_word}(s)")

    @group.command("actions")
    @click.argument("study_id", type=int)
    @click.option("--retry", is_flag=True, help="Queue the failed calls once more first.")
    @handle_errors
    def actions(study_id: int, retry: bool) -> None:
        """The platform calls made or pending for the study (approve, bonus, block, ...):
        queued (not made yet), retrying (failed, tried again), done (a bonus: paid), failed
        (not made), or unknown (a payment whose call failed, and the platform's records
        could not say whether it went through: check them before paying by hand; crowd
        worker keeps asking them, and pays only if they show it unpaid)."""
        from sqlalchemy import select

        from crowd.platforms.actions import retry_failed
        from crowd.platforms.overview import actions as platform_actions
        from crowd.storage import PlatformAction

        settings, db = open_database()
        with db.session() as session:
            study = study_of_cli(session, settings, study_id)
            if retry:
                click.echo(f"queued {retry_failed(session, study)} failed call(s) again")
            rows = [row for row in platform_actions(session, study) if row["provider"] == name]
            amounts = {
                action.id: str(action.params.get("amount", ""))
                for action in session.scalars(
                    select(PlatformAction).where(
                        PlatformAction.id.in_([row["id"] for row in rows]),
                        PlatformAction.action == "bonus",
                    )
                )
            }
        for row in rows:
            what = " ".join((row["action"], amounts.get(row["id"], ""))).strip()
            state, said = _state(row), row["last_error"] or ""
            if state == "unknown":
                said = f"payment unknown: check {'MTurk' if name == 'mturk' else label} ({said})"
            click.echo(
                f"{row['id']:>5} {what:20} worker {row['worker_id']} {state:8} "
                f"attempts {row['attempts']} {said}".rstrip()
            )

    return group


def _state(row: dict[str, Any]) -> str:
    """A platform call's state in words that say whether it happened: a pending call was
    not made yet (queued) or failed and waits for another try (retrying); a bonus done is
    paid (the platform answered, or its own records show the payment); a payment whose
    call failed and whose platform records could not be read is unknown, never failed."""
    if row["status"] == "pending":
        if str(row["last_error"] or "").startswith(f"{PaymentUnknown.__name__}:"):
            return "unknown"
        return "retrying" if row["attempts"] else "queued"
    if row["status"] == "done" and row["action"] == "bonus":
        return "paid"
    return str(row["status"])


mturk = platform_group("mturk", "Amazon Mechanical Turk", "HIT")
prolific = platform_group(
    "prolific",
    "Prolific",
    "study",
    "A block (crowd review block) puts the participant in your group of blocked participants "
    "of each Prolific workspace you publish in, which every study published there since the "
    "group was made excludes. Studies published before it existed (before your first study "
    "in that workspace with this version) do not exclude it, and cannot be made to: Prolific "
    "lets a published study change only its internal name, places and submissions config.",
)
