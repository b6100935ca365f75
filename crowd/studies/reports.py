"""Study data for analyses and exports: rows, the filtered set, reports on disk and in the db."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
import redis
from rq import get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.exceptions import ValidationError
from crowd.plugins import live_module
from crowd.quality import exclusion, labels
from crowd.quality import standing as quality
from crowd.queue import REPORTS, fetch_job, job_queue
from crowd.queue.hooks import ANY_TOPIC, Event, after_event
from crowd.queue.jobs import context
from crowd.settings import Settings
from crowd.storage import (
    Item,
    Report,
    Response,
    Serving,
    Study,
    StudyWorker,
    Worker,
    utcnow,
)
from crowd.studies.frame import StudyFrame, read_frame
from crowd.studies.lifecycle import get_study, progress
from qc.coded import present
from tasks import get_hit_type, report_html

log = logging.getLogger(__name__)

REPORT_TIMEOUT = 600


def worker_key(worker: Worker) -> str:
    return f"{worker.provider}:{worker.external_id}"


def platform_rows(session: Session, study: Study) -> list[dict[str, Any]]:
    """One plain dict per stored response, in time order, with the item's data (and the
    study's config) joined."""
    result = session.execute(
        select(Response, Item, Worker)
        .join(Item, Item.id == Response.item_id)
        .join(Worker, Worker.id == Response.worker_id)
        .where(Response.study_id == study.id)
        .order_by(Response.created_at, Response.id)
    ).all()
    positions: dict[int, int] = {}
    rows = []
    for response, item, worker in result:
        position = positions.get(worker.id, 0)
        positions[worker.id] = position + 1
        rows.append(
            {
                "response_id": response.id,
                "worker": worker_key(worker),
                "worker_status": str(worker.status),
                "item": item.external_id,
                "kind": str(item.kind),
                "category": item.category,
                "meta": item.meta,
                "content": item.content,
                "expected": item.expected,
                "answer": response.answer,
                "score": response.score,
                "explanation": response.explanation,
                "reasons": response.reasons,
                "qc_flags": response.qc_flags,
                "events": response.events,
                "position": position,
                "created_at": response.created_at.isoformat(),
                "source": str(response.source),
                "rater_group": response.rater_group,
                # The study's declarations (a form's fields), for types whose rows need them.
                "config": study.config,
            }
        )
    return rows


def excluded_workers(session: Session, study: Study, refresh: bool = True) -> dict[str, set[str]]:
    """The workers left out of the filtered set, by the rule (or "reviewer") that did it.

    The standing of every worker is refreshed first (unless the caller just did, or reads
    in a read-only session), so the filtered set is the current rules' verdict on the stored
    evidence, plus reviewers' decisions and blocks.
    """
    if refresh:
        quality.refresh_study(session, study)
    by_rule = exclusion.excluded_by(session, study.id)
    ids = set().union(*by_rule.values())
    workers = {w.id: w for w in session.scalars(select(Worker).where(Worker.id.in_(ids))).all()}
    out = {name: {worker_key(workers[i]) for i in members} for name, members in by_rule.items()}
    blocked_ids = exclusion.blocked_in_study(session, study)
    blocked = session.scalars(select(Worker).where(Worker.id.in_(blocked_ids))).all()
    if blocked:
        out["blocked"] = {worker_key(worker) for worker in blocked}
    return out


def analysis_rows(
    session: Session, study: Study, refresh: bool = True
) -> tuple[list[dict[str, Any]], set[str]]:
    """The study's analysis rows and the workers the filtered set leaves out.

    With refresh=False it reads the QC standing the queue jobs keep current, writing nothing.
    """
    excluded = set().union(*excluded_workers(session, study, refresh=refresh).values())
    return study_rows(session, study), excluded


def study_rows(session: Session, study: Study) -> list[dict[str, Any]]:
    """The analysis rows of a study: one per response, or one per game for game types."""
    hit = get_hit_type(study.hit_type)
    if hit.played_as_games:
        # Games are the live package's records (HitType.live): agents' games included.
        live = live_module(hit)
        if live is None or not callable(getattr(live, "game_records", None)):
            raise TypeError(f"{hit.name} is played as games: its live package needs game_records")
        rows: list[dict[str, Any]] = live.game_records(session, study)
        return rows
    return [hit.analysis_row(row) for row in platform_rows(session, study)]


