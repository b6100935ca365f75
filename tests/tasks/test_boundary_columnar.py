"""The boundary report on columns equals the report on rows: a study read from the database
both ways (responses out of time order, explanations differing in case and spacing, reason
lists with unknown tags, attention verdicts stored and not, an imported rater group, workers
left out) gives the same analysis, rule removals and aggregated labels."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import insert, select

from crowd.quality import labels
from crowd.storage import Database, Item, Response, StudyWorker, Worker
from crowd.studies import frame as frame_module
from crowd.studies.frame import read_frame
from crowd.studies.lifecycle import get_study, progress
from crowd.studies.reports import (
    frame_removals,
    qc_summary,
    rule_removals,
    study_rows,
    worker_groups,
)
from tasks import get_hit_type
from tests.conftest import passage

N_WORKERS = 12


def same(a: Any, b: Any, where: str = "") -> None:
    """Equal JSON-like values, floats to 1e-9."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{where}: keys {list(a)} != {list(b)}"
        for key in a:
            same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {a} != {b}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, abs_tol=1e-9), f"{where}: {a} != {b}"
    else:
        assert a == b and type(a) is type(b), f"{where}: {a!r} != {b!r}"


def items() -> list[dict[str, Any]]:
    out = []
    for i in range(24):
        extra: dict[str, Any] = {}
        if i % 4:
            extra["category"] = ["news", "recipes", "stories"][i % 3]
        if i % 5:
            extra["generator"] = ["gpt2", "ctrl"][i % 2]
            extra["decoding"] = {"strategy": "top-p", "value": [0.0, 0.4, 1.0][i % 3]}
        kind = "gold" if i % 6 == 0 else "real"
        out.append(passage(f"p{i:02d}", 1 + i % 5, n=6, kind=kind, **extra))
    out += [passage(f"a{i}", 6, n=6, kind="attention") for i in range(3)]
    return out


