"""LLM evaluation of a Likert study: the model's ratings become one more rater group.

A language model gets what human raters get (models/llm_eval), answers several times, and
each sample k of every (item, attribute) is stored as the answer of one rater, the worker
`<group>/s<k>` of provider "llm", as an imported response in the rater group (default
"llm:<model directory name>"). So every Likert analysis (Kendall's tau, Krippendorff's alpha,
Welch's t-test over rater groups) compares the model with the people, as Chiang & Lee (2023)
did. A missing rating (no number in the answer) is stored as None, never 0; the raw answers
and their prompts are kept in the responses' events.

Running the same group again replaces its earlier LLM responses in one transaction, so the
job is safe to run twice. A temperature sweep stores one group per temperature ("...@t0.7").
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from rq import get_current_job
from rq.job import Job
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from crowd.exceptions import InvalidConfig, ValidationError
from crowd.queue import MODELS, job_queue
from crowd.queue.jobs import context
from crowd.settings import Settings
from crowd.storage import (
    Database,
    Item,
    ItemKind,
    OutboxEvent,
    Response,
    ResponseSource,
    Study,
    Worker,
)
from crowd.storage.outbox import RESPONSES_IMPORTED
from crowd.studies.annotations import MAX_GROUP
from crowd.studies.lifecycle import get_study
from crowd.work.assignments import get_or_create_worker
from models.llm_eval.config import LLMEvalConfig
from models.llm_eval.evaluator import LLMAnswer, LLMEvaluator
from models.llm_eval.prompts import rating_prompts
from tasks import get_hit_type
from tasks.likert.hit import attributes_of, scales_of

log = logging.getLogger(__name__)

LLM_PROVIDER = "llm"
LLM_EVAL_QUEUE = MODELS
# Minutes for a 7B model on one GPU over a few hundred prompts; hours on a CPU.
LLM_EVAL_TIMEOUT = 3600
# Items an LLM rates: the ones people rate for the analyses (attention checks tell people
# what to answer, and training items teach them; neither measures a text).
RATED_KINDS = (ItemKind.REAL, ItemKind.GOLD)
# Job options beyond LLMEvalConfig's fields.
RUN_OPTIONS = ("rater_group", "temperatures")

Progress = Callable[[float], None]


@dataclass
class LLMEvalSummary:
    """What one run stored for one rater group."""

    study_id: int
    rater_group: str
    model: str
    temperature: float
    items: int
    attributes: int
    samples: int
    responses: int
    ratings: int
    missing: int
    replaced: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def default_rater_group(model: str) -> str:
    """ "llm:<model directory name>", the group a run stores its ratings in by default."""
    name = Path(model.rstrip("/\\")).name or model
    return f"llm:{name}"


def sweep_group(group: str, temperature: float) -> str:
    """The rater group of one temperature of a sweep, e.g. "llm:qwen@t0.7"."""
    return f"{group}@t{temperature:g}"


def _check_group(group: str) -> str:
    name = group.strip()
    if not name or len(name) > MAX_GROUP:
        raise ValidationError(
            f"a rater group is 1 to {MAX_GROUP} characters; name a shorter one with --group",
            "rater_group",
        )
    return name


def model_path(settings: Settings, model: str) -> str:
    """The model directory: as given, or the one of that name under $CROWD_DATA_DIR/models."""
    given = Path(model).expanduser()
    if given.is_dir():
        return str(given)
    shared = settings.data_dir / "models" / model
    return str(shared) if shared.is_dir() else model


def likert_study(session: Session, study_id: int) -> Study:
    """The study, which must be a Likert study (LLMs answer rating questions only)."""
    study = get_study(session, study_id)
    if study.hit_type != "likert":
        raise ValidationError(
            f"study {study_id} is a {study.hit_type} study; LLM evaluation rates Likert "
            "studies (hit type likert): pick a Likert study or create one with --type likert"
        )
    return study


@dataclass(frozen=True)
class RatedItem:
    """An item to rate, read out of the session so generation holds no transaction open."""

    id: int
    external_id: str
    content: dict[str, Any]
    expected: dict[str, Any]


def _read(db: Database, study_id: int) -> tuple[dict[str, Any], list[RatedItem]]:
    with db.read_session() as session:
        study = likert_study(session, study_id)
        items = [
            RatedItem(item.id, item.external_id, dict(item.content), dict(item.expected))
            for item in session.scalars(
                select(Item)
                .where(Item.study_id == study.id, Item.kind.in_(RATED_KINDS))
                .order_by(Item.id)
            )
        ]
        config = dict(study.config)
    if not items:
        raise ValidationError(
            f"study {study_id} has no real or gold items to rate: import items first "
            "(crowd study import)"
        )
    return config, items


def run_llm_eval(
    db: Database,
    settings: Settings,
    study_id: int,
    config: LLMEvalConfig,
    rater_group: str | None = None,
    progress: Progress | None = None,
) -> LLMEvalSummary:
    """Rate the study's real and gold items with the model and store the ratings as a group."""
    summaries = run_llm_sweep(
        db, settings, study_id, config, [config.temperature], rater_group, progress
    )
    return summaries[0]


