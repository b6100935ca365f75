"""The floor for benchmarks/submit_rps.py: the answer path with the minimal honest work.

Flask and SQLAlchemy Core over crowd's own tables and crowd's engine settings (the same
pool, and BEGIN IMMEDIATE on SQLite), served by the same gunicorn config, and driven by the
same client as crowd (next, reveal step, store step). Each request checks the worker's
signed token and does in one transaction only what its guarantees need:

* next: the worker's row locked, their open assignment or a free item taken (its holder
  counter raised under a lock, SKIP LOCKED on PostgreSQL) and an assignment added;
* reveal: the assignment locked and its progress moved on;
* store: the assignment locked, the response inserted, the assignment submitted and the
  outbox row inserted, then commit.

No QC, no HIT-type logic, no validation beyond what keeps the data right: what crowd does
beyond this is the price of its features, and the benchmark shows it as the ratio.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from datetime import UTC, datetime
from typing import Any

from flask import Flask, abort, jsonify, request
from sqlalchemy import func, insert, select, update

from crowd.storage import Database
from crowd.storage.outbox import OutboxEvent
from crowd.storage.work import Assignment, Item, Response, Worker

app = Flask(__name__)
SECRET = os.environ.get("FLOOR_SECRET", "").encode()
db = Database(os.environ.get("CROWD_DATABASE_URL", "sqlite://"))
ASSIGNMENTS, ITEMS = Assignment.__table__, Item.__table__
RESPONSES, OUTBOX, WORKERS = Response.__table__, OutboxEvent.__table__, Worker.__table__


def token_for(worker_id: int, secret: bytes) -> str:
    """A worker token: the id and its HMAC-SHA256 under the server's secret."""
    mac = hmac.new(secret, str(worker_id).encode(), hashlib.sha256).hexdigest()
    return f"{worker_id}.{mac}"


def worker_id() -> int:
    """The worker the request's token names; 401 unless its signature is right."""
    raw = request.headers.get("X-Crowd-Worker", "")
    who, _, mac = raw.partition(".")
    if not who.isdigit() or not hmac.compare_digest(token_for(int(who), SECRET), raw):
        abort(401)
    return int(who)


def now() -> datetime:
    return datetime.now(UTC)


@app.get("/healthz")
def healthz() -> Any:
    return jsonify(ok=True)


@app.post("/api/work/studies/<int:study_id>/next")
def next_item(study_id: int) -> Any:
    worker = worker_id()
    with db.engine.begin() as conn:
        locked = conn.execute(
            select(WORKERS.c.id, ASSIGNMENTS.c.id, ASSIGNMENTS.c.progress)
            .select_from(WORKERS)
            .outerjoin(
                ASSIGNMENTS,
                (ASSIGNMENTS.c.worker_id == WORKERS.c.id)
                & (ASSIGNMENTS.c.study_id == study_id)
                & (ASSIGNMENTS.c.state == "assigned"),
            )
            .where(WORKERS.c.id == worker)
            .limit(1)
            .with_for_update(of=WORKERS)
        ).first()
        if locked is None:
            abort(401)
        if locked[1] is not None:  # the open one, where the worker left it
            return jsonify(assignment_id=locked[1], task={"step": locked[2]["step"]})
        free = (
            select(ITEMS.c.id)
            .where(ITEMS.c.study_id == study_id, ITEMS.c.kind == "real",
                   ITEMS.c.holders < func.coalesce(ITEMS.c.target, 1))
            .order_by(ITEMS.c.id)
            .limit(1)
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )  # fmt: skip
        item = conn.execute(
            update(ITEMS)
            .where(ITEMS.c.id == free)
            .values(holders=ITEMS.c.holders + 1)
            .returning(ITEMS.c.id)
        ).scalar()
        if item is None:
            return jsonify(done=True)
        assignment = conn.execute(
            insert(ASSIGNMENTS)
            .values(study_id=study_id, item_id=item, worker_id=worker, provider="sim",
                    state="assigned", progress={"step": 0}, events=[], created_at=now(),
                    updated_at=now())
            .returning(ASSIGNMENTS.c.id)
        ).scalar_one()  # fmt: skip
    return jsonify(assignment_id=assignment, task={"step": 0})


@app.post("/api/work/assignments/<int:assignment_id>/step")
def step(assignment_id: int) -> Any:
    worker = worker_id()
    body = request.get_json(silent=True) or {}
    wanted = body.get("step")
    if not isinstance(wanted, int) or body.get("choice") not in ("human", "machine"):
        abort(422)
    with db.engine.begin() as conn:
        row = conn.execute(
            select(ASSIGNMENTS.c.item_id, ASSIGNMENTS.c.study_id, ASSIGNMENTS.c.state,
                   ASSIGNMENTS.c.progress)
            .where(ASSIGNMENTS.c.id == assignment_id, ASSIGNMENTS.c.worker_id == worker)
            .with_for_update()
        ).first()  # fmt: skip
        if row is None:
            abort(404)
        item, study, state, progress = row
        if state != "assigned" or wanted != progress.get("step"):
            abort(409)
        if body["choice"] == "human":
            conn.execute(
                update(ASSIGNMENTS)
                .where(ASSIGNMENTS.c.id == assignment_id)
                .values(progress={"step": wanted + 1}, updated_at=now())
            )
            return jsonify(task={"step": wanted + 1})
        response = conn.execute(
            insert(RESPONSES)
            .values(assignment_id=assignment_id, study_id=study, item_id=item, worker_id=worker,
                    answer={"guess": wanted}, events=[], reasons=[], qc_flags={},
                    source="live", created_at=now())
            .returning(RESPONSES.c.id)
        ).scalar_one()  # fmt: skip
        conn.execute(
            update(ASSIGNMENTS)
            .where(ASSIGNMENTS.c.id == assignment_id)
            .values(state="submitted", submitted_at=now(), updated_at=now())
        )
        conn.execute(
            insert(OUTBOX).values(topic="response.stored", payload={"response_id": response},
                                  created_at=now(), attempts=0)
        )  # fmt: skip
    return jsonify(answered=True, task={"step": wanted})