@dataclass
class ReportData:
    """A computed report, ready to store."""

    study_id: int
    data: dict[str, Any]
    html: str
    responses_seen: int
    aggregations: dict[str, dict[str, Any]]


def compute_report(
    session: Session, settings: Settings, study_id: int, refresh: bool = True
) -> ReportData:
    """Analyse the study and write report.json / report.html with plots; nothing is stored.

    With refresh=False it only reads, so it can run in a read-only session (Database.
    read_session) after the workers' QC standing was refreshed in a short write.
    """
    study = get_study(session, study_id)
    hit = get_hit_type(study.hit_type)
    rules = excluded_workers(session, study, refresh=refresh)
    excluded = set().union(*rules.values())
    frame = None
    if hit.frame_answer_fields and not hit.played_as_games:
        # Columns, not a dict per response: a million answers fit in tens of megabytes.
        frame = read_frame(session, study, hit.frame_answer_fields)
        data = hit.analyze_frame(frame, excluded, study.config)
        data["rules"] = {name: frame_removals(frame, workers) for name, workers in rules.items()}
        seen = len(frame)
    else:
        rows = study_rows(session, study)
        data = hit.analyze(rows, excluded, study.config)
        data["rules"] = {name: rule_removals(rows, workers) for name, workers in rules.items()}
        seen = len(rows)
    data["study"] = {
        "id": study.id,
        "name": study.name,
        "hit_type": study.hit_type,
        "config": study.config,
        "generated_at": utcnow().isoformat(),
        "progress": progress(session, study, frame),
    }
    data["qc"] = qc_summary(session, study, frame)
    data["aggregation"], aggregations = labels.compute_aggregations(
        session, study, methods=labels.REPORT_METHODS, frame=frame
    )
    data["aggregation_rater_groups"] = labels.answer_groups(session, study, frame=frame)
    out_dir = settings.reports_dir / f"study-{study.id}"
    out_dir.mkdir(parents=True, exist_ok=True)
    html = hit.render_report(data, out_dir, f"{study.name} (study {study.id})")
    html = html.replace("</body>", qc_section(data) + "</body>", 1)
    (out_dir / "report.json").write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    (out_dir / "report.html").write_text(html)
    return ReportData(study.id, data, html, seen, aggregations)


def row_workers(row: dict[str, Any]) -> list[str]:
    """The workers behind an analysis row (both players of a game)."""
    return list(row["workers"]) if "workers" in row else [row["worker"]]


def rule_removals(rows: list[dict[str, Any]], workers: set[str]) -> dict[str, Any]:
    """What one rule (or reviewers) left out of the filtered set, in all and per rater group.

    Rows without a rater group (a game's) count only in all.
    """
    removed = [row for row in rows if set(row_workers(row)) & workers]
    out: dict[str, Any] = {"workers": len(workers), "responses": len(removed)}
    by_group: dict[str, tuple[set[str], list[dict[str, Any]]]] = {}
    for row in removed:
        if row.get("rater_group") is not None:
            members, group_rows = by_group.setdefault(str(row["rater_group"]), (set(), []))
            members.add(str(row["worker"]))
            group_rows.append(row)
    if by_group:
        out["by_rater_group"] = {
            group: {"workers": len(members), "responses": len(group_rows)}
            for group, (members, group_rows) in sorted(by_group.items())
        }
    return out


def frame_removals(frame: StudyFrame, workers: set[str]) -> dict[str, Any]:
    """`rule_removals` on a study frame."""
    removed = frame.worker_mask(workers)
    out: dict[str, Any] = {"workers": len(workers), "responses": int(removed.sum())}
    by_group: dict[str, dict[str, int]] = {}
    for code, group in enumerate(frame.rater_groups):
        rows = removed & (frame.rater_group == code)
        if rows.any():
            by_group[str(group)] = {
                "workers": int(np.unique(frame.worker[rows]).size),
                "responses": int(rows.sum()),
            }
    if by_group:
        out["by_rater_group"] = dict(sorted(by_group.items()))
    return out


