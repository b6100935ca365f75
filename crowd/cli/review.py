"""crowd review ... (workers, evidence, actions, audit) and crowd users create."""

from __future__ import annotations

import getpass
import json
from typing import Any

import click

from crowd.cli.common import acting_experimenter, handle_errors, open_database, study_of_cli


def _reviewer(name: str | None) -> Any:
    from crowd.review import Reviewer
    from crowd.storage import Role

    # Whoever runs the CLI can reach the database, so acts as the experimenter.
    return Reviewer(name or f"cli-{getpass.getuser()}", Role.EXPERIMENTER)


# --as is the older spelling (`crowd --as NAME` picks the experimenter the CLI acts as).
as_option = click.option(
    "--actor", "--as", "actor", default=None, metavar="NAME",
    help="Name recorded in the audit log (default: cli-$USER).",
)  # fmt: skip


@click.group()
def review() -> None:
    """Review workers: QC evidence, approve / reject / soft-reject / block / bonus, audit."""


@review.command("workers")
@click.argument("study_id", type=int)
@click.option(
    "--sort", default="worker", show_default=True,
    help="Column to sort by (prefix '-' for descending): worker, responses, gold_accuracy, "
    "gold_mean, agreement (accuracy against the crowd), attention_failed, too_fast_share, "
    "constant_share, longest_run, flags, status.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows instead of a table.")
@handle_errors
def workers(study_id: int, sort: str, as_json: bool) -> None:
    """List the study's workers with their QC evidence, rules firing and standing."""
    from crowd import review
    from crowd.quality import standing as quality

    settings, db = open_database()
    with db.session() as session:
        study = study_of_cli(session, settings, study_id)
        quality.refresh_study(session, study)
        table = review.worker_table(session, study, sort)
    if as_json:
        click.echo(json.dumps(table, indent=2))
        return
    click.echo(f"{'id':>5}  {'worker':32} {'resp':>4} {'gold':>5} {'crowd':>9} {'attn':>5} "
               f"{'fast':>5} {'const':>5} {'run':>3}  {'status':14} rules")  # fmt: skip
    for row in table:
        gold = "-" if row["gold_accuracy"] is None else f"{row['gold_accuracy']:.2f}"
        # Accuracy against the crowd, and "<" its threshold when below it.
        crowd = "-" if row["agreement"] is None else f"{row['agreement']:.2f}"
        threshold = row["agreement_threshold"]
        if row["agreement"] is not None and threshold is not None and row["agreement"] < threshold:
            crowd += f"<{threshold:.2f}"
        attention = f"{row['attention_failed'] or 0}/{row['attention_checks'] or 0}"
        fast = "-" if row["too_fast_share"] is None else f"{row['too_fast_share']:.0%}"
        const = "-" if row["constant_share"] is None else f"{row['constant_share']:.0%}"
        click.echo(
            f"{row['worker_id']:>5}  {row['worker'][:32]:32} {row['responses']:>4} {gold:>5} "
            f"{crowd:>9} {attention:>5} {fast:>5} {const:>5} {row['longest_run'] or 0:>3}  "
            f"{row['status']:14} {', '.join(row['rule_hits'])}"
        )


@review.command("show")
@click.argument("study_id", type=int)
@click.argument("worker_id", type=int)
@handle_errors
def show(study_id: int, worker_id: int) -> None:
    """One worker's evidence, answers in order and audit trail, as JSON."""
    from crowd import review

    settings, db = open_database()
    with db.session() as session:
        study = study_of_cli(session, settings, study_id)
        click.echo(json.dumps(review.worker_history(session, study, worker_id), indent=2))


def _act(study_id: int, worker_ids: tuple[int, ...], action: str, actor: str | None,
         **params: Any) -> None:  # fmt: skip
    from crowd import review

    settings, db = open_database()
    with db.session() as session:
        study = study_of_cli(session, settings, study_id)
        reviewer = _reviewer(actor)
        outcomes = [
            review.act(session, study, worker_id, action, reviewer, params)
            for worker_id in worker_ids
        ]
    for outcome in outcomes:
        click.echo(f"worker {outcome.worker_id}: {outcome.message}")


# What becomes of --reason besides the audit log.
REASON_HELP = {
    "decision": "Why: kept in the audit log, and the worker reads it on their platform "
    "(MTurk's RequesterFeedback, at most 1024 characters).",
    "block": "Why: kept in the audit log and given to the platform's block (MTurk does not "
    "show it to the worker).",
    "note": "The note.",
}


def _simple(action: str, needs_reason: bool, help_text: str) -> click.Command:
    # No default at all where a reason is required: click takes any default, None
    # included, as the answer.
    reason_default: dict[str, Any] = {} if needs_reason else {"default": ""}
    kind = "note" if action == "note" else "block" if "block" in action else "decision"
    reason = click.option(
        "--reason", required=needs_reason, help=REASON_HELP[kind], **reason_default
    )

    @click.command(action.replace("_", "-"), help=help_text)
    @click.argument("study_id", type=int)
    @click.argument("worker_ids", type=int, nargs=-1, required=True)
    @reason
    @as_option
    @handle_errors
    def command(
        study_id: int, worker_ids: tuple[int, ...], reason: str | None, actor: str | None
    ) -> None:
        _act(study_id, worker_ids, action, actor, reason=reason or "")

    return command


for _action, _needs, _help in (
    ("approve", False, "Approve (queue the payment of) the workers' work and keep them."),
    ("reject", True, "Reject the workers' submitted work with feedback and exclude their data."),
    ("soft_reject", True, "Approve the workers' work but leave their data out of analyses."),
    (
        "block",
        True,
        "Block the workers from every study of yours (on their platform too: MTurk's block; "
        "on Prolific your groups of blocked participants, one per workspace, which every "
        "Prolific study you publish excludes; see `crowd prolific --help` for older ones).",
    ),
    ("unblock", False, "Undo a block."),
    ("note", True, "Add a note to the workers' audit trail."),
):
    review.add_command(_simple(_action, _needs, _help))


