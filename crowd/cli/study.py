"""crowd study create | import | publish | status | export | report."""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Any

import click

from crowd.cli.common import handle_errors, open_database
from crowd.exceptions import ValidationError
from tasks.base import LIVE_RATER_GROUP


@click.group()
def study() -> None:
    """Create, fill, publish and follow studies (the CLI acts with database access)."""


def _config(value: str | None) -> dict[str, object]:
    if not value:
        return {}
    text = Path(value[1:]).read_text() if value.startswith("@") else value
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValidationError(f"--config is not valid JSON: {error.msg}") from None
    if not isinstance(config, dict):
        raise ValidationError("--config must be a JSON object")
    return config


@study.command("create")
@click.option("--name", required=True, help="A name for the study.")
@click.option("--type", "hit_type", default="boundary", show_default=True, help="HIT type.")
@click.option("--config", "config", help="Study config as JSON, or @FILE.")
@click.option("--experimenter", default=getpass.getuser, help="Owner (default: your user name).")
@handle_errors
def create(name: str, hit_type: str, config: str | None, experimenter: str) -> None:
    """Create a study and print its id."""
    from crowd.accounts import get_or_create_experimenter
    from crowd.studies.lifecycle import create_study

    _settings, db = open_database()
    with db.session() as session:
        owner = get_or_create_experimenter(session, experimenter)
        created = create_study(session, owner, name, hit_type, _config(config))
        click.echo(created.id)


@study.command("import")
@click.argument("study_id", type=int)
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", "jsonl", "csv"]),
              help="jsonl (a JSON object per line) or csv (a header, then a row per item); "
                   "auto goes by the file's extension, else its first line.")  # fmt: skip
@click.option("--check", is_flag=True,
              help="Check every line and print what each holds or what is wrong with it; "
                   "store nothing (exit status 1 if any line is bad).")  # fmt: skip
@handle_errors
def import_(study_id: int, path: str, fmt: str, check: bool) -> None:
    """Import items from a JSON-lines or CSV file (all or none).

    CSV: a column per item field (see the README's item formats); list cells as JSON or one
    entry per line of the cell (or separated by |), dotted columns such as meta.source.
    """
    from crowd.studies import uploads
    from crowd.studies.lifecycle import get_study

    _settings, db = open_database()
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    filename = None if path == "-" else path
    try:
        text = uploads.decode(data)
        if check:
            with db.read_session() as session:
                found = uploads.check_items(session, get_study(session, study_id), text, fmt,
                                            filename)  # fmt: skip
        else:
            with db.session() as session:
                added = uploads.store_items(session, get_study(session, study_id), text, fmt,
                                            filename)  # fmt: skip
    except ValidationError as error:
        raise click.ClickException(f"{path}: {error}") from None
    if not check:
        click.echo(f"added {added} items to study {study_id}")
        return
    for line in found["lines"]:
        field = f"{line['field']}: " if line["field"] else ""
        detail = line["summary"] if line["ok"] else field + line["error"]
        click.echo(f"line {line['line']}\t{'ok' if line['ok'] else 'ERROR'}\t"
                   f"{line['kind'] or '-'}\t{line['id'] or '-'}\t{detail}")  # fmt: skip
    click.echo(f"{path}: {found['total']} items ({found['format']}), {found['valid']} valid, "
               f"{found['invalid']} with problems; nothing stored")  # fmt: skip
    if found["invalid"]:
        sys.exit(1)


def _guess_format(path: str, first_line: str) -> str:
    if path.endswith((".jsonl", ".ndjson")) or first_line.lstrip().startswith("{"):
        return "jsonl"
    if "predicted_boundary_index" in first_line:
        return "roft"
    return "csv"


