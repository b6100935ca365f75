"""The outbox and the RQ jobs: nothing is lost when Redis goes away, jobs run twice safely."""

from __future__ import annotations

import ast
import json
import signal
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import func, select

from crowd.app import create_app
from crowd.plugins import load_features
from crowd.quality import standing as quality_standing
from crowd.queue import EVENTS, SERIALIZER, event_job_id, fetch_job, job_queue
from crowd.queue.embedded import EmbeddedRedis
from crowd.queue.hooks import after_commit_handlers, in_transaction_handlers, sweeps
from crowd.queue.jobs import configure, process_event
from crowd.queue.runner import run_worker
from crowd.settings import Settings
from crowd.storage import (
    AuditEntry,
    Database,
    OutboxEvent,
    Report,
    Response,
    StudyWorker,
    Worker,
)
from crowd.storage.outbox import RESPONSE_STORED, WORKER_BLOCKED
from tests.conftest import join, passage
from tests.crowd.quality.test_standing import ROFT_RULES
from tests.crowd.work.test_assignments import play


def test_responses_survive_a_redis_outage(
    tmp_path: Path, settings: Settings, db: Database, api_key: str, make_study: Any
) -> None:
    embedded = EmbeddedRedis(tmp_path / "r")
    embedded.start()
    try:
        settings = replace(settings, redis_url=embedded.url)
        app = create_app(settings)
        client = app.test_client()
        auth = {"Authorization": f"Bearer {api_key}"}
        study_id = make_study(
            [passage(f"p{i}", 2, n=3) for i in range(6)], {"annotations_per_item": 1}
        )
        who = join(client, auth)
        for _ in range(2):
            assert "feedback" in play(client, who, study_id, guess=3)
        assert job_queue(EVENTS, redis.Redis.from_url(embedded.url)).count == 2

        embedded.stop()  # Redis goes away mid-run: the answers are still stored
        for _ in range(3):
            assert "feedback" in play(client, who, study_id, guess=3)

        embedded.start()  # back, but empty: it kept nothing on disk
        assert job_queue(EVENTS, redis.Redis.from_url(embedded.url)).count == 0
        with db.session() as session:
            assert session.scalar(select(func.count(OutboxEvent.id))) == 5
        run_worker(settings, burst=True)
        with db.session() as session:
            pending = session.scalar(
                select(func.count(OutboxEvent.id)).where(OutboxEvent.processed_at.is_(None))
            )
            worker = session.scalars(select(Worker)).one()
            report = session.scalars(select(Report)).one()
        assert pending == 0
        assert worker.stats[str(study_id)]["responses"] == 5
        assert report.data["full"]["n_annotations"] == 5
        app.extensions["crowd"].db.dispose()
    finally:
        embedded.stop()


def test_process_event_is_idempotent(
    settings: Settings, client: Any, auth: dict[str, str], make_study: Any, db: Database
) -> None:
    study_id = make_study(
        [passage("a", 2, n=3), passage("att", 3, n=3, kind="attention")],
        {"annotations_per_item": 1, "attention_rate": 0.5, "qc": {"rules": ROFT_RULES}},
    )
    who = join(client, auth)
    play(client, who, study_id, guess=2)
    play(client, who, study_id, guess=2)
    configure(settings)
    with db.session() as session:
        events = session.execute(select(OutboxEvent.id, OutboxEvent.topic)).all()
    # Each answer, then its explanation (which brings its own QC signals).
    assert [topic for _, topic in events] == ["response.stored", "response.explained"] * 2
    ids = [event_id for event_id, _ in events]
    for event_id in ids:
        assert process_event(event_id).startswith("processed")
        assert "already processed" in process_event(event_id)
    with db.session() as session:
        worker = session.scalars(select(Worker)).one()
    assert worker.stats[str(study_id)]["attention_failed"] == 1
    assert worker.stats[str(study_id)]["responses"] == 2
    assert worker.qc_flags["attention_failed"] == {str(study_id): 1}
    with db.session() as session:
        standing = session.scalars(select(StudyWorker)).one()
        audits = session.scalars(select(AuditEntry)).all()
    # The failed check soft-blocks the worker, and the same explanation on both items flags
    # them, once each however often the events are replayed.
    assert standing.excluded_by == "rule:attention_failed"
    assert sorted((a.actor, a.action) for a in audits) == [
        ("rule:attention_failed", "soft_block"),
        ("rule:repeated_explanations", "flag"),
    ]