@review.command("bonus")
@click.argument("study_id", type=int)
@click.argument("worker_id", type=int)
@click.argument("amount")
@click.option("--reason", required=True, help="Why the bonus is paid (the worker sees it).")
@click.option("--token", default=None,
              help="Idempotency token: a retry with the same token pays once (default: derived "
              "from study, worker, amount and reason).")  # fmt: skip
@as_option
@handle_errors
def bonus(study_id: int, worker_id: int, amount: str, reason: str, token: str | None,
          actor: str | None) -> None:  # fmt: skip
    """Queue a bonus of AMOUNT dollars (e.g. 0.50) for WORKER_ID: a job pays it on the
    worker's platform, and `crowd mturk actions STUDY_ID` shows when it is paid."""
    params = {"amount": amount, "reason": reason}
    if token:
        params["token"] = token
    _act(study_id, (worker_id,), "bonus", actor, **params)


@review.command("notify")
@click.argument("study_id", type=int)
@click.argument("worker_ids", type=int, nargs=-1, required=True)
@click.option("--message", required=True,
              help="The text the workers get (MTurk e-mails it; Prolific sends a message about "
              "the study, one bulk message for several workers).")  # fmt: skip
@click.option("--subject", default=None,
              help="Subject line (default: names the study; on Prolific it heads the "
              "text).")  # fmt: skip
@as_option
@handle_errors
def notify(study_id: int, worker_ids: tuple[int, ...], message: str, subject: str | None,
           actor: str | None) -> None:  # fmt: skip
    """Message workers through their crowd platform."""
    params = {"message": message, **({"subject": subject} if subject else {})}
    _act(study_id, worker_ids, "notify", actor, **params)


@review.command("qualify")
@click.argument("study_id", type=int)
@click.argument("worker_ids", type=int, nargs=-1, required=True)
@click.option("--qualification", required=True, help="The platform's qualification type id.")
@click.option("--value", type=int, default=1, show_default=True, help="Its integer value.")
@as_option
@handle_errors
def qualify(study_id: int, worker_ids: tuple[int, ...], qualification: str, value: int,
            actor: str | None) -> None:  # fmt: skip
    """Grant workers a qualification on their platform (e.g. for a follow-up study)."""
    _act(study_id, worker_ids, "qualify", actor, qualification=qualification, value=value)


@review.command("bulk")
@click.argument("study_id", type=int)
@click.option("--rule", required=True, help="Act on every worker on whom this rule fires.")
@click.option("--action", required=True,
              type=click.Choice(["approve", "reject", "soft_reject", "block", "note"]))  # fmt: skip
@click.option("--reason", default="", help="Why (required for reject, soft_reject, block).")
@as_option
@handle_errors
def bulk(study_id: int, rule: str, action: str, reason: str, actor: str | None) -> None:
    """Apply one action to every worker a rule fires on (e.g. soft-reject all too_fast)."""
    from crowd import review
    from crowd.quality import standing as quality

    settings, db = open_database()
    with db.session() as session:
        study = study_of_cli(session, settings, study_id)
        quality.refresh_study(session, study)
        outcomes = review.bulk(session, study, rule, action, _reviewer(actor), {"reason": reason})
    click.echo(f"{action}: {len(outcomes)} worker(s) on whom {rule} fires")
    for outcome in outcomes:
        click.echo(f"worker {outcome.worker_id}: {outcome.message}")


@review.command("audit")
@click.argument("study_id", type=int)
@click.option("--worker", "worker_id", type=int, default=None, help="Only this worker's entries.")
@click.option("--limit", default=100, show_default=True, help="Most recent entries to show.")
@handle_errors
def audit(study_id: int, worker_id: int | None, limit: int) -> None:
    """The study's audit log: every automatic and manual QC action, newest first."""
    from crowd import review

    settings, db = open_database()
    with db.session() as session:
        study_of_cli(session, settings, study_id)
        entries = [
            review.audit_row(e) for e in review.audit_log(session, study_id, worker_id, limit)
        ]
    for entry in entries:
        worker = f" worker {entry['worker_id']}" if entry["worker_id"] else ""
        click.echo(f"{entry['at'][:19]}  {entry['actor']:28} {entry['action']:14}{worker}: "
                   f"{entry['reason']}")  # fmt: skip


@click.group()
def users() -> None:
    """Logins to the reviewer web UI (/review)."""


@users.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(["experimenter", "reviewer"]), default="reviewer",
              show_default=True, help="Reviewers approve, reject and note; experimenters also "
              "block, unblock and pay bonuses.")  # fmt: skip
@click.option(
    "--experimenter",
    "experimenter_name",
    default=None,
    help="Whose studies the user reviews (a name from `crowd keys list`; default: the "
    "experimenter the CLI acts as).",
)
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True,
              help="At least 10 characters (prompted when not given).")  # fmt: skip
@handle_errors
def create_user(name: str, role: str, experimenter_name: str | None, password: str) -> None:
    """Create a login NAME for the reviewer UI."""
    from crowd.accounts import create_user as create
    from crowd.accounts import find_experimenter

    settings, db = open_database(hit_types=False)
    with db.session() as session:
        owner = (
            find_experimenter(session, experimenter_name)
            if experimenter_name is not None
            else acting_experimenter(session, settings)
        )
        user = create(session, owner.name, name, role, password)
        click.echo(f"user {user.name} ({user.role}) reviews the studies of {owner.name}")
