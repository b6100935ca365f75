"""Exports and report refreshes, as the API and the dashboard both serve them."""

from __future__ import annotations

import io
from typing import Any

from flask import Response
from sqlalchemy.orm import Session

from crowd.context import platform
from crowd.storage import Study
from crowd.studies.reports import export as export_rows

EXPORT_TYPES = {
    "jsonl": "application/x-ndjson",
    "csv": "text/csv",
    "roft": "text/csv",
    "pairwise": "application/x-ndjson",
    "kway": "application/x-ndjson",
}


def export_download(session: Session, study: Study, fmt: str, filtered: bool) -> Response:
    """The study's responses as a file to download. It reads the QC standing the queue jobs
    keep current: a GET writes nothing."""
    buffer = io.StringIO()
    export_rows(session, study, fmt, buffer, filtered=filtered, refresh=False)
    media = EXPORT_TYPES[fmt]
    extension = "csv" if media == "text/csv" else "jsonl"
    part = "-filtered" if filtered else ""
    disposition = f"attachment; filename=study-{study.id}-{fmt}{part}.{extension}"
    return Response(buffer.getvalue(), mimetype=media, headers={"Content-Disposition": disposition})


def refresh_report(study_id: int) -> tuple[dict[str, Any], int]:
    """Refresh a study's report: on the queue when there is one (202), here and now
    otherwise (201)."""
    from crowd.studies.reports import build_report
    from crowd.studies.reports import request_report as enqueue_report

    connection = platform().redis
    if connection is not None:
        job = enqueue_report(connection, study_id)
        return {"queued": True, "job_id": job.id if job else None}, 202
    with platform().db.session() as session:
        report = build_report(session, platform().settings, study_id)
        return {"queued": False, "updated_at": report.updated_at.isoformat()}, 201