def store_report(session: Session, computed: ReportData) -> Report:
    """Store a computed report and its aggregated labels."""
    labels.store_aggregations(session, computed.study_id, computed.aggregations)
    report = session.scalar(select(Report).where(Report.study_id == computed.study_id))
    if report is None:
        report = Report(study_id=computed.study_id)
        session.add(report)
    report.data = json.loads(json.dumps(computed.data, default=str))
    report.html = computed.html
    report.responses_seen = computed.responses_seen
    report.updated_at = utcnow()
    session.flush()
    return report


def build_report(session: Session, settings: Settings, study_id: int) -> Report:
    """Analyse the study and store its report, in one session."""
    return store_report(session, compute_report(session, settings, study_id))


def worker_groups(
    session: Session, study_id: int, frame: StudyFrame | None = None
) -> dict[int, dict[str, set[str]]]:
    """Each worker's rater groups in the study, with the sources (live, imported) of each
    (from the study frame where the report read one)."""
    out: dict[int, dict[str, set[str]]] = {}
    if frame is not None:
        n_groups, n_sources = len(frame.rater_groups), len(frame.sources)
        keys = (frame.worker.astype(np.int64) * n_groups + frame.rater_group) * n_sources
        for key in present(keys + frame.source).tolist():
            worker, rest = divmod(key, n_groups * n_sources)
            group, source = divmod(rest, n_sources)
            groups = out.setdefault(int(frame.worker_db_id[worker]), {})
            groups.setdefault(str(frame.rater_groups[group]), set()).add(str(frame.sources[source]))
        return out
    for worker_id, group, source in session.execute(
        select(Response.worker_id, Response.rater_group, Response.source)
        .where(Response.study_id == study_id)
        .distinct()
    ).all():
        out.setdefault(worker_id, {}).setdefault(str(group), set()).add(str(source))
    return out


def _status(row: StudyWorker) -> str:
    if row.excluded_by is not None:
        return "excluded"
    if row.serving == Serving.STOPPED:
        return "stopped"
    return "flagged" if row.flags else "active"


def qc_summary(session: Session, study: Study, frame: StudyFrame | None = None) -> dict[str, Any]:
    """How many workers QC left active, flagged, stopped or excluded, and which rules fired:
    over everyone, and per rater group (live workers and imported raters alike)."""
    groups = worker_groups(session, study.id, frame)
    statuses: Counter[str] = Counter()
    fired: Counter[str] = Counter()
    by_group: dict[str, tuple[set[str], Counter[str], Counter[str]]] = {}
    for row in session.scalars(select(StudyWorker).where(StudyWorker.study_id == study.id)):
        status = _status(row)
        statuses[status] += 1
        fired.update(row.rule_hits or [])
        for group, sources in groups.get(row.worker_id, {}).items():
            seen, group_statuses, group_fired = by_group.setdefault(
                group, (set(), Counter(), Counter())
            )
            seen.update(sources)
            group_statuses[status] += 1
            group_fired.update(row.rule_hits or [])
    return {
        "workers": dict(sorted(statuses.items())),
        "rules_firing": dict(sorted(fired.items())),
        "by_rater_group": {
            group: {
                "sources": sorted(seen),
                "workers": dict(sorted(group_statuses.items())),
                "rules_firing": dict(sorted(group_fired.items())),
            }
            for group, (seen, group_statuses, group_fired) in sorted(by_group.items())
        },
    }


