"""What a study has on the crowd platforms, as the API and the CLI show it: its
publications with their remote tasks, and the platform calls made or pending."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.storage import PlatformAction, Publication, RemoteTask, Study


def publications(session: Session, study: Study) -> list[dict[str, Any]]:
    rows = session.scalars(
        select(Publication).where(Publication.study_id == study.id).order_by(Publication.id)
    ).all()
    out = []
    for row in rows:
        tasks = session.scalars(
            select(RemoteTask).where(RemoteTask.publication_id == row.id).order_by(RemoteTask.id)
        ).all()
        out.append(
            {
                "id": row.id,
                "provider": row.provider,
                "options": row.options,
                "remote": row.remote,
                "created_at": row.created_at.isoformat(),
                "tasks": [
                    {
                        "remote_id": task.remote_id,
                        "places": task.places,
                        "status": str(task.status),
                        "expires_at": task.expires_at.isoformat() if task.expires_at else None,
                        "synced_at": task.synced_at.isoformat() if task.synced_at else None,
                    }
                    for task in tasks
                ],
            }
        )
    return out


def actions(session: Session, study: Study, limit: int = 200) -> list[dict[str, Any]]:
    rows = session.scalars(
        select(PlatformAction)
        .where(PlatformAction.study_id == study.id)
        .order_by(PlatformAction.id.desc())
        .limit(limit)
    ).all()
    return [
        {
            "id": row.id,
            "provider": row.provider,
            "action": row.action,
            "worker_id": row.worker_id,
            "status": str(row.status),
            "attempts": row.attempts,
            "last_error": row.last_error,
            "created_at": row.created_at.isoformat(),
            "done_at": row.done_at.isoformat() if row.done_at else None,
        }
        for row in rows
    ]