def count_refreshes(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The workers of each QC refresh pass from now on, in order."""
    refreshed: list[list[int]] = []
    real_refresh = quality_standing.refresh_standings

    def counting(session: Any, study: Any, worker_ids: list[int]) -> Any:
        refreshed.append(list(worker_ids))
        return real_refresh(session, study, worker_ids)

    monkeypatch.setattr(quality_standing, "refresh_standings", counting)
    return refreshed


@pytest.mark.parametrize("order", ["as stored", "last first"])
def test_a_burst_of_answers_the_queue_is_behind_on_is_refreshed_once(
    settings: Settings,
    client: Any,
    auth: dict[str, str],
    make_study: Any,
    db: Database,
    monkeypatch: pytest.MonkeyPatch,
    order: str,
) -> None:
    """Three answers, each explained, before the queue gets to any: the first event's refresh
    reads all three answers and their explanations, so the other five events skip theirs;
    the worker's numbers and standing count all three in either order."""
    study_id = make_study([passage(f"p{i}", 2, n=3) for i in range(3)],
                          {"annotations_per_item": 1, "attention_rate": 0.0})  # fmt: skip
    who = join(client, auth)
    for _ in range(3):
        play(client, who, study_id, guess=2)
    refreshed = count_refreshes(monkeypatch)
    configure(settings)
    with db.session() as session:
        events = session.execute(select(OutboxEvent.id, OutboxEvent.topic)).all()
    assert [topic for _, topic in events] == ["response.stored", "response.explained"] * 3
    ids = [event_id for event_id, _ in events]
    for event_id in ids if order == "as stored" else ids[::-1]:
        assert process_event(event_id).startswith("processed")
    assert len(refreshed) == 1  # 6 events, one refresh each without the skip
    with db.session() as session:
        worker = session.scalars(select(Worker)).one()
        standing = session.scalars(select(StudyWorker)).one()
        last = session.scalar(select(func.max(Response.id)))
    assert worker.stats[str(study_id)]["responses"] == 3
    assert standing.evidence["responses"] == 3 and standing.refreshed_through == last


def test_an_explanation_stored_after_its_answer_was_read_is_read_too(
    settings: Settings,
    client: Any,
    auth: dict[str, str],
    make_study: Any,
    db: Database,
) -> None:
    """The answer's refresh ran before the explanation came: the explanation moves the mark
    back, so its event refreshes (and finds the pasted text) instead of being skipped; and a
    refresh that read before the explanation came does not move the mark past it."""
    from tests.crowd.work.test_assignments import start, step

    study_id = make_study([passage(f"p{i}", 2, n=3) for i in range(2)],
                          {"annotations_per_item": 1, "attention_rate": 0.0})  # fmt: skip
    who = join(client, auth)
    view = start(client, who, study_id)
    view = step(client, who, step(client, who, view, "human").get_json(), "machine").get_json()
    assert view["needs_followup"]
    configure(settings)
    with db.session() as session:
        stored = session.scalars(select(OutboxEvent.id)).one()
    assert process_event(stored).startswith("processed")
    with db.session() as session:
        answer = session.scalars(select(Response)).one()
        assert session.scalars(select(StudyWorker)).one().refreshed_through == answer.id
    typed = {"explanation": "Pasted words, all of them at once.", "reasons": ["other"],
             "typing": {"keys": 0, "pastes": 1, "pasted_chars": 34, "typing_ms": 50}}  # fmt: skip
    reply = client.post(f"/api/work/assignments/{view['assignment_id']}/explanation",
                        json=typed, headers=who)  # fmt: skip
    assert reply.status_code == 200, reply.get_json()
    with db.session() as session:
        row = session.scalars(select(StudyWorker)).one()
        assert row.refreshed_through == answer.id - 1
        explained = session.scalars(select(OutboxEvent.id).where(OutboxEvent.id != stored)).one()
    assert process_event(explained).startswith("processed")
    with db.session() as session:
        row = session.scalars(select(StudyWorker)).one()
        assert row.refreshed_through == answer.id
        assert row.evidence["pasted_n"] == 1


def test_one_refresh_reads_every_worker_the_queue_is_behind_on(
    settings: Settings,
    client: Any,
    auth: dict[str, str],
    make_study: Any,
    db: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three workers answer before the queue gets to any: the first event's refresh judges
    all three (the crowd fitted once), so the other two answers' events skip theirs, and
    each worker's standing counts their answer."""
    study_id = make_study([passage(f"p{i}", 2, n=3) for i in range(3)],
                          {"annotations_per_item": 1, "attention_rate": 0.0})  # fmt: skip
    for name in ("ann", "bob", "cy"):
        play(client, join(client, auth, external_id=name), study_id, guess=2)
    refreshed = count_refreshes(monkeypatch)
    configure(settings)
    with db.session() as session:
        stored = session.scalars(
            select(OutboxEvent.id).where(OutboxEvent.topic == RESPONSE_STORED)
        ).all()
        workers = session.scalars(select(Worker.id).order_by(Worker.id)).all()
    for event_id in stored:
        assert process_event(event_id).startswith("processed")
    assert refreshed == [workers]  # the first answer's worker first, then the others
    with db.session() as session:
        marks = dict(session.execute(select(StudyWorker.worker_id,
                                            StudyWorker.refreshed_through)).all())  # fmt: skip
        latest = dict(session.execute(select(Response.worker_id, Response.id)).all())
        standings = session.scalars(select(StudyWorker)).all()
    assert marks == latest
    assert all(row.evidence["responses"] == 1 for row in standings)


def test_embedded_redis_starts_and_stops_cleanly(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "r") as server:
        pid = server.process.pid if server.process else None
        assert redis.Redis.from_url(server.url).ping()
    assert not server.running and not server.socket.exists()
    assert pid is not None and not Path(f"/proc/{pid}").exists()


def test_jobs_are_stored_as_json(
    settings: Settings, client: Any, auth: dict[str, str], make_study: Any, db: Database
) -> None:
    study_id = make_study([passage("a", 2, n=3)], {"annotations_per_item": 1})
    play(client, join(client, auth), study_id, guess=2)
    with db.session() as session:
        event_id = session.scalars(select(OutboxEvent.id).order_by(OutboxEvent.id)).first()
    connection = redis.Redis.from_url(settings.redis_url or "")
    # RQ keeps the call zlib-compressed in the job hash; JSON underneath, not a pickle.
    raw = connection.hget(f"rq:job:{event_job_id(int(event_id or 0))}", "data")
    assert isinstance(raw, bytes)
    function, instance, args, kwargs = json.loads(zlib.decompress(raw))
    assert (function, instance, args, kwargs) == (
        "crowd.queue.jobs.process_event",
        None,
        [event_id],
        {},
    )
    assert fetch_job(event_job_id(int(event_id or 0)), connection).serializer is SERIALIZER


RQ_CALLS = {"Queue", "SimpleWorker", "Worker", "Job.fetch", "Job.fetch_many", "Job.create"}


def test_every_queue_worker_and_job_fetch_uses_the_json_serializer() -> None:
    """A Queue, Worker or Job.fetch made without `serializer=` would pickle (or fail to read)
    jobs: everything goes through crowd.queue's helpers, which pass SERIALIZER."""
    root = Path(__file__).resolve().parents[3]
    offenders = []
    for path in sorted((*root.glob("crowd/**/*.py"), *root.glob("tasks/**/*.py"))):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        from_rq = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "rq"
            for alias in node.names
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            if name.split(".")[0] not in from_rq or name not in RQ_CALLS:
                continue
            if not any(keyword.arg == "serializer" for keyword in node.keywords):
                offenders.append(f"{path.relative_to(root)}:{node.lineno} {name}(...)")
    assert offenders == []


def test_event_handlers_run_in_their_documented_order() -> None:
    """The QC refresh first, then the webhooks (which must see the blocks its rules made),
    then the Scale completion; after the commit, judging before the report refresh."""
    load_features()

    def names(handlers: list[Any]) -> list[str]:
        return [f"{handler.__module__}.{handler.__qualname__}" for handler in handlers]

    assert names(in_transaction_handlers(RESPONSE_STORED)) == [
        "crowd.quality.stats.refresh_after_answer",
        "crowd.delivery.webhooks.emit_after_response",
        "crowd.scale.completion.settle_after_response",
    ]
    assert names(in_transaction_handlers(WORKER_BLOCKED)) == [
        "crowd.delivery.webhooks.emit_after_block",
        "crowd.scale.completion.settle_after_block",
    ]
    assert names(after_commit_handlers(RESPONSE_STORED)) == [
        "crowd.studies.reports.refresh_after_event",
        "crowd.ml.reward.retrain_after_labels",
    ]
    assert [sweep.name for sweep in sweeps()][-2:] == ["taboo-games", "stale-assignments"]


def test_a_burst_gives_the_signal_handlers_it_found_back(settings: Settings, db: Database) -> None:
    # RQ's worker puts its own SIGINT and SIGTERM handlers in; left there, a later SIGTERM to
    # the program (a test run stopped by `timeout`) raised RQ's StopRequested wherever it was.
    def ours(signum: int, frame: Any) -> None:  # pragma: no cover - never signalled
        raise AssertionError("not called")

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGTERM, ours)
        run_worker(settings, burst=True)  # RQ's worker.work runs once, with nothing to do
        assert signal.getsignal(signal.SIGTERM) is ours
        assert signal.getsignal(signal.SIGINT) is before[signal.SIGINT]
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
