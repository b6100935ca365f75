"""Platform workers on our page: a platform session (an MTurk assignment, a Prolific
submission) bound to a worker of ours, and how its finished work goes back to the platform
(a signed form for MTurk, a completion code for Prolific)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from crowd.exceptions import AuthenticationError, NotFound, PermissionDenied
from crowd.platforms.providers import PROVIDERS
from crowd.platforms.providers.base import Binding
from crowd.security import WorkerSigner
from crowd.settings import Settings
from crowd.storage import (
    Assignment,
    PlatformSession,
    RemoteTask,
    Response,
    SessionState,
    Study,
    Worker,
)

# Form field of the MTurk page that carries the session's answers, signed by us, so an
# answer can be recovered from MTurk's Answer XML if our own record of it is lost.
ANSWERS_FIELD = "crowd_answers"

CODE_FIELD = "crowd_code"


@dataclass(frozen=True)
class PageBinding:
    """A platform worker on our page: the worker token the page sends, or a preview."""

    preview: bool
    worker_id: int | None = None
    session_id: int | None = None
    token: str | None = None


def bind_page(
    session: Session,
    settings: Settings,
    signer: WorkerSigner,
    study: Study,
    provider_name: str,
    args: Mapping[str, str],
) -> PageBinding:
    """Tie the platform's query parameters to a worker and a platform session of ours."""
    provider = PROVIDERS.get(provider_name)
    if not provider.external_page or provider_name not in study.providers:
        raise NotFound(f"study {study.id} is not published to {provider_name}")
    binding = provider.bind(args, settings)
    if binding is None:
        return PageBinding(preview=True)
    task = session.scalar(
        select(RemoteTask).where(
            RemoteTask.provider == provider_name, RemoteTask.remote_id == binding.task_remote_id
        )
    )
    if task is None or task.study_id != study.id:
        raise NotFound(f"{binding.task_remote_id} is not one of study {study.id}'s tasks")
    from crowd.work.assignments import get_or_create_worker

    worker = get_or_create_worker(session, provider_name, binding.worker_external_id)
    row = session.scalar(
        select(PlatformSession)
        .where(
            PlatformSession.provider == provider_name,
            PlatformSession.remote_id == binding.session_remote_id,
        )
        .with_for_update()
    )
    if row is None:
        # The platform limits how many workers hold a task at once; a page opened with
        # made-up assignment ids beyond that (with some slack for returned places that a
        # sync has not seen yet) is refused, so forged sessions cannot fill the study.
        holding = session.scalar(
            select(func.count(PlatformSession.id)).where(
                PlatformSession.remote_task_id == task.id,
                PlatformSession.state == SessionState.OPEN,
            )
        )
        if (holding or 0) >= 2 * task.places + 2:
            raise PermissionDenied(
                "this task has no open place: accept it on the platform, or try again later"
            )
        row = PlatformSession(
            study_id=study.id,
            worker_id=worker.id,
            remote_task_id=task.id,
            provider=provider_name,
            remote_id=binding.session_remote_id,
            submit_to=binding.submit_to,
        )
        session.add(row)
        try:
            with session.begin_nested():
                session.flush()
        except IntegrityError:
            # The same page loaded twice at once (PostgreSQL): the other request made it.
            row = session.scalar(
                select(PlatformSession).where(
                    PlatformSession.provider == provider_name,
                    PlatformSession.remote_id == binding.session_remote_id,
                )
            )
            if row is None:
                raise
    if row.worker_id != worker.id or row.remote_task_id != task.id:
        # Someone else's assignment id in the address: refuse rather than mix their work.
        raise PermissionDenied("this assignment belongs to another worker or task")
    return PageBinding(
        preview=False,
        worker_id=worker.id,
        session_id=row.id,
        token=signer.sign(worker.id, row.id),
    )


def load_session(session: Session, session_id: int, worker_id: int) -> PlatformSession:
    row = session.get(PlatformSession, session_id)
    if row is None or row.worker_id != worker_id:
        raise AuthenticationError("this platform session is not yours: reload the task page")
    return row


def completion(
    session: Session, settings: Settings, signer: WorkerSigner, row: PlatformSession
) -> dict[str, Any] | None:
    """How the page hands the session's work to the platform, once answers are stored.

    None while the session has no stored answer: there is nothing to submit, and the
    worker should return the task on the platform.
    """
    stored = session.scalars(
        select(Response)
        .join(Assignment, Assignment.id == Response.assignment_id)
        .where(Assignment.platform_session_id == row.id)
        .order_by(Response.id)
    ).all()
    if not stored:
        return None
    provider = PROVIDERS.get(row.provider)
    if row.completion_code is None:
        row.completion_code = provider_code(settings, row)
    worker = session.get(Worker, row.worker_id)
    task = session.get(RemoteTask, row.remote_task_id)
    binding = Binding(
        worker_external_id=worker.external_id if worker else "",
        session_remote_id=row.remote_id,
        task_remote_id=task.remote_id if task else "",
        submit_to=row.submit_to,
    )
    handover = provider.completion(settings, binding, row.completion_code)
    if handover.get("kind") == "form":
        # Our own item ids: they mean nothing to the worker (external ids might).
        records = [
            {
                "item": response.item_id,
                "answer": response.answer,
                "explanation": response.explanation,
                "reasons": response.reasons,
            }
            for response in stored
        ]
        handover["fields"] = {
            **handover.get("fields", {}),
            CODE_FIELD: row.completion_code,
            ANSWERS_FIELD: signer.sign_record(
                {"study": row.study_id, "session": row.remote_id, "responses": records}
            ),
        }
    handover["items_done"] = len(stored)
    return handover


def provider_code(settings: Settings, row: PlatformSession) -> str:
    """The completion code of a session: derived from our secret, so it cannot be guessed."""
    digest = hmac.new(
        settings.secret_key.encode(), f"{row.provider}:{row.remote_id}".encode(), hashlib.sha256
    ).hexdigest()
    return "C" + digest[:11].upper()
