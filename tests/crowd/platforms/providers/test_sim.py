"""The simulated crowd plays through the real HTTP endpoints; its kinds behave as named."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from crowd.platforms.providers.sim import SimulatedCrowd
from crowd.storage import Database, Response, Study
from crowd.studies.lifecycle import get_study
from crowd.studies.reports import excluded_workers, platform_rows
from tests.crowd.quality.test_standing import ROFT_RULES


def test_a_simulated_crowd_plays_and_the_failers_are_caught(
    live_server: Any, api_key: str, make_study: Any, db: Database, sample_items: list[Any]
) -> None:
    # Ten items a worker: the constant rule judges from 8 choices here (12 by default).
    rules = [
        {**rule, "min_evidence": {"constant_n": 8}} if rule["name"] == "constant_answers" else rule
        for rule in ROFT_RULES
    ]
    config = {"annotations_per_item": 2, "attention_rate": 0.1, "qc": {"rules": rules}}
    study_id = make_study(sample_items, config)
    mix = {"careful": 3, "always_human": 1, "attention_failer": 2}
    crowd = SimulatedCrowd(
        live_server.url,
        api_key,
        study_id,
        "boundary",
        sample_items,
        mix,
        seed=3,
        items_per_worker=10,
    )
    result = crowd.run(threads=3)
    assert result.errors == []
    assert all(n == 10 for n in result.items_done.values())
    with db.session() as session:
        study: Study = get_study(session, study_id)
        assert len(platform_rows(session, study)) == 60
        guesses = {
            r.answer["guess"]
            for r in session.scalars(select(Response))
            if r.worker.external_id.startswith("sim-always_human")
        }
        caught = excluded_workers(session, study)
    # Attention failers fail a check; "always human" passes them but never varies.
    assert caught == {
        "attention_failed": {f"sim:sim-attention_failer-0{n}" for n in range(2)},
        "constant_answers": {"sim:sim-always_human-00"},
    }
    assert guesses == {10}  # "always human" guesses the passage length every time
