"""Reward models trained on a study's comparison labels, as runs on the models queue.

A run retrains from scratch on every accepted label collected so far (batched collection,
Ziegler et al. 2019): the filtered set of raw labels, or one aggregated label per item. A
study whose config sets `reward_model.retrain_every: N` gets a new run after every N new
labels. The run's progress sits in its RQ job's meta, for the dashboard and the CLI.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import redis
from rq import get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import Job
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from crowd.exceptions import CrowdError, InvalidConfig, NotFound, ValidationError
from crowd.quality.exclusion import left_out_workers
from crowd.quality.stats import refresh_goes_on
from crowd.queue import MODELS, fetch_job, job_queue
from crowd.queue.hooks import Event, after_event
from crowd.queue.jobs import context
from crowd.settings import Settings
from crowd.storage import (
    OPEN_RUN_STATES,
    Database,
    Item,
    ItemKind,
    Response,
    RewardRun,
    RunStatus,
    Study,
    utcnow,
)
from crowd.storage.outbox import RESPONSE_STORED, RESPONSES_IMPORTED
from models.reward.config import (
    LABEL_SOURCES,
    MINILM_NAME,
    RewardConfig,
    check_backbone_name,
    validate_study_settings,
)
from models.reward.data import Comparison, split_held_out
from qc.aggregation import aggregate, bradley_terry_best

log = logging.getLogger(__name__)

TRAIN_TIMEOUT = 6 * 3600
HIT_TYPE = "comparison"
# Labels a reward model learns from (attention checks tell the worker what to pick).
REWARD_KINDS = (ItemKind.REAL, ItemKind.GOLD)
PROGRESS_EVERY_SECONDS = 1.0


def study_settings(study: Study) -> dict[str, Any]:
    """The study's reward_model config (retrain_every, labels, settings), checked."""
    if study.hit_type != HIT_TYPE:
        raise InvalidConfig(
            f"study {study.id} is a {study.hit_type} study: reward models learn from "
            "comparison (best-of-K) labels"
        )
    return validate_study_settings((study.config or {}).get("reward_model"))


def count_labels(session: Session, study: Study) -> int:
    """Accepted labels on the study's real and gold items: those of workers in the filtered
    set (what retrain_every counts)."""
    left_out = left_out_workers(session, study)
    query = (
        select(func.count(Response.id))
        .join(Item, Item.id == Response.item_id)
        .where(Response.study_id == study.id, Item.kind.in_(REWARD_KINDS))
    )
    if left_out:
        query = query.where(Response.worker_id.not_in(left_out))
    return int(session.scalar(query) or 0)


