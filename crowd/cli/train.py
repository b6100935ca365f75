"""crowd train reward | runs: reward models from a study's comparison labels."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import click

from crowd.cli.common import handle_errors, open_database, study_of_cli
from models.reward.config import LABEL_SOURCES, RewardConfig

_HELP = RewardConfig.help()
_DEFAULTS = RewardConfig()


def _help(name: str) -> str:
    return f"{_HELP[name]}  [default: {getattr(_DEFAULTS, name)}]"


@click.group()
def train() -> None:
    """Train models on a study's labels (runs go through the crowd-models queue)."""


@train.command("reward")
@click.argument("study_id", metavar="STUDY", type=int)
@click.option("--backbone", help=_help("backbone"))
@click.option("--labels", type=click.Choice(LABEL_SOURCES),
              help="'raw': every label in the filtered set; or one label per item from an "
              "aggregation method.  [default: the study's reward_model.labels, else raw]",
              )  # fmt: skip
@click.option("--epochs", type=int, help=_help("epochs"))
@click.option("--learning-rate", type=float, help=_help("learning_rate"))
@click.option("--batch-size", type=int, help=_help("batch_size"))
@click.option("--max-length", type=int, help=_help("max_length"))
@click.option("--held-out", type=float, help=_help("held_out"))
@click.option("--seed", type=int, help=_help("seed"))
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), help=_help("device"))
@click.option("--setting", "extra", multiple=True, metavar="KEY=JSON",
              help="Any other reward-model setting, e.g. --setting share_query=false.")  # fmt: skip
@click.option("--detach", is_flag=True,
              help="Queue the run and exit; a `crowd worker` on crowd-models trains it.",
              )  # fmt: skip
@handle_errors
def reward(study_id: int, labels: str | None, extra: tuple[str, ...], detach: bool,
           **options: Any) -> None:  # fmt: skip
    """Train a reward model from scratch on STUDY's accepted comparison labels.

    Settings default to the study's config (reward_model.settings), then to the paper's
    (one epoch, Adam, lr 1.77e-5, batch 8, dropout off). The run goes on the crowd-models
    queue; unless --detach, this command follows it with a progress bar, and trains it
    here when no worker listens on that queue. The model is saved under
    CROWD_DATA_DIR/models/study-STUDY/run-N with a model card.
    """
    from crowd.ml.reward import enqueue_run, request_run
    from crowd.queue.runner import ensure_redis

    overrides = {key: value for key, value in options.items() if value is not None}
    for pair in extra:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r} is not KEY=JSON", param_hint="--setting")
        try:
            overrides[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key.strip()] = raw
    settings, db = open_database()
    if detach and not settings.redis_url:
        # An embedded Redis stops with this command and keeps nothing: the job would be lost.
        raise click.ClickException(
            "--detach needs a Redis that outlives this command: set CROWD_REDIS_URL"
        )
    settings, embedded = ensure_redis(settings)
    try:
        from crowd.queue import redis_connection

        connection = redis_connection(settings.redis_url or "")
        with db.session() as session:
            study = study_of_cli(session, settings, study_id)
            run = request_run(session, study, "manual", overrides, labels, allow_paths=True)
            run_id, job_id = run.id, run.job_id
        enqueue_run(db, connection, run_id)
        click.echo(f"reward-model run {run_id} queued (job {job_id})")
        if detach:
            return
        _follow(settings, connection, str(job_id))
    finally:
        if embedded is not None:
            embedded.stop()
    _print_run(db, run_id)


def _follow(settings: Any, connection: Any, job_id: str) -> None:
    """Draw the job's progress while it runs: on a worker that took it, or here when no
    worker listens to the models queue (crowd.queue.runner.see_through)."""
    from crowd.queue import MODELS, fetch_job
    from crowd.queue.runner import FINAL_STATES, see_through

    job = fetch_job(job_id, connection)
    done = threading.Event()

    def draw() -> None:
        # A bar on a terminal; in a log (no tty), a line per tenth and per phase.
        tty = sys.stdout.isatty()
        with click.progressbar(length=1000, label="training", show_percent=True) as bar:
            shown, phase = 0, ""
            while not done.is_set():
                progress = job.get_meta(refresh=True).get("progress") or {}
                finished = job.get_status(refresh=True) in FINAL_STATES
                value = 1000 if finished else int(1000 * float(progress.get("fraction", 0.0)))
                if not tty and (value // 100 > shown // 100 or progress.get("phase") != phase):
                    phase = str(progress.get("phase", ""))
                    click.echo(f"  {value / 10:.0f}% {phase} step {progress.get('step', 0)}/"
                               f"{progress.get('total_steps', '?')}")  # fmt: skip
                if value > shown:
                    bar.update(value - shown)
                    shown = value
                if finished:
                    return
                time.sleep(0.5)

    drawer = threading.Thread(target=draw, name="progress", daemon=True)
    drawer.start()
    try:
        see_through(settings, job, MODELS)
        drawer.join(5)  # it draws the end within a poll
    finally:
        done.set()
    click.echo()


def _print_run(db: Any, run_id: int) -> None:
    from crowd.storage import RewardRun

    with db.read_session() as session:
        run = session.get(RewardRun, run_id)
        assert run is not None
        if run.status == "finished":
            held = run.metrics.get("held_out") or {}
            click.echo(
                f"run {run_id} finished: {run.data.get('train_labels')} labels in "
                f"{run.metrics.get('seconds')} s "
                f"({run.metrics.get('labels_per_second')} labels/s); "
                f"held-out top-1 {held.get('accuracy')} on {held.get('n')} labels "
                f"(chance {held.get('chance')}); saved in {run.path}"
            )
        elif run.status == "failed":
            raise click.ClickException(f"run {run_id} failed: {run.error}")
        else:
            click.echo(f"run {run_id} is {run.status}; follow it with `crowd train runs`")


@train.command("runs")
@click.argument("study_id", metavar="STUDY", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@handle_errors
def runs(study_id: int, as_json: bool) -> None:
    """List STUDY's reward-model runs, newest first, with their progress and accuracy."""
    from crowd.ml.reward import job_progress, run_json, runs_of
    from crowd.queue import redis_connection

    settings, db = open_database()
    connection = redis_connection(settings.redis_url) if settings.redis_url else None
    with db.read_session() as session:
        study_of_cli(session, settings, study_id)
        rows = [run_json(run, job_progress(connection, run)) for run in runs_of(session, study_id)]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no runs yet: crowd train reward {study_id}")
    for row in rows:
        held = (row["metrics"].get("held_out") or {}) if row["metrics"] else {}
        progress = row["progress"] or {}
        where = f"{100 * progress.get('fraction', 0):.0f}% {progress.get('phase', '')}".strip()
        click.echo(
            f"run {row['id']}  {row['status']:<8}  {row['trigger']:<13}  labels={row['labels']}"
            f"  n={row['data'].get('train_labels', '-')}"
            f"  top1={held.get('accuracy', '-')} (chance {held.get('chance', '-')})"
            + (f"  [{where}]" if row["status"] in ("queued", "running") else "")
            + (f"  error: {row['error']}" if row["error"] else "")
        )
