"""Agreement with the crowd and collusion as QC evidence, through the worker API: workers who
read at a human pace and pass every attention check, but answer at random or copy one shared
answer, are excluded by the rules that compare them with the crowd, naming the group; careful
workers are left alone."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from crowd.quality import exclusion
from crowd.quality import standing as quality
from crowd.queue.jobs import configure, process_event
from crowd.settings import Settings
from crowd.storage import (
    AuditEntry,
    Database,
    Item,
    OutboxEvent,
    Response,
    Serving,
    Study,
    StudyWorker,
    Worker,
)
from tasks.comparison import hit as comparison_hit
from tests.conftest import join
from tests.crowd.queue.test_queue import count_refreshes

ITEMS = 36
CAREFUL = [f"careful{n}" for n in range(7)]
RING = ["ring0", "ring1", "ring2"]


def items() -> list[dict[str, Any]]:
    return [
        {"id": f"q{i}", "query": f"Question {i}: which reply is kind?",
         "candidates": [f"reply {i}.{c} {'(kind)' if c == i % 4 else ''}".strip()
                        for c in range(4)]}
        for i in range(ITEMS)
    ]  # fmt: skip


Pick = Callable[[list[str], str], int]


def answer(client: FlaskClient, who: dict[str, str], study_id: int, pick: Pick) -> bool:
    view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
    if view.get("done"):
        return False
    task = view["task"]
    texts = [c["text"] if isinstance(c, dict) else c for c in task["candidates"]]
    body = {"step": task["step"], "choice": pick(texts, task["query"]), "sim_seconds": 20.0}
    reply = client.post(f"/api/work/assignments/{view['assignment_id']}/step", json=body,
                        headers=who)  # fmt: skip
    assert reply.status_code == 200, reply.get_json()
    return True


def test_random_clickers_and_a_ring_are_excluded_by_the_crowd_rules(
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = {"annotations_per_item": 11, "attention_rate": 0.0, "overlap_share": 0}
    study_id = make_study(items(), config, hit_type="comparison")
    rng = random.Random(8)
    # The display orders too, drawn by the server from the system's randomness: otherwise the
    # random clicker's record varies from run to run, and one in ten or so agrees with the
    # crowd enough to leave the stopped-reading posterior short of its bar (the crowd's
    # agreement rule then excludes them instead).
    monkeypatch.setattr(comparison_hit._ORDER_RANDOM, "shuffle", random.Random(3).shuffle)
    shared: dict[str, str] = {}
    workers = {name: join(client, auth, external_id=name) for name in [*CAREFUL, *RING, "random"]}

    def careful(texts: list[str], query: str) -> int:
        kind = next(i for i, t in enumerate(texts) if t.endswith("(kind)"))
        return kind if rng.random() < 0.85 else rng.randrange(4)

    def ring(texts: list[str], query: str) -> int:
        return texts.index(shared.setdefault(query, rng.choice(texts)))

    for _ in range(ITEMS):  # rounds: everyone answers one item per round
        for name, who in workers.items():
            pick = careful if name in CAREFUL else ring if name in RING else (
                lambda texts, query: rng.randrange(4))  # fmt: skip
            answer(client, who, study_id, pick)
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        quality.refresh_study(session, study)
    with db.session() as session:
        rows = {
            name: row
            for row, name in session.execute(
                select(StudyWorker, Worker.external_id).join(
                    Worker, Worker.id == StudyWorker.worker_id
                )  # fmt: skip
            ).all()
        }
        ids = {name: str(row.worker_id) for name, row in rows.items()}
        for name in RING:
            assert rows[name].excluded_by == "rule:collusion", name
            assert rows[name].evidence["collusion_group"] == sorted(ids[n] for n in RING)
        # Random from the start: the stopped-reading posterior (earlier in the rule order)
        # and the whole record's agreement both convict.
        random_ = rows["random"].evidence
        assert rows["random"].excluded_by == "rule:stopped_reading", random_
        assert random_["stopped_reading_prob"] >= 0.99 and random_["stopped_reading_since"] == 0
        assert random_["agreement_below_prob"] >= 0.95
        assert rows["random"].evidence["agreement_chance"] is not None
        for name in CAREFUL:
            assert rows[name].excluded_by is None, (name, rows[name].rule_hits)
            assert rows[name].evidence["agreement"] > rows[name].evidence["agreement_threshold"]
        reasons = session.scalars(
            select(AuditEntry.reason).where(AuditEntry.actor == "rule:collusion")
        ).all()
        assert len(reasons) == 3 and all("shares answers with 2 other" in r for r in reasons)
        # The rules' exclusions ask for the excluded answers again: one more per answer.
        left_out = [rows[name].worker_id for name in [*RING, "random"]]
        wanted = session.execute(
            select(Item.target, Item.replaced, func.count(Response.id))
            .join(Response, Response.item_id == Item.id)
            .where(Item.study_id == study_id, Response.worker_id.in_(left_out))
            .group_by(Item.id)
        ).all()
        assert wanted and all(target == 11 + n and replaced == n for target, replaced, n in wanted)
    # Reviewers sort by the accuracy against the crowd: the guessers first, named as such.
    reply = client.get(f"/api/studies/{study_id}/workers?sort=agreement", headers=auth)
    table = reply.get_json()["workers"]
    names = [row["worker"].split(":", 1)[1] for row in table]
    assert set(names[:4]) == {*RING, "random"}, names
    for row in table[:4]:
        assert row["agreement"] < row["agreement_threshold"] and row["agreement_n"] >= 8
    assert [row["collusion_partners"] for row in table if row["worker"].endswith("ring0")] == [2]
    (random_row,) = [row for row in table if row["worker"].endswith(":random")]
    assert random_row["stopped_reading_prob"] >= 0.99
    assert all(row["stopped_reading_prob"] < 0.99 for row in table if "careful" in row["worker"])


def test_the_answers_of_an_excluded_worker_are_asked_for_again_once(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    config = {"annotations_per_item": 2, "attention_rate": 0.0, "overlap_share": 0, "qc": {
        "rules": []}}  # fmt: skip
    study_id = make_study(items()[:3], config, hit_type="comparison")
    who = {name: join(client, auth, external_id=name) for name in ("ann", "bob", "cat", "dan")}
    first = lambda texts, query: 0  # noqa: E731

    def worker_id(name: str) -> int:
        with db.session() as session:
            return int(session.scalar(select(Worker.id).where(Worker.external_id == name)))

    for name in ("ann", "bob"):  # two answers an item: the study is full
        assert [answer(client, who[name], study_id, first) for _ in range(4)] == [True] * 3 + [
            False]  # fmt: skip
    assert not answer(client, who["cat"], study_id, first)
    # A reviewer leaves ann's answers out: each of her three items wants one answer more.
    ann = worker_id("ann")
    path = f"/api/studies/{study_id}/workers/{ann}/actions"
    reply = client.post(path, json={"action": "soft_reject", "reason": "guessed"}, headers=auth)
    assert reply.status_code == 200, reply.get_json()
    # Approved and excluded again, and judged by a QC refresh: still one answer more each.
    for action in ("approve", "soft_reject"):
        reply = client.post(path, json={"action": action, "reason": "again"}, headers=auth)
        assert reply.status_code == 200, reply.get_json()
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        quality.refresh_study(session, study)
        assert exclusion.replace_excluded(session, study, [ann]) == 0
    assert [answer(client, who["cat"], study_id, first) for _ in range(4)] == [True] * 3 + [False]
    assert not answer(client, who["dan"], study_id, first)
    # Blocking bob asks for his answers again, as many as he gave.
    path = f"/api/studies/{study_id}/workers/{worker_id('bob')}/actions"
    reply = client.post(path, json={"action": "block", "reason": "spam"}, headers=auth)
    assert reply.status_code == 200, reply.get_json()
    assert [answer(client, who["dan"], study_id, first) for _ in range(4)] == [True] * 3 + [False]
    with db.session() as session:
        found = session.execute(
            select(Item.external_id, Item.target, Item.replaced).where(Item.study_id == study_id)
        ).all()
    assert sorted(found) == [("q0", 4, 2), ("q1", 4, 2), ("q2", 4, 2)]


def test_a_study_can_keep_the_answers_it_excludes_unreplaced(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    config = {"annotations_per_item": 1, "attention_rate": 0.0, "overlap_share": 0,
              "qc": {"rules": [], "crowd": {"replace_excluded": False}}}  # fmt: skip
    study_id = make_study(items()[:2], config, hit_type="comparison")
    who = {name: join(client, auth, external_id=name) for name in ("ann", "bob")}
    assert [answer(client, who["ann"], study_id, lambda t, q: 0) for _ in range(3)] == [
        True, True, False]  # fmt: skip
    with db.session() as session:
        ann = int(session.scalar(select(Worker.id).where(Worker.external_id == "ann")))
    reply = client.post(f"/api/studies/{study_id}/workers/{ann}/actions",
                        json={"action": "reject", "reason": "guessed"}, headers=auth)  # fmt: skip
    assert reply.status_code == 200, reply.get_json()
    assert not answer(client, who["bob"], study_id, lambda t, q: 0)


def test_attention_checks_test_attention_not_the_accuracy_against_the_crowd(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    check = {"id": "att0", "kind": "attention", "best": 2, "query": "Pick the third reply.",
             "candidates": ["not this", "nor this", "yes, this one", "no"]}  # fmt: skip
    config = {"annotations_per_item": 3, "attention_rate": 0.5, "overlap_share": 0,
              "qc": {"rules": []}}  # fmt: skip
    study_id = make_study([*items()[:3], check], config, hit_type="comparison")
    who = [join(client, auth, external_id=f"w{n}") for n in range(3)]

    def obey(texts: list[str], query: str) -> int:
        return texts.index("yes, this one") if "yes, this one" in texts else 0

    for person in who:
        while answer(client, person, study_id, obey):
            pass
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        kinds = [
            kind
            for (kind,) in session.execute(
                select(Item.kind).join(Response, Response.item_id == Item.id)
            ).all()
        ]
        assert kinds.count("attention") == 3 and kinds.count("real") == 9
        metrics = quality.crowd_metrics(session, study, exclusion.study_qc(study))
        rows = quality.crowd_rows(session, study)
    # Three real items judged each; the passed check is not a right answer to the task.
    assert sorted(m["agreement_n"] for m in metrics.values()) == [3, 3, 3]
    # As the study stood before the last worker came (the QC benchmark's replay): each of
    # the first two's tasks had one other answer, too few to judge.
    config = exclusion.study_qc(study)
    first_two = [row for row in rows if row[1] != rows[-1][1]]
    assert len(first_two) == 8 and rows[: len(first_two)] == first_two
    before = quality.crowd_metrics_of(study, config, first_two)
    assert sorted(m["agreement_n"] for m in before.values()) == [0, 0]


def test_approving_a_worker_the_early_crowd_rule_stopped_clears_below_crowd_too(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    # The three rules read agreement_below_prob: an approval after the early rule would not
    # survive the tenth judged answer if it cleared the early rule alone.
    early = {"annotations_per_item": 3, "qc": {"crowd": {"early_answers": 6}}}
    study_id = make_study(items(), early, hit_type="comparison")
    who = join(client, auth, external_id="early")
    assert answer(client, who, study_id, lambda texts, query: 0)
    with db.session() as session:
        row = session.scalars(select(StudyWorker).where(StudyWorker.study_id == study_id)).one()
        row.rule_hits = ["below_crowd_early"]
        row.excluded_by = "rule:below_crowd_early"
        wid = row.worker_id
    approve = {"action": "approve", "reason": "read by hand"}
    reply = client.post(f"/api/studies/{study_id}/workers/{wid}/actions", json=approve,
                        headers=auth)  # fmt: skip
    assert reply.status_code == 200, reply.get_json()
    with db.session() as session:
        row = session.scalars(select(StudyWorker).where(StudyWorker.study_id == study_id)).one()
        assert row.cleared_rules == ["below_crowd", "below_crowd_early", "below_crowd_known"]
        assert row.excluded_by is None


def test_a_worker_is_judged_again_when_others_answer_their_items(
    settings: Settings,
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A random clicker answers twelve items before anyone else and then leaves: nothing
    judged them yet (no item had another answer). Careful workers then answer the same items,
    and the refreshes after their answers judge the clicker again, who is stopped with the
    twelve answers they gave; once stopped, later refreshes leave them out."""
    config = {"annotations_per_item": 8, "attention_rate": 0.0, "overlap_share": 0}
    study_id = make_study(items()[:12], config, hit_type="comparison")
    monkeypatch.setattr(comparison_hit._ORDER_RANDOM, "shuffle", random.Random(3).shuffle)
    rng = random.Random(5)
    clicker = join(client, auth, external_id="clicker")
    assert [answer(client, clicker, study_id, lambda t, q: rng.randrange(4))
            for _ in range(13)] == [True] * 12 + [False]  # fmt: skip

    def careful(texts: list[str], query: str) -> int:
        return next(i for i, t in enumerate(texts) if t.endswith("(kind)"))

    refreshed = count_refreshes(monkeypatch)
    configure(settings)

    def run_events() -> None:
        with db.session() as session:
            waiting = session.scalars(
                select(OutboxEvent.id).where(OutboxEvent.processed_at.is_(None))
            ).all()
        for event_id in waiting:
            assert process_event(event_id).startswith("processed")

    run_events()
    with db.session() as session:
        clicker_id = session.scalar(select(Worker.id).where(Worker.external_id == "clicker"))
        row = session.scalars(select(StudyWorker).where(StudyWorker.worker_id == clicker_id)).one()
        assert row.serving == Serving.ACTIVE and row.evidence["agreement_n"] == 0
    for name in CAREFUL:
        who = join(client, auth, external_id=name)
        while answer(client, who, study_id, careful):
            run_events()
    with db.session() as session:
        row = session.scalars(select(StudyWorker).where(StudyWorker.worker_id == clicker_id)).one()
        assert row.serving == Serving.STOPPED and row.excluded_by is not None, row.evidence
        assert row.evidence["responses"] == 12 and row.evidence["agreement_n"] > 0
        stopped_at = session.scalar(
            select(AuditEntry.id).where(
                AuditEntry.worker_id == clicker_id, AuditEntry.action == "soft_block"
            )  # fmt: skip
        )
        careful_ids = set(session.scalars(select(Worker.id).where(Worker.id != clicker_id)))
    assert stopped_at is not None
    # Judged along with the careful workers while served, and never after the stop.
    judged = [i for i, ids in enumerate(refreshed) if clicker_id in ids]
    assert len(judged) > 1 and all(set(ids) - {clicker_id} <= careful_ids for ids in refreshed)
    last = judged[-1]
    assert all(clicker_id not in ids for ids in refreshed[last + 1 :]) and last + 1 < len(refreshed)