@study.command("import-annotations")
@click.argument("study_id", type=int)
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "jsonl", "csv", "roft"]),
    help="jsonl, csv, or roft (the public RoFT CSV); auto looks at the file.",
)
@click.option(
    "--rater-group",
    default=LIVE_RATER_GROUP,
    show_default=True,
    help="Rater group of records that name none (e.g. expert, teachers).",
)
@click.option(
    "--skip-duplicates",
    is_flag=True,
    help="Skip answers a worker already gave instead of refusing the file.",
)
@click.option(
    "--max-sentences",
    type=int,
    default=None,
    help="RoFT only: keep the first N sentences of a passage (10 in the release).",
)
@handle_errors
def import_annotations(
    study_id: int,
    path: str,
    fmt: str,
    rater_group: str,
    skip_duplicates: bool,
    max_sentences: int | None,
) -> None:
    """Import answers collected elsewhere (all or none) as imported responses.

    JSON lines: {"worker", "item", "answer": {...}, "rater_group", "created_at",
    "seconds", "explanation", "reasons"}. CSV: columns worker, item (and optionally
    rater_group, created_at, seconds, explanation, reasons); the other columns are the
    answer, e.g. guess (boundary), one column per attribute or attribute + rating (Likert),
    best (comparison). The study's QC rules judge the imported raters too.
    """
    from crowd.studies.annotations import import_file
    from crowd.studies.lifecycle import get_study

    _settings, db = open_database()
    handle = sys.stdin if path == "-" else open(path, encoding="utf-8", newline="")  # noqa: SIM115
    with handle:
        text = handle.read()
    if fmt == "auto":
        fmt = _guess_format(path, text.split("\n", 1)[0])
    with db.session() as session:
        summary = import_file(
            session,
            get_study(session, study_id),
            text,
            fmt,
            rater_group=rater_group,
            skip_duplicates=skip_duplicates,
            max_sentences=max_sentences,
            source=f"{path} line",
        )
    numbers = summary.to_json()
    click.echo(
        f"added {numbers['added']} responses by {numbers['workers']} workers to study "
        f"{study_id} ({fmt}; {numbers['skipped_duplicates']} duplicates skipped, "
        f"{numbers['items_added']} items added)"
    )


@study.command("publish")
@click.argument("study_id", type=int)
@click.option(
    "--provider",
    "providers",
    multiple=True,
    default=["local"],
    show_default=True,
    help="Provider to publish to: local, sim, mturk, prolific (repeat for several).",
)
@click.option(
    "--reward",
    default=None,
    help="Payment per platform session: dollars per HIT on MTurk (e.g. 0.50), "
    "per place on Prolific (e.g. 1.50, in the account's currency).",
)
@click.option(
    "--sandbox/--production",
    default=True,
    show_default=True,
    help="MTurk: the requester sandbox (no money) or the real marketplace.",
)
@click.option(
    "--option",
    "raw_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A provider option (a JSON value or text), for every platform provider "
    "named; see `crowd mturk options` / `crowd prolific options`.",
)
@click.option(
    "--options-file",
    type=click.File(),
    default=None,
    help='JSON object of options per provider, e.g. {"mturk": {"hits": 3}}.',
)
@handle_errors
def publish(
    study_id: int,
    providers: tuple[str, ...],
    reward: str | None,
    sandbox: bool,
    raw_options: tuple[str, ...],
    options_file: Any,
) -> None:
    """Open a study to workers; on MTurk or Prolific this creates HITs or a study there.

    MTurk checks the account's balance against rewards plus MTurk's fee first.
    """  # fmt: skip
    from crowd.platforms.providers import PROVIDERS
    from crowd.platforms.publishing import publish, set_up_accounts, start_publishing
    from crowd.studies.lifecycle import get_study

    options = platform_options(providers, reward, sandbox, raw_options, options_file)
    settings, db = open_database()
    with db.read_session() as session:
        owner = get_study(session, study_id).experimenter_id
    # Committed first (Prolific: the group of blocked workers), so that a publish that
    # fails and its retry use the same one rather than make another.
    kept = set_up_accounts(db, settings, owner, providers, options)
    # So is the note that a publish begins: a retry of one that failed after the platform
    # made its tasks looks for them, a first try does not.
    start_publishing(db, study_id, providers)
    with db.session() as session:
        found = get_study(session, study_id)
        links = publish(session, settings, found, providers, options, kept)
    for name, urls in links.items():
        for label, url in urls.items():
            click.echo(f"{name} {label}: {url}")
        if PROVIDERS.get(name).remote:
            click.echo(f"{name}: sync with `crowd {name} sync {study_id}` (crowd worker does it)")


