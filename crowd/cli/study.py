"""crowd study create | import | import-annotations | publish | list | status | export |
report (pause, resume, close, archive and unarchive: crowd/cli/study_states.py).

Every command acts as one experimenter (crowd.cli.common.acting_experimenter) and reaches
only their studies."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from crowd.cli.common import (
    acting_experimenter,
    handle_errors,
    open_database,
    progress,
    study_of_cli,
)
from crowd.cli.study_states import STATE_COMMANDS
from crowd.exceptions import ValidationError
from tasks.base import LIVE_RATER_GROUP


@click.group()
def study() -> None:
    """Create, fill, publish and follow your studies.

    Yours: the studies of the experimenter the CLI acts as (`crowd --as NAME`,
    CROWD_EXPERIMENTER, or the only experimenter there is)."""


for _command in STATE_COMMANDS:
    study.add_command(_command)


def _config(value: str | None) -> dict[str, object]:
    from crowd.studies.lifecycle import strict_json

    if not value:
        return {}
    text = Path(value[1:]).read_text() if value.startswith("@") else value
    try:
        config = strict_json(text)
    except json.JSONDecodeError as error:
        raise ValidationError(f"--config is not valid JSON: {error.msg}") from None
    except ValueError as error:  # NaN, Infinity
        raise ValidationError(f"--config is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ValidationError("--config must be a JSON object")
    _storable(config, "--config")
    return config


def _storable(value: Any, where: str) -> None:
    """Refuse the texts a database refuses (PostgreSQL: NUL in JSON; any: lone surrogates),
    so that a create fails before its INSERT, not in it (as the web API's bodies do)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError("a text holds a NUL character (\\u0000)", where)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError("a text holds a lone surrogate (not UTF-8)", where) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable(key, where)
            _storable(item, f"{where}.{key}")
    elif isinstance(value, list):
        for n, item in enumerate(value):
            _storable(item, f"{where}[{n}]")


@study.command("create")
@click.option("--name", required=True, help="A name for the study.")
@click.option("--type", "hit_type", default="boundary", show_default=True, help="HIT type.")
@click.option("--config", "config", help="Study config as JSON, or @FILE.")
# Before `crowd --as`: the owner. Hidden, and no longer a way to make up an experimenter.
@click.option("--experimenter", default=None, hidden=True)
@handle_errors
def create(name: str, hit_type: str, config: str | None, experimenter: str | None) -> None:
    """Create a study of yours; print its id.

    The study belongs to the experimenter the CLI acts as. Its id goes to stdout (for
    scripts: STUDY=$(crowd study create ...)), what was created to stderr. A create that
    fails writes nothing."""
    from crowd.accounts import find_experimenter
    from crowd.studies.lifecycle import create_study

    settings, db = open_database()
    options = _config(config)  # checked before any database work
    _storable(name, "--name")
    with db.session() as session:
        owner = (
            find_experimenter(session, experimenter)
            if experimenter is not None
            else acting_experimenter(session, settings)
        )
        created = create_study(session, owner, name, hit_type, options)
        study_id, owner_name, kind, title = created.id, owner.name, created.hit_type, created.name
    # Printed once committed: an id on the screen is a study in the database.
    click.echo(study_id)
    progress(
        f"created study {study_id} {title!r} ({kind}) for {owner_name}; add items with "
        f"`crowd study import {study_id} FILE`"
    )


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

    settings, db = open_database()
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    filename = None if path == "-" else path
    started = time.monotonic()
    try:
        text = uploads.decode(data)
        if check:
            with db.read_session() as session:
                found = uploads.check_items(session, study_of_cli(session, settings, study_id),
                                            text, fmt, filename)  # fmt: skip
        else:
            with db.session() as session:
                into = study_of_cli(session, settings, study_id)
                lines = text.count("\n")
                progress(f"read {len(data):,} bytes, {lines:,} lines; checking every item for "
                         f"study {study_id} {into.name!r} ({into.hit_type}), then storing all "
                         "or none...")  # fmt: skip
                added = uploads.store_items(session, into, text, fmt, filename)
    except ValidationError as error:
        raise click.ClickException(f"{path}: {error}") from None
    if not check:
        progress(f"stored {added:,} items in {time.monotonic() - started:.1f} s")
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
    best (comparison), field:<id> or <id> per field (form; choices joined by |, rankings
    by >). The study's QC rules judge the imported raters too.
    """
    from crowd.studies.annotations import import_file

    settings, db = open_database()
    progress(f"reading {'stdin' if path == '-' else path}...")
    handle = sys.stdin if path == "-" else open(path, encoding="utf-8", newline="")  # noqa: SIM115
    with handle:
        text = handle.read()
    if fmt == "auto":
        fmt = _guess_format(path, text.split("\n", 1)[0])
    lines = text.count("\n") + (not text.endswith("\n") and bool(text))
    started = time.monotonic()
    with db.session() as session:
        found = study_of_cli(session, settings, study_id)
        progress(f"checking and storing {lines:,} lines ({fmt}) in study {study_id} "
                 f"{found.name!r} ({found.hit_type}), all or none...")  # fmt: skip
        summary = import_file(
            session,
            found,
            text,
            fmt,
            rater_group=rater_group,
            skip_duplicates=skip_duplicates,
            max_sentences=max_sentences,
            source=f"{path} line",
        )
    progress(f"stored in {time.monotonic() - started:.1f} s")
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
@click.option(
    "--estimate",
    is_flag=True,
    help="Print what publishing would ask for and cost (the options checked), and stop.",
)
@handle_errors
def publish(
    study_id: int,
    providers: tuple[str, ...],
    reward: str | None,
    sandbox: bool,
    raw_options: tuple[str, ...],
    options_file: Any,
    estimate: bool,
) -> None:
    """Open a study to workers; on MTurk or Prolific this creates HITs or a study there.

    MTurk checks the account's balance against rewards plus MTurk's fee first.
    """  # fmt: skip
    from crowd.platforms import publishing
    from crowd.platforms.providers import PROVIDERS

    options = platform_options(providers, reward, sandbox, raw_options, options_file)
    settings, db = open_database()
    with db.read_session() as session:
        found = study_of_cli(session, settings, study_id)
        owner = found.experimenter_id
        if estimate:
            for name, cost in publishing.estimate(session, found, providers, options).items():
                total = f": {cost['cost']} {cost['currency']}" if cost["cost"] else ""
                click.echo(f"{name}{total}")
                for line in cost["lines"]:
                    click.echo(f"  {line}")
            return
    links = publishing.publish_study(db, settings, study_id, providers, options, owner)
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
@click.option("--all", "everyone", is_flag=True, help="Every experimenter's studies.")
@click.option("--archived", is_flag=True, help="The archived studies instead of the others.")
@handle_errors
def list_studies(everyone: bool, archived: bool) -> None:
    """List your studies (--all: everyone's).

    One line per study, tab-separated: id, status, HIT type, owner, items, name."""
    from sqlalchemy import func, select

    from crowd.storage import Experimenter, Item, Study

    settings, db = open_database(hit_types=False)
    with db.read_session() as session:
        owner = None if everyone else acting_experimenter(session, settings)
        whose = "anyone's" if owner is None else f"{owner.name}'s"
        shown = Study.archived_at.is_not(None) if archived else Study.archived_at.is_(None)
        query = (
            select(Study, Experimenter.name)
            .join(Experimenter, Experimenter.id == Study.experimenter_id)
            .where(shown)
            .order_by(Study.id)
        )
        if owner is not None:
            query = query.where(Study.experimenter_id == owner.id)
        rows = session.execute(query).all()
        counted = select(Item.study_id, func.count(Item.id)).group_by(Item.study_id)
        if owner is not None:
            counted = counted.join(Study, Study.id == Item.study_id).where(
                Study.experimenter_id == owner.id
            )
        counts: dict[int, int] = {study_id: n for study_id, n in session.execute(counted)}
        for found, name in rows:
            click.echo(f"{found.id}\t{found.status}\t{found.hit_type}\t{name}\t"
                       f"{counts.get(found.id, 0)} items\t{found.name}")  # fmt: skip
    if not rows:
        if archived:
            progress(f"no archived studies ({whose})")
        else:
            progress(f"no studies ({whose}): create one with `crowd study create --name NAME`")


@study.command("status")
@click.argument("study_id", type=int)
@handle_errors
def status(study_id: int) -> None:
    """Print a study's progress as JSON."""
    from crowd.studies.lifecycle import progress as study_progress

    settings, db = open_database()
    with db.session() as session:
        found = study_of_cli(session, settings, study_id)
        click.echo(json.dumps(study_progress(session, found), indent=2))


@study.command("export")
@click.argument("study_id", type=int)
@click.option("--format", "fmt", default="jsonl", show_default=True,
              help="Output format: jsonl or csv for every type; roft (boundary); pairwise "
                   "(prompt/chosen/rejected) or kway (comparison).")  # fmt: skip
@click.option("--filtered", is_flag=True, help="Leave out workers that QC excluded.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@handle_errors
def export(study_id: int, fmt: str, filtered: bool, output: str) -> None:
    """Export a study's responses.

    The rows go to stdout unless -o; what the export does goes to stderr."""
    from crowd.studies.reports import export as export_rows

    settings, db = open_database()
    started = time.monotonic()
    with db.session() as session:
        found = study_of_cli(session, settings, study_id)
        progress(f"reading the {_responses(session, study_id):,} responses of study {study_id} "
                 f"{found.name!r}{' (QC-filtered)' if filtered else ''}...")  # fmt: skip
        handle = sys.stdout if output == "-" else open(output, "w", encoding="utf-8", newline="")  # noqa: SIM115
        with handle:
            n = export_rows(session, found, fmt, handle, filtered)
    if output != "-":
        click.echo(f"wrote {n} rows to {output}")
    else:
        progress(f"wrote {n:,} rows ({fmt}) in {time.monotonic() - started:.1f} s")


def _responses(session: Any, study_id: int) -> int:
    from sqlalchemy import func, select

    from crowd.storage import Response

    return session.scalar(select(func.count(Response.id)).where(Response.study_id == study_id)) or 0


@study.command("report")
@click.argument("study_id", type=int)
@handle_errors
def report(study_id: int) -> None:
    """Compute the study's report now.

    Prints where its HTML and JSON are (stdout); what it does goes to stderr."""
    progress("loading the HIT types and their analyses...")
    from crowd.studies.reports import compute_report, store_report

    settings, db = open_database()
    started = time.monotonic()
    with db.session() as session:
        found = study_of_cli(session, settings, study_id)
        progress(f"analysing the {_responses(session, study_id):,} responses of study {study_id} "
                 f"{found.name!r} ({found.hit_type}): QC, agreement, aggregated labels, "
                 "plots...")  # fmt: skip
        computed = compute_report(session, settings, study_id)
        progress(f"writing the report ({computed.responses_seen:,} rows analysed in "
                 f"{time.monotonic() - started:.1f} s)...")  # fmt: skip
        store_report(session, computed)
    out_dir = settings.reports_dir / f"study-{study_id}"
    progress(f"report of study {study_id} written in {time.monotonic() - started:.1f} s")
    click.echo(f"{out_dir / 'report.html'}\n{out_dir / 'report.json'}")
