"""The worker's review page as the server renders it: answers in the HIT type's terms, and
the evidence QC kept."""

from __future__ import annotations

import re
from collections.abc import Callable

from flask.testing import FlaskClient

from crowd.quality.standing import refresh_study
from crowd.storage import Database, Study
from qc.anomalies import MAX_EXAMPLES
from tests.conftest import join, log_in_to_dashboard, passage
from tests.crowd.test_review import work, worker_id


def worker_page(client: FlaskClient, api_key: str, study_id: int, worker: int) -> str:
    """The worker's review page, as the experimenter logged in to the dashboard gets it."""
    log_in_to_dashboard(client, api_key)
    page = client.get(f"/review/studies/{study_id}/workers/{worker}")
    assert page.status_code == 200
    return page.get_data(as_text=True)


def test_the_review_page_shows_likert_answers_by_attribute_on_their_scale(
    client: FlaskClient,
    auth: dict[str, str],
    api_key: str,
    make_study: Callable[..., int],
    db: Database,
) -> None:
    attributes = [
        {"name": "fluency", "question": "How fluent is it?", "scale": [1, 5],
         "labels": ["broken", "flawless"]},
        {"name": "coherence", "question": "Does it hang together?", "scale": [1, 5]},
    ]  # fmt: skip
    items = [
        {"id": "s1", "text": "A short story about a quiet morning.", "group": "human"},
        {"id": "g1", "kind": "gold", "text": "Story story story.", "group": "model",
         "expected_ratings": {"fluency": 1, "coherence": 4}},
    ]  # fmt: skip
    config = {
        "annotations_per_item": 1,
        "attention_rate": 0.0,
        "attributes": attributes,
        "qc": {"gold": {"min_rate": 1.0, "max_rate": 1.0}},
    }  # the gold item for sure
    study_id = make_study(items, config, hit_type="likert")
    who = join(client, auth, external_id="rater")
    given = ([5, 3], [4, 2])  # fluency, then coherence, on each of the two items
    for ratings in given:
        view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
        assert "task" in view, view
        for rating in ratings:
            step = {"step": view["task"]["step"], "rating": rating}
            path = f"/api/work/assignments/{view['assignment_id']}/step"
            view = client.post(path, json=step, headers=who).get_json()
        assert view.get("answered") is True, view

    html = worker_page(client, api_key, study_id, worker_id(db, "rater"))
    assert "fluency: 5/5 (flawless) · coherence: 3/5" in html
    assert "fluency: 4/5 · coherence: 2/5" in html
    assert "5,3" not in html and "4,2" not in html
    # The gold item's expected ratings, and the miss said in the same words.
    expected = "fluency: 1/5 (broken) · coherence: 4/5"
    assert f"expected: {expected}" in html
    assert re.search(rf"answered fluency: [45]/5[^;]*; expected {re.escape(expected)} "
                     r"\((0|50)% credit\)", html)  # fmt: skip


def test_a_signal_with_more_entries_than_qc_keeps_says_how_many_it_found(
    client: FlaskClient,
    auth: dict[str, str],
    api_key: str,
    make_study: Callable[..., int],
    db: Database,
) -> None:
    n = MAX_EXAMPLES + 4
    # No rules: the worker answers every item faster than it can be read, and stays.
    config = {"annotations_per_item": 1, "attention_rate": 0.0, "require_explanation": False,
              "qc": {"rules": []}}  # fmt: skip
    study_id = make_study([passage(f"p{i}", 2, n=3) for i in range(n)], config)
    work(client, join(client, auth, external_id="quick"), study_id, n, guess=1)
    with db.session() as session:  # what the queue's job does after each answer
        study = session.get(Study, study_id)
        assert study is not None
        refresh_study(session, study)
    html = worker_page(client, api_key, study_id, worker_id(db, "quick"))
    section = re.search(r'<section class="signal" data-signal="too_fast">(.*?)</section>', html,
                        re.S)  # fmt: skip
    assert section is not None, html
    assert f'<span class="n">(the latest {MAX_EXAMPLES} of {n})</span>' in section[1]
    assert section[1].count("<li>") == MAX_EXAMPLES
