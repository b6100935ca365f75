"""The Likert HIT type through the platform: the HTTP flow, group order, QC, the report."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.accounts import authenticate
from crowd.platforms.publishing import open_study
from crowd.settings import Settings
from crowd.storage import Database, Item, Response, Study
from crowd.studies.annotations import import_file
from crowd.studies.lifecycle import create_study, import_items
from crowd.studies.reports import analysis_rows, build_report, platform_rows
from tasks import get_hit_type
from tests.conftest import join
from tests.crowd.quality.test_standing import ROFT_RULE
from tests.tasks.likert_helpers import SAMPLES, records, story


@pytest.fixture
def likert_study(db: Database, api_key: str) -> Callable[..., int]:
    """Create, fill and publish a Likert study; returns its id."""

    def factory(
        items: list[dict[str, Any]],
        config: dict[str, Any] | None = None,
        providers: tuple[str, ...] = ("local", "sim"),
    ) -> int:
        with db.session() as session:
            study: Study = create_study(
                session,
                authenticate(session, api_key),
                "likert study",
                "likert",
                {"annotations_per_item": 1, **(config or {})},
            )
            import_items(session, study, json.loads(json.dumps(items)))
            open_study(session, study, providers)
            return study.id

    return factory


# -- through the platform --------------------------------------------------------------------
def start(client: FlaskClient, who: dict[str, str], study_id: int) -> dict[str, Any]:
    response = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def rate(client: FlaskClient, who: dict[str, str], view: dict[str, Any], rating: Any) -> Any:
    return client.post(
        f"/api/work/assignments/{view['assignment_id']}/step",
        json={"step": view["task"]["step"], "rating": rating},
        headers=who,
    )


def play(client: FlaskClient, who: dict[str, str], study_id: int) -> tuple[list, dict]:
    """Rate one item through; returns the views before the answer and the final view."""
    view = start(client, who, study_id)
    seen = []
    while "task" in view and not view.get("answered"):
        seen.append(view)
        response = rate(client, who, view, 1 + view["task"]["step"])
        assert response.status_code == 200, response.get_json()
        view = response.get_json()
    return seen, view


def test_http_flow_stores_all_ratings_and_never_shows_the_group(
    client: FlaskClient, auth: dict[str, str], likert_study: Callable[..., int], db: Database
) -> None:
    study_id = likert_study([story("s1", "secretgroup", meta={"quality": {"relevance": 4.5}})])
    who = join(client, auth)
    view = start(client, who, study_id)
    assert rate(client, who, view, 9).status_code == 409
    assert rate(client, who, view, "4").status_code == 422  # a number, not text (the model)
    seen, final = play(client, who, study_id)
    assert [v["task"]["step"] for v in seen] == [0, 1, 2, 3]
    assert ["prompt" in v["task"] for v in seen] == [False, False, False, True]
    for body in seen:
        text = json.dumps(body)
        assert "secretgroup" not in text and "quality" not in text and "4.5" not in text
    assert final["feedback"]["message"].startswith("Thank you")
    with db.session() as session:
        response = session.scalars(select(Response)).one()
        assert response.answer["ratings"] == {
            "grammaticality": 1,
            "cohesiveness": 2,
            "likability": 3,
            "relevance": 4,
        }
        assert response.score is None and response.rater_group == "crowd"
        assert [e["type"] for e in response.events] == ["show"] + ["rating"] * 4
        times = [datetime.fromisoformat(e["at"]) for e in response.events]
        assert times == sorted(times) and all(t.tzinfo is not None for t in times)
    assert start(client, who, study_id)["done"] is True


def test_sequential_order_serves_one_group_after_another(
    client: FlaskClient, auth: dict[str, str], likert_study: Callable[..., int], db: Database
) -> None:
    items = [story(f"{group}{n}", group) for n in range(3) for group in ("human", "gpt2")]
    study_id = likert_study(items, {"group_order": "sequential", "groups": ["gpt2", "human"]})
    who = join(client, auth)
    for _ in items:
        play(client, who, study_id)
    with db.session() as session:
        order = [
            item.meta["group"]
            for item in session.scalars(
                select(Item).join(Response, Response.item_id == Item.id).order_by(Response.id)
            )
        ]
    assert order == ["gpt2"] * 3 + ["human"] * 3


def test_mixed_order_serves_every_group_without_telling_which(
    client: FlaskClient, auth: dict[str, str], likert_study: Callable[..., int], db: Database
) -> None:
    items = [story(f"i{g[0]}{n}", g) for n in range(4) for g in ("alpha", "omega")]
    study_id = likert_study(items)
    with db.session() as session:
        assert {item.rank for item in session.scalars(select(Item))} == {0}
    who = join(client, auth)
    for _ in items:
        seen, final = play(client, who, study_id)
        for body in [*seen, final]:
            assert "alpha" not in json.dumps(body) and "omega" not in json.dumps(body)
    with db.session() as session:
        assert len(session.scalars(select(Response)).all()) == len(items)


def test_attention_check_flag_gold_score_and_the_report(
    client: FlaskClient,
    auth: dict[str, str],
    likert_study: Callable[..., int],
    db: Database,
    settings: Settings,
) -> None:
    items = [
        story("real", "human"),
        story("gold", "gpt2", kind="gold", expected_ratings={"grammaticality": 1, "relevance": 2}),
        story("check", kind="attention", expected_rating=1),
    ]
    # Gold first; one failed attention check leaves a worker out (RoFT's rule).
    gold_first = {"gold": {"min_rate": 1.0, "max_rate": 1.0}, "rules": [ROFT_RULE]}
    study_id = likert_study(
        items, {"attention_rate": 0.5, "annotations_per_item": 2, "qc": gold_first}
    )
    for worker in ("w1", "w2"):
        who = join(client, auth, external_id=worker)
        for _ in range(3):
            play(client, who, study_id)  # rates 1, 2, 3, 4
    with open(SAMPLES / "expert_ratings.csv") as handle:
        lines = [line for n, line in enumerate(handle) if n == 0 or ",story-01-" in line]
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        import_items(session, study, [r for r in records("stories.jsonl") if "-01-" in r["id"]])
        summary = import_file(session, study, "".join(lines), "csv")
        assert summary.added == 6
        rows = platform_rows(session, study)
        checks = [r for r in rows if r["kind"] == "attention"]
        assert checks and all(r["qc_flags"]["attention_passed"] is False for r in checks)
        gold = [r for r in rows if r["item"] == "gold"]
        # grammaticality 1 vs 1, relevance 4 vs 2: mean absolute error 1.
        assert gold and all(r["score"] == pytest.approx(-1.0) for r in gold)
        analysed, excluded = analysis_rows(session, study)
        assert excluded == {"sim:w1", "sim:w2"}
        assert {r["rater_group"] for r in analysed} == {"crowd", "expert"}
        report = build_report(session, settings, study_id)
        data = report.data
    json.dumps(data, allow_nan=False)
    assert data["full"]["rater_groups"] == ["crowd", "expert"]
    assert data["filtered"]["rater_groups"] == ["expert"]
    assert data["attention"]["workers_failed"] == 2
    assert data["rules"]["attention_failed"]["workers"] == 2
    assert "attention_failed" in report.html and "Welch" in report.html
    out_dir = settings.reports_dir / f"study-{study_id}"
    assert (out_dir / "means_full.png").exists() and (out_dir / "report.json").exists()


def test_the_simulated_crowd_plays_the_sample_stories(
    live_server: Any, likert_study: Callable[..., int], api_key: str, db: Database
) -> None:
    from crowd.platforms.providers.sim import SimulatedCrowd

    items = records("stories.jsonl")[:6] + records("attention.jsonl")
    study_id = likert_study(items, {"annotations_per_item": 3, "attention_rate": 0.2})
    crowd = SimulatedCrowd(
        live_server.url,
        api_key,
        study_id,
        "likert",
        items,
        {"careful": 2, "spammer": 1, "straightliner": 1},
        seed=4,
        items_per_worker=6,
    )
    result = crowd.run(threads=2)
    assert result.errors == []
    with db.session() as session:
        answers = [r.answer for r in session.scalars(select(Response))]
    assert len(answers) >= 18
    assert all(len(answer["ratings"]) == 4 for answer in answers)
    assert get_hit_type("likert") is not None