def platform_options(
    providers: tuple[str, ...],
    reward: str | None,
    sandbox: bool,
    raw_options: tuple[str, ...],
    options_file: Any,
) -> dict[str, dict[str, Any]]:
    """Options per platform provider from the command line's flags and file."""
    from crowd.platforms.providers import PROVIDERS

    remote = [name for name in providers if PROVIDERS.get(name).remote]
    options: dict[str, dict[str, Any]] = {}
    if options_file is not None:
        loaded = json.load(options_file)
        if not isinstance(loaded, dict):
            raise click.BadParameter("must hold a JSON object", param_hint="--options-file")
        options = {name: dict(value) for name, value in loaded.items()}
    extra: dict[str, Any] = {}
    for pair in raw_options:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--option")
        try:
            extra[key] = json.loads(value)
        except json.JSONDecodeError:
            extra[key] = value
    if (reward or extra) and not remote:
        raise click.BadParameter("--reward and --option are for mturk or prolific")
    for name in remote:
        merged = {**options.get(name, {}), **extra}
        if reward is not None:
            merged["reward"] = reward
        if name == "mturk":
            merged.setdefault("sandbox", sandbox)
        options[name] = merged
    return options


@study.command("list")
@click.option("--experimenter", help="Only this experimenter's studies.")
@handle_errors
def list_studies(experimenter: str | None) -> None:
    """List studies: id, status, HIT type, owner, items, name."""
    from sqlalchemy import func, select

    from crowd.storage import Experimenter, Item, Study

    _settings, db = open_database()
    with db.read_session() as session:
        counts: dict[int, int] = {
            study_id: count
            for study_id, count in session.execute(
                select(Item.study_id, func.count(Item.id)).group_by(Item.study_id)
            )
        }
        query = select(Study, Experimenter.name).join(
            Experimenter, Experimenter.id == Study.experimenter_id
        ).order_by(Study.id)  # fmt: skip
        if experimenter is not None:
            query = query.where(Experimenter.name == experimenter.strip())
        rows = session.execute(query).all()
        for found, owner in rows:
            click.echo(f"{found.id}\t{found.status}\t{found.hit_type}\t{owner}\t"
                       f"{counts.get(found.id, 0)} items\t{found.name}")  # fmt: skip
    if not rows:
        click.echo("no studies: create one with `crowd study create --name NAME`")


@study.command("status")
@click.argument("study_id", type=int)
@handle_errors
def status(study_id: int) -> None:
    """Print a study's progress as JSON."""
    from crowd.studies.lifecycle import get_study, progress

    _settings, db = open_database()
    with db.session() as session:
        click.echo(json.dumps(progress(session, get_study(session, study_id)), indent=2))


@study.command("export")
@click.argument("study_id", type=int)
@click.option("--format", "fmt", default="jsonl", show_default=True,
              help="Output format: jsonl or csv for every type; roft (boundary); pairwise "
                   "(prompt/chosen/rejected) or kway (comparison).")  # fmt: skip
@click.option("--filtered", is_flag=True, help="Leave out workers that QC excluded.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@handle_errors
def export(study_id: int, fmt: str, filtered: bool, output: str) -> None:
    """Export a study's responses."""
    from crowd.studies.lifecycle import get_study
    from crowd.studies.reports import export as export_rows

    _settings, db = open_database()
    handle = sys.stdout if output == "-" else open(output, "w", encoding="utf-8", newline="")  # noqa: SIM115
    with db.session() as session, handle:
        n = export_rows(session, get_study(session, study_id), fmt, handle, filtered)
    if output != "-":
        click.echo(f"wrote {n} rows to {output}")


@study.command("report")
@click.argument("study_id", type=int)
@handle_errors
def report(study_id: int) -> None:
    """Compute the study's report now and print where its HTML and JSON are."""
    from crowd.studies.reports import build_report

    settings, db = open_database()
    with db.session() as session:
        build_report(session, settings, study_id)
    out_dir = settings.reports_dir / f"study-{study_id}"
    click.echo(f"{out_dir / 'report.html'}\n{out_dir / 'report.json'}")