def fill(db: Database, study_id: int, seed: int) -> None:
    """Every worker answers most items, at random times; half a rater group of experts."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with db.session() as session:
        session.execute(insert(Worker), [
            {"provider": "sim" if w < 9 else "import", "external_id": f"w{w}"}
            for w in range(N_WORKERS)
        ])  # fmt: skip
        workers = list(session.scalars(select(Worker.id).order_by(Worker.id)))
        session.execute(insert(StudyWorker), [{"study_id": study_id, "worker_id": w}
                                              for w in workers])  # fmt: skip
        study_items = session.execute(
            select(Item.id, Item.kind).where(Item.study_id == study_id).order_by(Item.id)
        ).all()
        rows = []
        texts = ["Sentence 3 repeats.", "sentence 3   REPEATS.", "Off topic.", "", "  "]
        for w_index, worker in enumerate(workers):
            for item_id, kind in study_items:
                if rng.random() < 0.2:
                    continue
                guess = 6 if kind == "attention" and rng.random() < 0.7 else rng.randint(1, 6)
                flags = {}
                if kind == "attention" and rng.random() < 0.6:
                    flags = {"attention_passed": guess == 6}
                rows.append({
                    "study_id": study_id, "item_id": item_id, "worker_id": worker,
                    "answer": {"guess": guess, "all_human": guess == 6},
                    "score": None,
                    "explanation": rng.choice([*texts, f"Own words {rng.random()}", None]),
                    "reasons": rng.choice([[], ["repetition"], ["repetition", "made-up"],
                                           ["nonsense"]]),
                    "qc_flags": flags,
                    "source": "imported" if w_index >= 9 else "live",
                    "rater_group": "expert" if w_index >= 9 else "crowd",
                    "created_at": start + timedelta(minutes=rng.randint(0, 10_000)),
                })  # fmt: skip
        rng.shuffle(rows)  # ids out of time order: positions follow time
        session.execute(insert(Response), rows)


def leave_out(db: Database, study_id: int, keys: dict[str, str]) -> dict[str, set[str]]:
    """Mark workers excluded; the rule -> worker keys map the report would use."""
    by_rule: dict[str, set[str]] = {}
    with db.session() as session:
        for external_id, rule in keys.items():
            worker = session.scalar(select(Worker).where(Worker.external_id == external_id))
            assert worker is not None
            row = session.scalar(select(StudyWorker).where(StudyWorker.worker_id == worker.id))
            assert row is not None
            row.excluded_by = f"rule:{rule}"
            by_rule.setdefault(rule, set()).add(f"{worker.provider}:{external_id}")
    return by_rule


@pytest.mark.parametrize("seed", [1, 2])
def test_the_report_on_columns_is_the_report_on_rows(
    db: Database, make_study: Callable[..., int], seed: int
) -> None:
    study_id = make_study(items(), {"annotations_per_item": 3})
    fill(db, study_id, seed)
    by_rule = leave_out(db, study_id, {"w1": "gold_below_threshold", "w10": "below_crowd",
                                       "w4": "gold_below_threshold"})  # fmt: skip
    excluded = set().union(*by_rule.values())
    hit = get_hit_type("boundary")
    with db.session() as session:
        study = get_study(session, study_id)
        rows = study_rows(session, study)
        frame = read_frame(session, study, hit.frame_answer_fields)
        assert len(frame) == len(rows) > 200
        # Its streaming is its own: the report's later queries run as any other.
        assert "stream_results" not in session.connection().get_execution_options()
        by_rows = hit.analyze(rows, excluded, study.config)
        same(by_rows, hit.analyze_frame(frame, excluded, study.config), "analysis")
        assert by_rows["full"]["explanations"]["n_copies"] > 0
        assert by_rows["attention"]["n_failed_checks"] > 0
        assert set(by_rows["full"]["by_rater_group"]) == {"crowd", "expert"}
        for workers in by_rule.values():
            same(rule_removals(rows, workers), frame_removals(frame, workers), "rules")
        same(progress(session, study), progress(session, study, frame), "progress")
        assert progress(session, study)["items_complete"] > 0
        same(qc_summary(session, study), qc_summary(session, study, frame), "qc")
        assert worker_groups(session, study_id) == worker_groups(session, study_id, frame)
        for filtered in (True, False):
            methods = labels.REPORT_METHODS  # MACE (ten restarts) reads rows either way
            summary_rows, stored_rows = labels.compute_aggregations(
                session, study, filtered, methods
            )
            summary_frame, stored_frame = labels.compute_aggregations(
                session, study, filtered, methods, frame=frame
            )
            assert set(stored_rows) == {"majority_vote", "dawid_skene", "first_change"}
            assert set(stored_frame) == set(stored_rows)
            for method in stored_frame:
                same(summary_rows[method], summary_frame[method], method)
                assert stored_frame[method]["labels"] == stored_rows[method]["labels"]
            groups = labels.answer_groups(session, study, filtered, frame=frame)
            assert groups == labels.answer_groups(session, study, filtered)


def test_the_hand_written_frame_query_reads_what_the_sqlalchemy_one_reads(
    db: Database, make_study: Callable[..., int], monkeypatch: pytest.MonkeyPatch
) -> None:
    study_id = make_study(items(), {"annotations_per_item": 3})
    fill(db, study_id, seed=3)
    fields = get_hit_type("boundary").frame_answer_fields
    with db.session() as session:
        study = get_study(session, study_id)
        by_hand = read_frame(session, study, fields)
        monkeypatch.setattr(frame_module, "_FRAME_SQL", {})  # SQLAlchemy's query, any database
        generic = read_frame(session, study, fields)
    assert len(by_hand) == len(generic) > 200
    order_a, order_b = np.argsort(by_hand.response_id), np.argsort(generic.response_id)
    for name in ("response_id", "worker", "item", "explanation", "reasons", "attention_passed",
                 "rater_group", "source", "position"):  # fmt: skip
        assert (getattr(by_hand, name)[order_a] == getattr(generic, name)[order_b]).all(), name
    assert (by_hand.answer["guess"][order_a] == generic.answer["guess"][order_b]).all()
    assert (by_hand.reason_lists, by_hand.sources) == (generic.reason_lists, generic.sources)
    assert (by_hand.attention_passed >= 0).any() and (by_hand.attention_passed < 0).any()