def run_json(run: RewardRun, progress: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": run.id,
        "study_id": run.study_id,
        "status": str(run.status),
        "trigger": run.trigger,
        "labels": run.labels,
        "labels_at_request": run.labels_at_request,
        "settings": run.settings,
        "data": run.data,
        "metrics": run.metrics,
        "path": run.path,
        "job_id": run.job_id,
        "error": run.error,
        "progress": progress,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def request_run(
    session: Session,
    study: Study,
    trigger: str = "manual",
    overrides: dict[str, Any] | None = None,
    labels: str | None = None,
    allow_paths: bool = False,
) -> RewardRun:
    """A queued run with the study's settings and `overrides`; enqueue it after the commit.

    Backbones are 'minilm' or names under CROWD_DATA_DIR/backbones; `allow_paths` (the CLI)
    also takes a local directory.
    """
    configured = study_settings(study)
    overrides = dict(overrides or {})
    if "backbone" in overrides:
        if allow_paths and Path(str(overrides["backbone"])).expanduser().is_dir():
            # The operator's CLI: a local directory, kept as an absolute path.
            overrides["backbone"] = str(Path(str(overrides["backbone"])).expanduser().resolve())
        else:
            check_backbone_name(overrides["backbone"])
    settings = {**configured["settings"], **overrides}
    RewardConfig.from_json(settings)  # a bad override fails here, not in the worker
    source = labels or configured["labels"]
    if source not in LABEL_SOURCES:
        raise InvalidConfig(f"labels must be one of {', '.join(LABEL_SOURCES)}")
    run = RewardRun(
        study_id=study.id, trigger=trigger, labels=source, settings=settings,
        labels_at_request=count_labels(session, study), status=RunStatus.QUEUED,
    )  # fmt: skip
    session.add(run)
    session.flush()
    run.job_id = f"reward-run-{run.id}"
    return run


def enqueue_run(db: Database, connection: redis.Redis, run_id: int) -> Job:
    """Put a run's job on the models queue; a run that cannot be queued is marked failed
    (a queued run with no job would hold up retraining)."""
    try:
        return job_queue(MODELS, connection).enqueue(
            train_reward, run_id, job_id=f"reward-run-{run_id}", job_timeout=TRAIN_TIMEOUT,
            result_ttl=7 * 24 * 3600, failure_ttl=7 * 24 * 3600,
        )  # fmt: skip
    except Exception as error:
        _fail(db, run_id, f"could not be queued: {type(error).__name__}: {error}")
        raise


def _fail(db: Database, run_id: int, message: str) -> None:
    with db.session() as session:
        run = session.get(RewardRun, run_id)
        if run is not None and run.status != RunStatus.FINISHED:
            run.status = RunStatus.FAILED
            run.error = message[:2000]
            run.finished_at = utcnow()


def _lost(connection: redis.Redis, run: RewardRun) -> str | None:
    """Why an open run will never finish (its job is gone or over), or None."""
    if run.started_at is not None and (utcnow() - run.started_at).total_seconds() > TRAIN_TIMEOUT:
        return "ran past its time limit"
    try:
        job = fetch_job(str(run.job_id), connection)
    except NoSuchJobError:
        return "its job is gone from the queue"
    status = job.get_status(refresh=False)
    if status in ("finished", "failed", "stopped", "canceled"):
        return f"its job is {status}"
    return None


def maybe_retrain(db: Database, connection: redis.Redis, study_id: int) -> int | None:
    """Queue a run when the study retrains every N labels and N new ones arrived since the
    last run; returns the new run's id. One run at a time: new labels wait for the next."""
    with db.read_session() as session:
        study = session.get(Study, study_id)
        if study is None or study.hit_type != HIT_TYPE:
            return None
        every = study_settings(study)["retrain_every"]
        if not every:
            return None
        open_runs = session.scalars(
            select(RewardRun).where(
                RewardRun.study_id == study_id, RewardRun.status.in_(OPEN_RUN_STATES)
            )
        ).all()
        lost = {run.id: why for run in open_runs if (why := _lost(connection, run))}
        if len(lost) < len(open_runs):
            return None  # one run at a time: new labels wait for the next
        last = session.scalar(
            select(func.max(RewardRun.labels_at_request)).where(
                RewardRun.study_id == study_id, RewardRun.trigger == "retrain_every"
            )
        )
        if count_labels(session, study) - int(last or 0) < every:
            return None
    for run_id, why in lost.items():
        _fail(db, run_id, f"lost: {why}")
    with db.session() as session:
        # Checked again under the study's row lock, so two event jobs never both queue a run
        # (PostgreSQL; SQLite has one writer at a time anyway).
        study = session.scalar(select(Study).where(Study.id == study_id).with_for_update())
        assert study is not None
        if session.scalar(
            select(RewardRun.id).where(
                RewardRun.study_id == study_id, RewardRun.status.in_(OPEN_RUN_STATES)
            )
        ):
            return None
        run_id = request_run(session, study, trigger="retrain_every").id
    enqueue_run(db, connection, run_id)
    log.info("study %s: %d new labels, queued reward-model run %s", study_id, every, run_id)
    return run_id


@after_event(RESPONSE_STORED, RESPONSES_IMPORTED, order=20)
def retrain_after_labels(connection: redis.Redis, event: Event) -> None:
    """New labels may complete the study's next batch (reward_model.retrain_every)."""
    if event.topic == RESPONSES_IMPORTED and refresh_goes_on(event):
        return  # the import's last event, once every rater's QC is known, checks instead
    study_id = event.payload.get("study_id")
    if study_id is not None:
        maybe_retrain(context().db, connection, int(study_id))


def collect(session: Session, study: Study, source: str) -> tuple[list[Comparison], dict[str, Any]]:
    """The labels a run trains on, and counts that describe them.

    "raw": every label in the filtered set (workers left out by QC rules, reviewers or
    blocks are dropped) on real and gold items. An aggregation method: one label per item,
    the method's label over the filtered set.
    """
    from crowd.studies.reports import analysis_rows

    rows, excluded = analysis_rows(session, study, refresh=False)
    kept = [row for row in rows if row["kind"] in {str(k) for k in REWARD_KINDS}]
    info: dict[str, Any] = {
        "source": source,
        "labels_stored": len(kept),
        "workers_left_out": len(excluded),
        "labels_left_out": sum(1 for row in kept if row["worker"] in excluded),
    }
    kept = [row for row in kept if row["worker"] not in excluded]
    if source == "raw":
        comparisons = [_comparison(row, int(row["best"]), row["worker"]) for row in kept]
    elif kept:
        # Over the same filtered rows as "raw", imported labels included.
        if source == "bradley_terry":
            chosen = bradley_terry_best(
                [(row["item"], row["worker"], int(row["k"]), int(row["best"])) for row in kept]
            ).labels
        else:
            chosen = aggregate(source, [(row["item"], row["worker"], int(row["best"]))
                                        for row in kept]).labels  # fmt: skip
        by_item = {row["item"]: row for row in kept}
        comparisons = [
            _comparison(by_item[item], int(chosen[item]), source)
            for item in sorted(by_item)
            if item in chosen
        ]
    else:
        comparisons = []
    info["labels"] = len(comparisons)
    info["items"] = len({c.item for c in comparisons})
    info["workers"] = len({c.worker for c in comparisons})
    return comparisons, info


def _comparison(row: dict[str, Any], best: int, worker: str | None) -> Comparison:
    return Comparison(
        query=str(row["query"]), candidates=tuple(str(t) for t in row["candidates"]),
        best=best, item=str(row["item"]), worker=worker,
        policies=tuple(row.get("policies") or ()),
    )  # fmt: skip


class RunInProgress(CrowdError):
    status = 409


def backbone_path(settings: Settings, run_settings: dict[str, Any]) -> str:
    """The backbone a run loads: 'minilm', a name under CROWD_DATA_DIR/backbones, or the
    absolute directory the operator's CLI gave."""
    name = str(run_settings.get("backbone", MINILM_NAME))
    if name == MINILM_NAME or Path(name).is_absolute():
        return name
    path = settings.data_dir / "backbones" / check_backbone_name(name)
    if not path.is_dir():
        raise InvalidConfig(f"no backbone {name!r}: put its directory in {path.parent}")
    return str(path)


def run_directory(settings: Settings, run: RewardRun) -> Path:
    return settings.data_dir / "models" / f"study-{run.study_id}" / f"run-{run.id}"


def execute_run(db: Database, settings: Settings, run_id: int,
                progress: Any = None) -> RewardRun:  # fmt: skip
    """Train the run's model from scratch, save it, and record what it did."""
    from models.reward.trainer import RewardTrainer

    with db.session() as session:
        run = session.get(RewardRun, run_id)
        if run is None:
            raise NotFound(f"no reward-model run {run_id}")
        if run.status == RunStatus.FINISHED:
            session.expunge(run)
            return run
        # Claimed in one statement: a second copy of the job finds it running and stops.
        claimed: Any = session.execute(
            update(RewardRun)
            .where(RewardRun.id == run_id,
                   RewardRun.status.in_((RunStatus.QUEUED, RunStatus.FAILED)))
            .values(status=RunStatus.RUNNING, started_at=utcnow(), error=None)
        )  # fmt: skip
        if not claimed.rowcount:
            raise RunInProgress(f"reward-model run {run_id} is already running")
    try:
        with db.read_session() as session:
            run = session.get(RewardRun, run_id)
            assert run is not None
            study = session.get(Study, run.study_id)
            if study is None:
                raise NotFound(f"study {run.study_id} of run {run_id} no longer exists")
            config = RewardConfig.from_json(
                {**run.settings, "backbone": backbone_path(settings, run.settings)}
            )
            comparisons, info = collect(session, study, run.labels)
            directory = run_directory(settings, run)
            study_id = run.study_id
        train, held_out = split_held_out(comparisons, config.held_out, config.seed)
        if not train:
            raise ValidationError(
                f"study {study_id} has no labels to train on yet "
                f"({info['labels_stored']} stored, {info['labels_left_out']} left out by QC)"
            )
        info.update({"train_labels": len(train), "held_out_labels": len(held_out)})
        trainer = RewardTrainer(config, progress=progress)
        result = trainer.train(train, held_out)
        trainer.model.data_card = {**info, "study": study_id, "run": run_id}
        trainer.model.save(directory)
    except BaseException as error:  # Ctrl-C and a worker's shutdown too: never left running
        _fail(db, run_id, f"{type(error).__name__}: {error}")
        raise
    with db.session() as session:
        done = session.get(RewardRun, run_id)
        assert done is not None
        done.status = RunStatus.FINISHED
        done.data = info
        done.metrics = {
            **result.to_json(),
            "device": str(trainer.device),
            "bf16": trainer.use_bf16,
        }
        done.path = str(directory)
        done.finished_at = utcnow()
        session.flush()
        session.expunge(done)
    return done


def train_reward(run_id: int) -> str:
    """RQ job (queue MODELS, timeout TRAIN_TIMEOUT): run a queued reward-model run."""
    ctx = context()
    job = get_current_job()
    last = [0.0]

    def progress(state: Any) -> None:
        if job is None:
            return
        now = time.monotonic()
        if state.phase in ("train",) and now - last[0] < PROGRESS_EVERY_SECONDS and (
            state.step != state.total_steps
        ):
            return
        last[0] = now
        job.meta["progress"] = state.to_json()
        job.save_meta()

    tag = f"[job {job.id}]" if job else "[inline]"
    try:
        run = execute_run(ctx.db, ctx.settings, run_id, progress)
    except CrowdError as error:
        # Bad settings or no labels: recorded on the run; retrying would not help.
        log.warning("%s reward-model run %s failed: %s", tag, run_id, error)
        return f"reward-model run {run_id} failed: {error}"
    log.info("%s reward-model run %s finished: %s", tag, run_id, run.metrics.get("held_out"))
    return f"reward-model run {run_id} finished"


def job_progress(connection: redis.Redis | None, run: RewardRun) -> dict[str, Any] | None:
    """The progress a run's job last reported, or None (no Redis, no job, not started)."""
    if connection is None or not run.job_id:
        return None
    try:
        job = fetch_job(run.job_id, connection)
    except (NoSuchJobError, redis.RedisError):
        return None
    progress = job.get_meta(refresh=True).get("progress")
    return dict(progress) if isinstance(progress, dict) else None


def runs_of(session: Session, study_id: int) -> list[RewardRun]:
    return list(
        session.scalars(
            select(RewardRun).where(RewardRun.study_id == study_id).order_by(RewardRun.id.desc())
        ).all()
    )


def latest_model(session: Session, study_id: int) -> RewardRun | None:
    """The newest finished run of the study."""
    return session.scalar(
        select(RewardRun)
        .where(RewardRun.study_id == study_id, RewardRun.status == RunStatus.FINISHED)
        .order_by(RewardRun.id.desc())
        .limit(1)
    )
