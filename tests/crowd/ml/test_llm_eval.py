"""LLM evaluation through the real database, CLI and queue: the model is one more rater group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

import redis  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from sqlalchemy import select  # noqa: E402

from crowd.cli import main  # noqa: E402
from crowd.exceptions import ValidationError  # noqa: E402
from crowd.ml.llm_eval import (  # noqa: E402
    LLM_PROVIDER,
    default_rater_group,
    run_llm_eval,
    run_llm_sweep,
)
from crowd.queue import MODELS, fetch_job, job_queue  # noqa: E402
from crowd.queue.runner import run_worker  # noqa: E402
from crowd.settings import Settings  # noqa: E402
from crowd.storage import (  # noqa: E402
    Database,
    OutboxEvent,
    Report,
    Response,
    ResponseSource,
    Worker,
)
from crowd.storage.outbox import RESPONSES_IMPORTED  # noqa: E402
from crowd.studies.annotations import import_file  # noqa: E402
from crowd.studies.lifecycle import get_study  # noqa: E402
from crowd.studies.reports import analysis_rows  # noqa: E402
from models.llm_eval.config import LLMEvalConfig  # noqa: E402
from tasks import get_hit_type  # noqa: E402
from tests.models.scripted_lm import build_scripted_causal_lm  # noqa: E402

TITLES = [
    {"id": "t1", "text": "Stocks fall sharply", "reference": "Stocks drop sharply",
     "group": "textfooler"},
    {"id": "t2", "text": "Rain due in Paris", "reference": "Paris expects rain",
     "group": "bae"},
    {"id": "g1", "kind": "gold", "text": "Team wins the cup", "reference": "Team wins the cup",
     "expected_ratings": {"fluency": 5, "meaning_preservation": 5}},
    {"id": "check", "kind": "attention", "text": "Please answer 2 here.",
     "reference": "Please answer 2 here.", "expected_rating": 2},
]  # fmt: skip
CROWD_RATINGS = (
    "worker,item,fluency,meaning_preservation\n"
    "h1,t1,4,3\nh1,t2,2,5\nh1,g1,5,5\n"
    "h2,t1,5,2\nh2,t2,3,4\nh2,g1,4,5\n"
)
ATTRIBUTES = ("fluency", "meaning_preservation")


@pytest.fixture(scope="module")
def says_four(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_scripted_causal_lm(
        tmp_path_factory.mktemp("m") / "says-four", "I would rate it a 4."
    )


@pytest.fixture(scope="module")
def four_or_nothing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_scripted_causal_lm(tmp_path_factory.mktemp("m") / "mixed", "4", "no idea")


@pytest.fixture
def study_id(db: Database, make_study: Any) -> int:
    created = make_study(TITLES, {"template": "attack", "attention_rate": 0.0}, hit_type="likert")
    with db.session() as session:
        import_file(session, get_study(session, created), CROWD_RATINGS, "csv")
    return int(created)


def _config(model: Path, **options: Any) -> LLMEvalConfig:
    return LLMEvalConfig(model=str(model), max_new_tokens=8, **options)


def _llm_responses(db: Database, study_id: int, group: str) -> list[tuple[Response, Worker]]:
    with db.session() as session:
        rows = session.execute(
            select(Response, Worker)
            .join(Worker, Worker.id == Response.worker_id)
            .where(Response.study_id == study_id, Response.rater_group == group)
            .order_by(Response.id)
        ).all()
        session.expunge_all()
        return [(response, worker) for response, worker in rows]


def test_each_sample_is_a_rater_of_the_group_with_its_raw_answers_kept(
    db: Database, settings: Settings, study_id: int, says_four: Path
) -> None:
    summary = run_llm_eval(db, settings, study_id, _config(says_four))
    group = "llm:says-four"
    assert summary.rater_group == group == default_rater_group(str(says_four))
    # Real and gold items are rated, the attention check is not: 3 items x 3 samples.
    assert (summary.items, summary.attributes, summary.samples) == (3, 2, 3)
    assert (summary.responses, summary.ratings, summary.missing) == (9, 18, 0)
    stored = _llm_responses(db, study_id, group)
    assert len(stored) == 9
    assert {(w.provider, w.external_id) for _, w in stored} == {
        (LLM_PROVIDER, f"{group}/s{k}") for k in (1, 2, 3)
    }
    for response, _worker in stored:
        assert response.source == ResponseSource.IMPORTED
        assert response.answer["ratings"] == {"fluency": 4, "meaning_preservation": 4}
        assert response.answer["scales"] == {"fluency": [1, 5], "meaning_preservation": [1, 5]}
        assert [e["attribute"] for e in response.events] == list(ATTRIBUTES)
        for event in response.events:
            assert event["type"] == "llm_answer"
            assert event["text"] == "i would rate it a 4." and event["rating"] == 4.0
            assert (event["temperature"], event["top_p"], event["seed"]) == (1.0, 0.9, 0)
        fluency, meaning = (event["prompt"] for event in response.events)
        assert "Text: " in fluency and "Title 1: " not in fluency
        assert "Title 1: " in meaning and "Title 2: " in meaning
    scores = {r.item_id: r.score for r, _ in stored}
    assert sorted(s for s in scores.values() if s is not None) == [-1.0]  # gold: 5 expected
    with db.session() as session:
        events = session.scalars(
            select(OutboxEvent).where(OutboxEvent.topic == RESPONSES_IMPORTED)
        ).all()
        assert sorted(events[-1].payload["worker_ids"]) == sorted({w.id for _, w in stored})


def test_a_missing_rating_stays_none_next_to_the_others(
    db: Database, settings: Settings, study_id: int, four_or_nothing: Path
) -> None:
    summary = run_llm_eval(db, settings, study_id, _config(four_or_nothing), rater_group="mixed")
    values = [
        (response.answer["ratings"][event["attribute"]], event["rating"], event["text"])
        for response, _ in _llm_responses(db, study_id, "mixed")
        for event in response.events
    ]
    assert {stored for stored, _, _ in values} == {4, None}  # the model answers both ways
    for stored, parsed, text in values:
        assert (stored, parsed) == ((4, 4.0) if text == "4" else (None, None))
    assert summary.missing == sum(1 for stored, _, _ in values if stored is None) > 0
    assert summary.ratings + summary.missing == 18


def test_running_a_group_again_replaces_its_responses(
    db: Database, settings: Settings, study_id: int, says_four: Path
) -> None:
    run_llm_eval(db, settings, study_id, _config(says_four), rater_group="gpt")
    first = max(r.created_at for r, _ in _llm_responses(db, study_id, "gpt"))
    again = run_llm_eval(db, settings, study_id, _config(says_four, samples=2), rater_group="gpt")
    assert again.replaced == 9 and again.responses == 6
    now = _llm_responses(db, study_id, "gpt")
    assert len(now) == 6 and min(r.created_at for r, _ in now) > first
    assert {w.external_id for _, w in now} == {"gpt/s1", "gpt/s2"}
    # People's ratings and other groups are untouched.
    assert len(_llm_responses(db, study_id, "crowd")) == 6
    with db.session() as session:
        last = session.scalars(select(OutboxEvent).order_by(OutboxEvent.id.desc())).first()
        assert last is not None and len(last.payload["worker_ids"]) == 3  # s3 lost its answers


def test_the_likert_analysis_compares_the_llm_group_with_the_crowd(
    db: Database, settings: Settings, study_id: int, says_four: Path
) -> None:
    run_llm_eval(db, settings, study_id, _config(says_four))
    with db.session() as session:
        study = get_study(session, study_id)
        rows, excluded = analysis_rows(session, study)
        data = get_hit_type("likert").analyze(rows, excluded, study.config)
    full = data["full"]
    assert full["rater_groups"] == ["crowd", "llm:says-four"]
    assert full["counts"]["by_rater_group"]["llm:says-four"] == {
        "n_raters": 3, "n_items": 3, "n_ratings": 18,
    }  # fmt: skip
    taus = [t for t in full["tau_between_groups"] if t["group_b"] == "llm:says-four"]
    assert {(t["group_a"], t["attribute"], t["n_items"]) for t in taus} == {
        ("crowd", name, 3) for name in ATTRIBUTES
    }
    means = {
        (d["rater_group"], d["attribute"]): d["mean"]
        for d in full["descriptives"]
        if d["item_group"] is None
    }
    assert means[("llm:says-four", "fluency")] == 4.0


def test_a_temperature_sweep_stores_one_group_per_temperature(
    db: Database, settings: Settings, study_id: int, says_four: Path
) -> None:
    summaries = run_llm_sweep(
        db, settings, study_id, _config(says_four, samples=1), [0.5, 1.5], rater_group="lm"
    )
    assert [(s.rater_group, s.temperature) for s in summaries] == [
        ("lm@t0.5", 0.5),
        ("lm@t1.5", 1.5),
    ]
    for group, temperature in (("lm@t0.5", 0.5), ("lm@t1.5", 1.5)):
        stored = _llm_responses(db, study_id, group)
        assert len(stored) == 3
        assert {e["temperature"] for r, _ in stored for e in r.events} == {temperature}


def test_only_likert_studies_and_short_group_names(
    db: Database, settings: Settings, make_study: Any, study_id: int, says_four: Path
) -> None:
    boundary = make_study()
    with pytest.raises(ValidationError, match="is a boundary study; LLM evaluation rates Likert"):
        run_llm_eval(db, settings, boundary, _config(says_four))
    with pytest.raises(ValidationError, match="rater group is 1 to 100 characters"):
        run_llm_eval(db, settings, study_id, _config(says_four), rater_group="x" * 101)


def test_the_cli_rates_in_process_and_prints_a_summary(
    runner: CliRunner, db: Database, study_id: int, says_four: Path, make_study: Any
) -> None:
    args = ["llm-eval", str(study_id), "--model", str(says_four), "--max-new-tokens", "8"]
    result = runner.invoke(main, [*args, "--samples", "2", "--sanity-check"])
    assert result.exit_code == 0, result.output
    assert (
        "sanity check FAILED: two identical titles got meaning preservation 4, 4" in result.output
    )
    assert (
        "llm:says-four: 3 items x 2 questions x 2 samples at temperature 1 -> 6 responses, "
        "12 ratings, 0 missing"
    ) in result.output
    assert len(_llm_responses(db, study_id, "llm:says-four")) == 6
    sweep = runner.invoke(
        main, [*args, "--group", "s", "--temperature", "0.7", "--temperature", "1"]
    )
    assert sweep.exit_code == 0, sweep.output
    assert "s@t0.7: 3 items" in sweep.output and "s@t1: 3 items" in sweep.output
    wrong = runner.invoke(main, ["llm-eval", str(make_study()), "--model", str(says_four)])
    assert wrong.exit_code == 1 and "LLM evaluation rates Likert studies" in wrong.output
    bad = runner.invoke(main, [*args, "--top-p", "2"])
    assert bad.exit_code == 1 and "top_p: must be in (0, 1]" in bad.output
    assert "--temperature" in runner.invoke(main, ["llm-eval", "--help"]).output


def test_the_queued_job_runs_on_the_models_queue_with_its_progress(
    runner: CliRunner, db: Database, settings: Settings, study_id: int, says_four: Path
) -> None:
    result = runner.invoke(
        main,
        ["llm-eval", str(study_id), "--model", str(says_four), "--max-new-tokens", "8",
         "--samples", "2", "--batch-size", "2", "--queue"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    job_id = result.output.split()[0]
    connection = redis.Redis.from_url(settings.redis_url or "")
    assert job_queue(MODELS, connection).job_ids == [job_id]
    assert _llm_responses(db, study_id, "llm:says-four") == []
    run_worker(settings, burst=True)
    job = fetch_job(job_id, connection)
    assert job.is_finished, job.latest_result()
    assert job.meta["progress"] == 1.0
    assert "llm:says-four: 6 responses, 12 ratings, 0 missing" in str(job.return_value())
    assert len(_llm_responses(db, study_id, "llm:says-four")) == 6
    # The outbox event refreshed the report, which now shows the LLM group beside the crowd.
    with db.session() as session:
        report = session.scalar(select(Report).where(Report.study_id == study_id))
        assert report is not None
        assert report.data["full"]["rater_groups"] == ["crowd", "llm:says-four"]
