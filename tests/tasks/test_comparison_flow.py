"""The comparison HIT through HTTP: training, display order, overlap, a simulated crowd and
the report."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.accounts import authenticate
from crowd.platforms.providers.sim import SimulatedCrowd
from crowd.platforms.publishing import open_study
from crowd.settings import Settings
from crowd.storage import Assignment, Database, Item, Response, Study, Worker
from crowd.studies.lifecycle import create_study, import_items
from crowd.studies.reports import build_report
from tasks.comparison.hit import THANKS
from tasks.comparison.items import TEMPLATES
from tests.conftest import join
from tests.tasks.comparison_helpers import SAMPLES, item, json_keys

# -- through HTTP -----------------------------------------------------------------------------


@pytest.fixture
def make_comparison_study(db: Database, api_key: str) -> Callable[..., int]:
    """Create, fill and publish a comparison study; returns its id."""

    def factory(
        records: list[dict[str, Any]],
        config: dict[str, Any] | None = None,
        providers: tuple[str, ...] = ("local", "sim"),
    ) -> int:
        with db.session() as session:
            experimenter = authenticate(session, api_key)
            study: Study = create_study(
                session, experimenter, "comparison study", "comparison", config or {}
            )
            import_items(session, study, json.loads(json.dumps(records)))
            open_study(session, study, providers)
            return study.id

    return factory


def next_view(client: FlaskClient, who: dict[str, str], study_id: int) -> dict[str, Any]:
    response = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def pick(client: FlaskClient, who: dict[str, str], view: dict[str, Any], choice: int) -> Any:
    response = client.post(
        f"/api/work/assignments/{view['assignment_id']}/step",
        json={"step": view["task"]["step"], "choice": choice},
        headers=who,
    )
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_training_items_come_first_with_feedback_then_real_items_thank(
    client: FlaskClient,
    auth: dict[str, str],
    make_comparison_study: Callable[..., int],
    db: Database,
) -> None:
    records = [
        item("real1"),
        item("gold1", kind="gold", best=0),
        item("train1", kind="training", best=3),
        item("train2", kind="training", best=1),
    ]
    # Gold at every chance, so the order is fixed: training, gold, then real.
    config = {
        "template": "sentiment",
        "overlap_share": 0,
        "qc": {"gold": {"min_rate": 1.0, "max_rate": 1.0}},
    }
    study_id = make_comparison_study(records, config)
    who = join(client, auth)
    for training in ("train1", "train2"):
        view = next_view(client, who, study_id)
        body = json.dumps(view)
        assert f"{training}-cand0" in body
        assert "policyA" not in body and not {"best", "expected"} & json_keys(view)
        assert view["task"]["instructions"] == TEMPLATES["sentiment"]
        wrong_text = next(t for t in view["task"]["candidates"] if "-cand0" in t)
        done = pick(client, who, view, view["task"]["candidates"].index(wrong_text))
        feedback = done["feedback"]
        right = 3 if training == "train1" else 1
        assert feedback["correct"] is False and feedback["training"] is True
        assert feedback["right_text"] == f"{training}-cand{right} text"
    seen = []
    for _ in range(2):
        view = next_view(client, who, study_id)
        seen.append(view["task"]["query"])
        assert "policy" not in json.dumps(view)
        assert pick(client, who, view, 0)["feedback"] == {"message": THANKS}
    assert seen == ["Query of gold1:", "Query of real1:"]
    assert next_view(client, who, study_id)["done"] is True
    with db.session() as session:
        scores = {
            item_id: score
            for item_id, score in session.execute(
                select(Item.external_id, Response.score).join(Item, Item.id == Response.item_id)
            )
        }
    assert scores["real1"] is None and scores["train1"] == 0.0 and scores["gold1"] in (0.0, 1.0)


def test_no_training_for_a_worker_who_arrives_when_the_real_work_is_taken(
    client: FlaskClient, auth: dict[str, str], make_comparison_study: Callable[..., int]
) -> None:
    records = [item("real1"), item("train1", kind="training", best=3)]
    study_id = make_comparison_study(records, {"overlap_share": 0})
    first = join(client, auth, external_id="first")
    assert next_view(client, first, study_id)["task"]["query"] == "Query of train1:"
    assert next_view(client, first, study_id)["task"]["query"] == "Query of train1:"  # open
    pick(client, first, next_view(client, first, study_id), 0)
    pick(client, first, next_view(client, first, study_id), 0)  # real1, its only slot
    late = join(client, auth, external_id="late")
    assert next_view(client, late, study_id)["done"] is True  # no practice for no work


def test_stored_best_is_the_canonical_index_of_the_clicked_text_for_every_order(
    client: FlaskClient,
    auth: dict[str, str],
    make_comparison_study: Callable[..., int],
    db: Database,
) -> None:
    orders = list(itertools.permutations(range(4)))
    records = [item(f"ord{n:02d}") for n in range(len(orders))]
    study_id = make_comparison_study(records, {"overlap_share": 0})
    who = join(client, auth)
    clicked: dict[str, str] = {}
    for n, order in enumerate(orders):
        view = next_view(client, who, study_id)
        # Force this assignment's order, so all 24 orders go through the HTTP path.
        with db.session() as session:
            assignment = session.get(Assignment, view["assignment_id"])
            assert assignment is not None
            assignment.progress = {"step": 0, "order": list(order)}
        view = next_view(client, who, study_id)
        position = n % 4
        text = view["task"]["candidates"][position]
        clicked[view["task"]["query"]] = text
        assert pick(client, who, view, position)["feedback"] == {"message": THANKS}
    with db.session() as session:
        rows = session.execute(select(Response, Item).join(Item, Item.id == Response.item_id))
        stored = [(response.answer, item_row.content) for response, item_row in rows]
    assert len(stored) == 24
    assert {tuple(answer["order"]) for answer, _ in stored} == set(orders)
    for answer, content in stored:
        assert content["candidates"][answer["best"]] == clicked[content["query"]]
        assert answer["order"][answer["shown"]] == answer["best"]


def test_overlap_items_get_five_distinct_workers_and_the_others_one(
    client: FlaskClient,
    auth: dict[str, str],
    make_comparison_study: Callable[..., int],
    db: Database,
) -> None:
    records = [item(f"ov{n:02d}", k=2) for n in range(20)]
    study_id = make_comparison_study(records, {"overlap_share": 0.1})
    for n in range(7):
        who = join(client, auth, external_id=f"worker{n}")
        while not (view := next_view(client, who, study_id)).get("done"):
            pick(client, who, view, n % 2)
    with db.session() as session:
        targets = dict(session.execute(select(Item.external_id, Item.target)).all())
        answered = session.execute(
            select(Item.external_id, Worker.external_id)
            .join(Response, Response.item_id == Item.id)
            .join(Worker, Worker.id == Response.worker_id)
        ).all()
    per_item: dict[str, set[str]] = {}
    for item_id, worker in answered:
        per_item.setdefault(item_id, set()).add(worker)
    overlap = {item_id for item_id, target in targets.items() if target is not None}
    assert len(overlap) == 2 and all(targets[i] == 5 for i in overlap)
    assert len(answered) == 2 * 5 + 18
    for item_id in targets:
        assert len(per_item[item_id]) == (5 if item_id in overlap else 1), item_id


def test_a_simulated_crowd_plays_the_samples_and_the_report_builds(
    live_server: Any,
    api_key: str,
    settings: Settings,
    make_comparison_study: Callable[..., int],
    db: Database,
) -> None:
    records = [
        json.loads(line)
        for name in ("training.jsonl", "sentiment.jsonl", "attention.jsonl")
        for line in (SAMPLES / name).read_text().splitlines()
    ]
    config = {"template": "sentiment", "annotations_per_item": 3, "attention_rate": 0.1}
    study_id = make_comparison_study(records, config)
    mix = {"skilled": 8, "noisy": 2, "spammer": 2, "position_biased": 2}
    crowd = SimulatedCrowd(
        live_server.url, api_key, study_id, "comparison", records, mix, seed=4,
        items_per_worker=13,
    )  # fmt: skip
    result = crowd.run(threads=4)
    assert result.errors == []
    with db.session() as session:
        report = build_report(session, settings, study_id)
        data = report.data
    full = data["full"]
    assert data["training"]["n_labels"] == 3 * 14
    assert data["attention"]["workers_checked"] == 14
    # Workers who do not read fail the check; readers pass it.
    failed = set(data["attention"]["failed_workers"])
    assert failed and all("spammer" in w or "position" in w for w in failed)
    assert full["agreement"]["worker_worker"]["n_pairs"] > 0
    overall = next(e for e in full["win_rates"] if e["k"] == "all")
    assert overall["policy_b"] == "tuned" and overall["win_rate_a"] < 0.5
    assert data["filtered"]["position_bias"]["4"]["n"] > 0
    html = (settings.reports_dir / f"study-{study_id}" / "report.html").read_text()
    assert "Agreement" in html and "base vs tuned" in html