def run_llm_sweep(
    db: Database,
    settings: Settings,
    study_id: int,
    config: LLMEvalConfig,
    temperatures: Sequence[float],
    rater_group: str | None = None,
    progress: Progress | None = None,
) -> list[LLMEvalSummary]:
    """Rate the study at each temperature; with several, each is its own group ("@t0.7").

    The model is loaded once. Generation runs outside any transaction (it may take hours);
    each group is then stored in one short transaction that first deletes the group's
    earlier LLM responses.
    """
    config = replace(config, model=model_path(settings, config.model))
    base = _check_group(rater_group or default_rater_group(config.model))
    temperatures = [float(t) for t in temperatures]
    groups = [base] if len(temperatures) == 1 else [sweep_group(base, t) for t in temperatures]
    for group in groups:
        _check_group(group)
    study_config, items = _read(db, study_id)
    prompts = rating_prompts(
        study_config,
        [(item.external_id, item.content) for item in items],
        persona=config.persona,
        explain=config.explain,
    )
    evaluator = LLMEvaluator(config)
    results = evaluator.sweep(prompts, temperatures, progress=progress)
    summaries = []
    for group, temperature in zip(groups, temperatures, strict=True):
        used = replace(config, temperature=temperature)
        with db.session() as session:
            summary = store_answers(session, study_id, items, used, group, results[temperature])
        summaries.append(summary)
        log.info("LLM evaluation of study %s stored as %s: %s", study_id, group, summary.to_json())
    return summaries


def _stored(value: float | None) -> int | float | None:
    # Whole ratings are stored as people's are (4, not 4.0); halves stay floats.
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


