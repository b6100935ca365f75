"""Aggregated labels per study (one stored row per method, over the filtered set) and gold
promoted from the agreement of trusted workers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.quality import labels
from crowd.quality import standing as quality
from crowd.review import Reviewer, act
from crowd.storage import (
    AggregatedLabels,
    AuditEntry,
    Database,
    Item,
    ItemKind,
    Response,
    Role,
    Study,
    StudyWorker,
    Worker,
)
from tests.conftest import join, passage

TESTER = Reviewer("tester", Role.EXPERIMENTER)


@pytest.fixture(autouse=True)
def quick_mace(monkeypatch: pytest.MonkeyPatch) -> None:
    """One MACE restart instead of ten: the same code path, seconds faster per fit."""
    import qc.aggregation

    monkeypatch.setattr(qc.aggregation, "MACE_N_RESTARTS", 1)


def next_view(client: FlaskClient, who: dict[str, str], study_id: int) -> dict[str, Any]:
    reply = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
    assert reply.status_code == 200, reply.get_json()
    return reply.get_json()


def guess_boundary(
    client: FlaskClient, who: dict[str, str], study_id: int, guess: int, seconds: float = 20
) -> str:
    """Answer the next boundary item (sentence `guess` is the first machine one); its text."""
    view = next_view(client, who, study_id)
    first = view["task"]["sentences"][0]
    path = f"/api/work/assignments/{view['assignment_id']}/step"
    while "task" in view and not view.get("answered"):
        current = view["task"]["step"]
        body = {
            "step": current,
            "choice": "machine" if current == guess else "human",
            "sim_seconds": seconds,
        }
        view = client.post(path, json=body, headers=who).get_json()
    assert view.get("answered") is True, view
    return first


def stored_rows(db: Database, study_id: int) -> dict[str, dict[str, Any]]:
    with db.session() as session:
        return {
            row.method: row.data
            for row in session.scalars(
                select(AggregatedLabels).where(AggregatedLabels.study_id == study_id)
            )
        }


def worker_id(db: Database, external_id: str) -> int:
    with db.session() as session:
        found = session.scalar(select(Worker.id).where(Worker.external_id == external_id))
        assert found is not None
        return found


# -- aggregation -------------------------------------------------------------------------------
def comparison_item(item_id: str, kind: str = "real", best: int | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": item_id,
        "kind": kind,
        "query": f"Query of {item_id}:",
        "candidates": [f"{item_id}-cand{i} text" for i in range(4)],
    }
    if best is not None:
        record["best"] = best
    return record


def test_every_method_stores_labels_for_every_task_of_a_comparison_study(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    records = [comparison_item(f"c{i}") for i in range(6)]
    records.append(comparison_item("g0", kind="gold", best=2))
    config = {
        "template": "sentiment",
        "overlap_share": 0,
        "annotations_per_item": 5,
        "qc": {"gold": {"min_rate": 1.0, "max_rate": 1.0}},
    }
    study_id = make_study(records, config, hit_type="comparison")
    truth = {f"c{i}": i % 4 for i in range(6)} | {"g0": 2}
    for n in range(5):
        who = join(client, auth, external_id=f"w{n}")
        while not (view := next_view(client, who, study_id)).get("done"):
            item_id = view["task"]["query"].removeprefix("Query of ").rstrip(":")
            # Four workers pick the intended best; w4 is always one off.
            best = truth[item_id] if n < 4 else (truth[item_id] + 1) % 4
            position = view["task"]["candidates"].index(f"{item_id}-cand{best} text")
            reply = client.post(
                f"/api/work/assignments/{view['assignment_id']}/step",
                json={"step": 0, "choice": position},
                headers=who,
            )
            assert reply.status_code == 200
    with db.session() as session:
        assert len(session.scalars(select(Response)).all()) == 35
        study = session.get(Study, study_id)
        assert study is not None
        summary = labels.aggregate_study(session, study)
    methods = {"majority_vote", "dawid_skene", "mace", "bradley_terry"}
    assert set(summary) == methods
    rows = stored_rows(db, study_id)
    assert set(rows) == methods
    tasks = {f"{item}/best" for item in truth}
    for method, data in rows.items():
        assert set(data["labels"]) == tasks, method
        assert data["labels"] == {f"{item}/best": best for item, best in truth.items()}, method
        assert data["n_workers"] == 5 and data["filtered"] is True
        assert data["gold_accuracy"] == 1.0  # g0's label is right
        assert set(data["confidence"]) == tasks
    assert rows["majority_vote"]["agreement_with_majority_vote"] == 1.0
    # The worker who is always one off has the lowest estimated skill.
    skills = rows["dawid_skene"]["skills"]
    assert min(skills, key=skills.get) == "sim:w4"
    # Aggregating again replaces the rows: still one per method.
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        labels.aggregate_study(session, study)
        assert len(session.scalars(select(AggregatedLabels)).all()) == 4


def test_the_filtered_set_leaves_excluded_and_blocked_workers_out(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id = make_study(
        [passage("r1", 2, n=5)],
        {"annotations_per_item": 5, "attention_rate": 0.0, "require_explanation": False},
    )
    guesses = {"a": 2, "b": 2, "c": 3, "d": 3, "e": 3}
    for name, guess in guesses.items():
        guess_boundary(client, join(client, auth, external_id=name), study_id, guess)
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        labels.aggregate_study(session, study, filtered=False)
    full = stored_rows(db, study_id)["majority_vote"]
    assert full["labels"] == {"r1/boundary": 3} and full["n_workers"] == 5
    d, e = worker_id(db, "d"), worker_id(db, "e")
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        act(session, study, d, "soft_reject", TESTER, {"reason": "rushed"})
        act(session, study, e, "block", TESTER, {"reason": "a bot"})
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        summary = labels.aggregate_study(session, study)
    filtered = stored_rows(db, study_id)["majority_vote"]
    assert filtered["labels"] == {"r1/boundary": 2}
    assert filtered["filtered"] is True and filtered["n_workers"] == 3
    assert set(filtered["skills"]) == {"sim:a", "sim:b", "sim:c"}
    assert summary["majority_vote"]["n_workers"] == 3


# -- gold promoted from trusted workers' agreement ---------------------------------------------
def test_items_trusted_workers_agree_on_become_gold(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    items = [passage(f"g{i}", 3, n=4, kind="gold") for i in range(5)]
    items.append(passage("r", 2, n=4))  # the record's own boundary is not what people agree on
    config = {
        "annotations_per_item": 4,
        "attention_rate": 0.0,
        "require_explanation": False,
        "qc": {"gold": {"min_rate": 1.0, "max_rate": 1.0}},
    }
    study_id = make_study(items, config)
    for name, right in (("t1", True), ("t2", True), ("t3", True), ("u", False)):
        who = join(client, auth, external_id=name)
        for _ in range(5):  # gold first, at every chance: all five gold items
            first = guess_boundary(client, who, study_id, 3 if right else 1)
            assert first.startswith("g")
        assert guess_boundary(client, who, study_id, 3 if right else 1).startswith("r ")
        assert next_view(client, who, study_id)["done"] is True
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        quality.refresh_study(session, study)
    with db.session() as session:
        evidence = {
            worker.external_id: row.evidence
            for row, worker in session.execute(
                select(StudyWorker, Worker).join(Worker, Worker.id == StudyWorker.worker_id)
            )
        }
        study = session.get(Study, study_id)
        assert study is not None
        assert labels.trusted_workers(session, study) == {"sim:t1", "sim:t2", "sim:t3"}
    assert evidence["t1"]["gold_n"] == 5 and evidence["t1"]["gold_mean"] >= 0.8
    assert evidence["u"]["gold_accuracy"] == 0.0

    def item_r() -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
        with db.session() as session:
            item = session.scalars(select(Item).where(Item.external_id == "r")).one()
            flags = [
                r.qc_flags
                for r in session.scalars(
                    select(Response).where(Response.item_id == item.id).order_by(Response.id)
                )
            ]
            return str(item.kind), dict(item.expected), flags

    def promotions() -> list[AuditEntry]:
        with db.session() as session:
            entries = list(
                session.scalars(select(AuditEntry).where(AuditEntry.action == "promote_gold"))
            )
            session.expunge_all()
            return entries

    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        assert labels.promote(session, study, dry_run=True) == {"r": {"boundary": 3}}
        assert labels.promote(session, study, min_agreeing=4, dry_run=True) == {}
    kind, expected, flags = item_r()
    assert kind == ItemKind.REAL and expected == {"boundary": 2}
    assert all("gold_accuracy" not in f for f in flags)
    assert promotions() == []

    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        assert labels.promote(session, study) == {"r": {"boundary": 3}}
    kind, expected, flags = item_r()
    assert kind == ItemKind.GOLD and expected == {"boundary": 3}
    # The three trusted workers guessed 3 (exact), u guessed 1 (early: no points).
    assert [f["gold_accuracy"] for f in flags] == [1.0, 1.0, 1.0, 0.0]
    with db.session() as session:  # its tally, which easy gold first serves by, waits for
        tally = session.execute(  # the next QC refresh, which weighs each reader
            select(Item.gold_weight, Item.gold_right).where(Item.external_id == "r")
        ).one()
    assert tuple(tally) == (0.0, 0.0)
    entries = promotions()
    assert len(entries) == 1
    assert entries[0].actor == "system" and entries[0].study_id == study_id
    assert entries[0].details == {"item": "r", "expected": {"boundary": 3}}
    # The promoted item now counts as gold in the workers' records.
    t1 = worker_id(db, "t1")
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        assert quality.gold_results(session, t1, study) == [1.0] * 6
        # Nothing real is left to promote.
        assert labels.promote(session, study) == {}
        # The next refresh counts its answers in its tally: the three who read, u at chance.
        quality.refresh_study(session, study)
        weight, right = session.execute(
            select(Item.gold_weight, Item.gold_right).where(Item.external_id == "r")
        ).one()
    assert weight > 1 and right == pytest.approx(weight, abs=1e-3)