def qc_section(data: Mapping[str, Any]) -> str:
    """The report's quality-control part, the same for every HIT type."""
    qc = data.get("qc") or {}
    parts = ["<h2>Quality control</h2>"]
    parts.append(
        report_html.table(
            ["Workers", "count"], [[k, str(v)] for k, v in (qc.get("workers") or {}).items()],
            table_id="qc-workers",
        )
    )  # fmt: skip
    parts.append(
        report_html.table(
            ["Rule firing", "workers"],
            [[k, str(v)] for k, v in (qc.get("rules_firing") or {}).items()],
            table_id="qc-rules",
        )
    )
    statuses = ("active", "flagged", "stopped", "excluded")
    group_rows = [
        [
            group,
            ", ".join(entry.get("sources") or []),
            *(str((entry.get("workers") or {}).get(status, 0)) for status in statuses),
            ", ".join(f"{k} ({v})" for k, v in (entry.get("rules_firing") or {}).items()),
        ]
        for group, entry in (qc.get("by_rater_group") or {}).items()
    ]
    parts.append(
        "<p>QC judges every rater group: live workers and the raters of imported answers "
        "alike (a rule with <code>live_only</code> judges live workers only).</p>"
    )
    parts.append(
        report_html.table(
            ["Rater group", "answers", *statuses, "rules firing (workers)"],
            group_rows,
            table_id="qc-groups",
        )
    )
    rows = [
        [
            method,
            report_html.integer(entry.get("n_tasks")),
            report_html.pct(entry.get("gold_accuracy")),
            report_html.pct(entry.get("agreement_with_majority_vote")),
        ]
        for method, entry in (data.get("aggregation") or {}).items()
        if "error" not in entry
    ]
    used = report_html.names(data.get("aggregation_rater_groups"))
    parts.append("<h3>Aggregated labels (filtered set)</h3>")
    parts.append(f"<p>Answers of the rater groups: {report_html.esc(used)}.</p>")
    parts.append(
        report_html.table(
            ["Method", "tasks", "accuracy on gold", "agreement with majority vote"],
            rows,
            table_id="aggregation",
        )
    )
    return "\n".join(parts)


def export(
    session: Session, study: Study, fmt: str, handle: TextIO, filtered: bool, refresh: bool = True
) -> int:
    """Write the study's responses in `fmt`; `filtered` leaves excluded workers out."""
    hit = get_hit_type(study.hit_type)
    if fmt not in hit.export_formats:
        raise ValidationError(
            f"{study.hit_type} studies export as {', '.join(hit.export_formats)}", "format"
        )
    rows, excluded = analysis_rows(session, study, refresh=refresh and filtered)
    if filtered:
        rows = [row for row in rows if not set(row_workers(row)) & excluded]
    return hit.export(rows, fmt, handle)


# -- the report refresh job ----------------------------------------------------------------
def report_job_id(study_id: int) -> str:
    return f"report-{study_id}"


def request_report(connection: redis.Redis, study_id: int) -> Job | None:
    """Enqueue a report refresh unless one is already waiting (refreshes coalesce)."""
    try:
        existing = fetch_job(report_job_id(study_id), connection)
        if existing.get_status(refresh=False) in (JobStatus.QUEUED, JobStatus.DEFERRED):
            return None
    except NoSuchJobError:
        pass
    return job_queue(REPORTS, connection).enqueue(
        refresh_report,
        study_id,
        job_id=report_job_id(study_id),
        job_timeout=REPORT_TIMEOUT,
        result_ttl=3600,
    )


def refresh_report(study_id: int) -> str:
    """RQ job (queue REPORTS, timeout REPORT_TIMEOUT): recompute the study's analysis and
    write its JSON and HTML report.

    The analysis runs in a read-only session, so on SQLite it holds no lock while answers
    keep coming; only storing the result writes. The workers' QC standing it reads was
    refreshed by each response's outbox event (crowd.quality.stats's event handlers).
    """
    ctx = context()
    with ctx.db.read_session() as session:
        computed = compute_report(session, ctx.settings, study_id, refresh=False)
    with ctx.db.session() as session:
        n = store_report(session, computed).responses_seen
    job = get_current_job()
    tag = f"[job {job.id}]" if job else "[inline]"
    log.info("%s refreshed the report of study %s (%d responses)", tag, study_id, n)
    return f"report of study {study_id}: {n} responses"


@after_event(ANY_TOPIC, order=10)
def refresh_after_event(connection: redis.Redis, event: Event) -> None:
    """Every processed event of a study refreshes its report (refreshes coalesce)."""
    study_id = event.payload.get("study_id")
    if study_id is not None:
        request_report(connection, int(study_id))