def store_answers(
    session: Session,
    study_id: int,
    items: Sequence[RatedItem],
    config: LLMEvalConfig,
    group: str,
    answers: Sequence[LLMAnswer],
) -> LLMEvalSummary:
    """Replace the group's LLM responses with one response per (item, sample)."""
    study = likert_study(session, study_id)
    hit = get_hit_type(study.hit_type)
    names = [attribute["name"] for attribute in attributes_of(study.config)]
    scales = scales_of(study.config)
    by_id = {item.external_id: item for item in items}
    old = session.execute(
        select(Response.id, Response.worker_id)
        .join(Worker, Worker.id == Response.worker_id)
        .where(
            Response.study_id == study.id,
            Response.rater_group == group,
            Worker.provider == LLM_PROVIDER,
        )
    ).all()
    if old:
        session.execute(delete(Response).where(Response.id.in_([row.id for row in old])))
    grouped: dict[tuple[str, int], list[LLMAnswer]] = {}
    for llm_answer in answers:
        grouped.setdefault((llm_answer.item, llm_answer.sample), []).append(llm_answer)
    samples = sorted({sample for _, sample in grouped})
    workers = {
        k: get_or_create_worker(session, LLM_PROVIDER, f"{group}/s{k}", f"{group} s{k}"[:100])
        for k in samples
    }
    now = datetime.now(UTC)
    ratings = missing = 0
    for (item_id, sample), parts in grouped.items():
        item = by_id[item_id]
        given = {part.attribute: _stored(part.rating) for part in parts}
        values = {name: given.get(name) for name in names}
        answer: dict[str, Any] = {"ratings": values, "scales": scales}
        ratings += sum(1 for value in values.values() if value is not None)
        missing += sum(1 for value in values.values() if value is None)
        events = [
            {
                "type": "llm_answer",
                "attribute": part.attribute,
                "sample": part.sample,
                "prompt": part.prompt,
                "text": part.text,
                "rating": part.rating,
                "model": config.model,
                "temperature": part.temperature,
                "top_p": part.top_p,
                "seed": config.seed,
                "at": now.isoformat(),
            }
            for part in parts
        ]
        session.add(
            Response(
                study_id=study.id,
                item_id=item.id,
                worker_id=workers[sample].id,
                answer=answer,
                events=events,
                score=hit.score(item.expected, answer),
                qc_flags={},
                source=ResponseSource.IMPORTED,
                rater_group=group,
                created_at=now,
            )
        )
    session.flush()
    # Workers whose responses went away are refreshed too, so their numbers drop to zero.
    worker_ids = sorted({w.id for w in workers.values()} | {row.worker_id for row in old})
    if worker_ids:
        session.add(
            OutboxEvent(
                topic=RESPONSES_IMPORTED,
                payload={"study_id": study.id, "worker_ids": worker_ids},
            )
        )
    return LLMEvalSummary(
        study_id=study.id,
        rater_group=group,
        model=config.model,
        temperature=config.temperature,
        items=len({item_id for item_id, _ in grouped}),
        attributes=len(names),
        samples=len(samples),
        responses=len(grouped),
        ratings=ratings,
        missing=missing,
        replaced=len(old),
    )


def split_options(
    options: dict[str, Any],
) -> tuple[LLMEvalConfig, list[float], str | None]:
    """A job's plain options as the config, the temperatures and the rater group."""
    rest = {key: value for key, value in options.items() if key not in RUN_OPTIONS}
    config = LLMEvalConfig.from_options(rest)
    temperatures = options.get("temperatures") or [config.temperature]
    if not isinstance(temperatures, list | tuple) or len(set(temperatures)) != len(temperatures):
        raise InvalidConfig("must be a list of different temperatures", "temperatures")
    for temperature in temperatures:
        replace(config, temperature=temperature)  # raises InvalidConfig as the config would
    group = options.get("rater_group")
    if group is not None and not isinstance(group, str):
        raise InvalidConfig("must be text", "rater_group")
    return config, [float(t) for t in temperatures], group


def llm_eval_job(study_id: int, options: dict[str, Any]) -> str:
    """RQ job (queue MODELS, timeout LLM_EVAL_TIMEOUT): rate a study with a local LLM.

    `options` holds LLMEvalConfig's fields and optionally "rater_group" and "temperatures";
    the progress (0 to 1) is in the job's meta["progress"].
    """
    ctx = context()
    job = get_current_job()
    tag = f"[job {job.id}]" if job else "[inline]"
    config, temperatures, group = split_options(options)

    def progress(fraction: float) -> None:
        if job is not None:
            job.meta["progress"] = round(fraction, 4)
            job.save_meta()

    summaries = run_llm_sweep(ctx.db, ctx.settings, study_id, config, temperatures, group, progress)
    done = "; ".join(
        f"{s.rater_group}: {s.responses} responses, {s.ratings} ratings, {s.missing} missing"
        for s in summaries
    )
    log.info("%s LLM evaluation of study %s: %s", tag, study_id, done)
    return f"LLM evaluation of study {study_id}: {done}"


def enqueue_llm_eval(connection: redis.Redis, study_id: int, options: dict[str, Any]) -> Job:
    """Check the options, then queue llm_eval_job on the models queue."""
    split_options(options)
    job = job_queue(LLM_EVAL_QUEUE, connection).enqueue(
        llm_eval_job,
        study_id,
        options,
        job_timeout=LLM_EVAL_TIMEOUT,
        result_ttl=7 * 24 * 3600,
        failure_ttl=7 * 24 * 3600,
        meta={"progress": 0.0},
    )
    return job
