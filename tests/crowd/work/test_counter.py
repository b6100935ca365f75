"""The worker page's "item i of n" (crowd.work.counter), through the worker API's next reply.

A crowd platform's session (its items_per_session) is counted in test_mturk_browser.py.
"""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient

from tests.conftest import join, passage
from tests.crowd.work.test_assignments import play

ONE_PASS = {"annotations_per_item": 1, "attention_rate": 0.0}


def counted(
    client: FlaskClient, who: dict[str, str], study_id: int, **body: Any
) -> tuple[int, int]:
    view = client.post(f"/api/work/studies/{study_id}/next", json=body, headers=who).get_json()
    return view["item_number"], view["items_total"]


def test_the_open_web_counts_the_items_left_to_the_worker(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study([passage(f"p{i}", 2) for i in range(3)], ONE_PASS)
    ada = join(client, auth, external_id="ada")
    seen = []
    for _ in range(3):
        seen.append(counted(client, ada, study_id))
        assert counted(client, ada, study_id) == seen[-1]  # asked again: the same item
        play(client, ada, study_id, guess=2)
    assert seen == [(1, 3), (2, 3), (3, 3)]
    # Steps keep the page's count: only the next reply carries one.
    bob = join(client, auth, external_id="bob")
    other = make_study([passage("q0", 2)], ONE_PASS)
    view = play(client, bob, other, guess=1)
    assert "item_number" not in view and "items_total" not in view


def test_others_filling_items_and_a_category_bound_the_count(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    items = [passage("n0", 2, category="news"), passage("n1", 2, category="news"),
             passage("s0", 2, category="stories")]  # fmt: skip
    study_id = make_study(items, ONE_PASS)
    ada = join(client, auth, external_id="ada")
    assert counted(client, ada, study_id, category="news") == (1, 2)
    bob = join(client, auth, external_id="bob")
    assert counted(client, bob, study_id) == (1, 2)  # ada holds one of the three
    play(client, bob, study_id, guess=2)
    assert counted(client, bob, study_id) == (2, 2)  # ada's news item is not open to bob


def test_a_gold_item_leaves_the_count_as_a_real_one_would(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    items = [passage("r0", 2), passage("r1", 2), passage("g0", 3, kind="gold")]
    config = {**ONE_PASS, "qc": {"gold": {"min_rate": 1.0, "max_rate": 1.0}}}
    study_id = make_study(items, config)
    who = join(client, auth)
    seen = []
    for _ in range(3):
        seen.append(counted(client, who, study_id))
        play(client, who, study_id, guess=2)
    assert seen == [(1, 3), (2, 3), (3, 3)]
