"""Reward-model runs: the filtered set, aggregated labels, retraining after N labels on the
models queue with progress in the job's meta, the CLI, the API and the dashboard."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.cli import main
from crowd.exceptions import InvalidConfig
from crowd.ml.reward import collect, execute_run, maybe_retrain, request_run
from crowd.quality import stats
from crowd.queue import EVENTS, fetch_job, redis_connection
from crowd.queue.runner import run_worker
from crowd.review import Reviewer, act
from crowd.settings import Settings
from crowd.storage import Database, OutboxEvent, RewardRun, Role, RunStatus, Study, Worker
from crowd.studies.annotations import AnnotationRecord, import_annotations
from models.backbones import build_tiny_encoder
from models.reward.mock import MockLabeler, mock_comparisons
from models.reward.model import RewardModel
from tests.conftest import join, log_in_to_dashboard

TESTER = Reviewer("tester", Role.EXPERIMENTER)
GOOD = ("wonderful", "happy", "great", "lovely", "bright")
BAD = ("terrible", "sad", "awful", "gloomy", "cold")
FAST = {"learning_rate": 0.002, "held_out": 0.2}


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny")


@pytest.fixture
def backbone(settings: Settings, tiny_encoder: Path) -> str:
    """The tiny encoder as study configs name backbones: a directory in data_dir/backbones."""
    shelf = settings.data_dir / "backbones"
    shelf.mkdir(parents=True, exist_ok=True)
    (shelf / "tiny").symlink_to(tiny_encoder, target_is_directory=True)
    return "tiny"


def items(n: int, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Comparison items whose best candidate is the happy one, and that index per item."""
    rng = random.Random(seed)
    records, truth = [], {}
    for i in range(n):
        # Three distinct gloomy texts and one happy one (candidates must differ).
        candidates = [" ".join(rng.sample(BAD, 3)) + f" {j}" for j in range(4)]
        best = rng.randrange(4)
        candidates[best] = " ".join(rng.choice(GOOD) for _ in range(3))
        records.append({"id": f"c{i}", "query": f"Day {i} was", "candidates": candidates})
        truth[f"c{i}"] = best
    return records, truth


def study_with(
    make_study: Callable[..., int], n: int, reward_model: dict[str, Any]
) -> tuple[int, dict[str, int]]:
    records, truth = items(n)
    config = {"annotations_per_item": 3, "attention_rate": 0.0, "overlap_share": 0,
              "reward_model": reward_model}  # fmt: skip
    return make_study(records, config, hit_type="comparison"), truth


def label(db: Database, study_id: int, truth: dict[str, int], worker: str,
          item_ids: list[str] | None = None, wrong: bool = False) -> None:  # fmt: skip
    records = [
        AnnotationRecord(where=f"{worker}/{item}", worker=worker, item=item,
                         answer={"best": (truth[item] + 1) % 4 if wrong else truth[item]})
        for item in (item_ids if item_ids is not None else sorted(truth))
    ]  # fmt: skip
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        import_annotations(session, study, records)


def worker_id(db: Database, external_id: str) -> int:
    with db.session() as session:
        worker = session.scalar(select(Worker).where(Worker.external_id == external_id))
        assert worker is not None
        return worker.id


def run_row(db: Database, run_id: int) -> RewardRun:
    with db.session() as session:
        run = session.get(RewardRun, run_id)
        assert run is not None
        session.expunge(run)
        return run


def answer_live(client: FlaskClient, auth: dict[str, str], study_id: int,
                truth: dict[str, int], external_id: str, wrong: bool = True) -> None:  # fmt: skip
    """A live sim worker picks the best (or a wrong) candidate of every item, by the API."""
    who = join(client, auth, external_id=external_id)
    while True:
        view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).json
        if view.get("done"):
            return
        item = view["task"]["query"].removeprefix("Day ").removesuffix(" was")
        text = items_by_id[f"c{item}"][(truth[f"c{item}"] + int(wrong)) % 4]
        position = view["task"]["candidates"].index(text)
        reply = client.post(f"/api/work/assignments/{view['assignment_id']}/step",
                            json={"step": 0, "choice": position}, headers=who)  # fmt: skip
        assert reply.status_code == 200, reply.json


items_by_id = {record["id"]: record["candidates"] for record in items(60)[0]}


def test_a_run_trains_on_the_filtered_set_and_saves_its_model(
    client: FlaskClient, auth: dict[str, str], db: Database, settings: Settings,
    make_study: Callable[..., int], backbone: str,
) -> None:  # fmt: skip
    study_id, truth = study_with(make_study, 60, {"settings": {"backbone": backbone, **FAST}})
    label(db, study_id, truth, "good-1")
    label(db, study_id, truth, "good-2")
    answer_live(client, auth, study_id, truth, "spammer")
    spammer = worker_id(db, "spammer")
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        act(session, study, spammer, "soft_reject", TESTER, {"reason": "off"})
        run_id = request_run(session, study).id
    run = execute_run(db, settings, run_id)
    assert run.status == RunStatus.FINISHED
    assert run.data["labels_stored"] == 180 and run.data["labels_left_out"] == 60
    assert run.data["labels"] == 120 and run.data["workers"] == 2
    assert run.data["held_out_labels"] + run.data["train_labels"] == 120
    held = run.metrics["held_out"]
    assert held["chance"] == 0.25 and held["accuracy"] >= 0.8
    path = Path(str(run.path))
    assert path == settings.data_dir / "models" / f"study-{study_id}" / f"run-{run_id}"
    assert "- labels_left_out: 60" in (path / "README.md").read_text()
    model = RewardModel.load(path)
    happy, sad = model.score(["Day 1 was"] * 2, ["happy great lovely", "sad cold awful"])
    assert happy > sad
    # Running the job again does not train again.
    assert execute_run(db, settings, run_id).finished_at == run.finished_at


def test_aggregated_labels_give_one_label_per_item(
    client: FlaskClient, auth: dict[str, str], db: Database, make_study: Callable[..., int]
) -> None:
    study_id, truth = study_with(make_study, 12, {"labels": "majority_vote"})
    answer_live(client, auth, study_id, truth, "a", wrong=False)
    answer_live(client, auth, study_id, truth, "b", wrong=False)
    answer_live(client, auth, study_id, truth, "c")
    with db.read_session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        raw, _ = collect(session, study, "raw")
        voted, info = collect(session, study, "majority_vote")
    assert len(raw) == 36 and len(voted) == 12 == info["items"]
    assert {c.item: c.best for c in voted} == truth


def test_settings_are_checked_before_a_run_is_queued(
    db: Database, make_study: Callable[..., int]
) -> None:
    study_id, _ = study_with(make_study, 2, {})
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        with pytest.raises(InvalidConfig, match="unknown reward model settings"):
            request_run(session, study, overrides={"lr": 0.1})
        with pytest.raises(InvalidConfig, match="labels must be one of"):
            request_run(session, study, labels="mace")
    boundary = make_study()
    with db.session() as session:
        study = session.get(Study, boundary)
        assert study is not None
        with pytest.raises(InvalidConfig, match="comparison"):
            request_run(session, study)


def test_the_study_retrains_after_every_n_labels_on_the_models_queue(
    db: Database, settings: Settings, make_study: Callable[..., int], backbone: str
) -> None:
    config = {"retrain_every": 20, "settings": {"backbone": backbone, **FAST}}
    study_id, truth = study_with(make_study, 40, config)
    ids = sorted(truth)
    connection = redis_connection(str(settings.redis_url))
    label(db, study_id, truth, "a", ids[:19])
    assert maybe_retrain(db, connection, study_id) is None  # 19 < 20
    # The import's outbox event reaches process_event, which queues the run; the same
    # burst worker trains it on the crowd-models queue.
    label(db, study_id, truth, "a", ids[19:25])
    run_worker(settings, burst=True)
    with db.session() as session:
        runs = session.scalars(select(RewardRun).where(RewardRun.study_id == study_id)).all()
        assert [(r.trigger, r.status, r.labels_at_request) for r in runs] == [
            ("retrain_every", RunStatus.FINISHED, 25)
        ]
        job_id = runs[0].job_id
    meta = fetch_job(str(job_id), connection).get_meta(refresh=True)
    assert meta["progress"]["phase"] == "done" and meta["progress"]["fraction"] == 1.0
    assert maybe_retrain(db, connection, study_id) is None  # no new labels since
    label(db, study_id, truth, "b", ids[:20])
    run_id = maybe_retrain(db, connection, study_id)
    assert run_id is not None and run_row(db, run_id).status == RunStatus.QUEUED
    assert maybe_retrain(db, connection, study_id) is None  # one run at a time
    run_worker(settings, burst=True, queues=("crowd-models",))
    finished = run_row(db, run_id)
    assert finished.status == RunStatus.FINISHED and finished.data["labels"] == 45


def test_an_import_retrains_once_its_last_rater_is_judged(
    db: Database,
    settings: Settings,
    make_study: Callable[..., int],
    backbone: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One rater a job: the import's QC refresh takes three events; the first two pass it on.
    monkeypatch.setattr(stats, "RATERS_PER_JOB", 1)
    config = {"retrain_every": 5, "settings": {"backbone": backbone, **FAST}}
    study_id, truth = study_with(make_study, 10, config)
    records = [
        AnnotationRecord(where=f"{worker}/{item}", worker=worker, item=item,
                         answer={"best": truth[item]})
        for worker in ("a", "b", "c") for item in sorted(truth)
    ]  # fmt: skip
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        import_annotations(session, study, records)
    run_worker(settings, burst=True, queues=(EVENTS,))
    with db.session() as session:
        handled = session.scalars(select(OutboxEvent.handled_at).order_by(OutboxEvent.id)).all()
        runs = session.scalars(select(RewardRun).where(RewardRun.study_id == study_id)).all()
    assert len(handled) == 3 and None not in handled
    # Queued after the last rater's QC, so the run's filtered set knows every exclusion.
    assert [(r.trigger, r.labels_at_request) for r in runs] == [("retrain_every", 30)]
    assert runs[0].created_at > max(at for at in handled if at is not None)


def test_the_cli_trains_with_a_progress_bar_and_lists_runs(
    runner: CliRunner, db: Database, make_study: Callable[..., int], tiny_encoder: Path
) -> None:
    study_id, truth = study_with(make_study, 30, {})
    label(db, study_id, truth, "a")
    result = runner.invoke(
        main, ["train", "reward", str(study_id), "--backbone", str(tiny_encoder), "--learning-rate",
               "0.002", "--setting", "held_out=0.2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "training" in result.output and "100%" in result.output
    assert "finished: 24 labels" in result.output and "held-out top-1" in result.output
    listed = runner.invoke(main, ["train", "runs", str(study_id)])
    assert listed.exit_code == 0 and "finished" in listed.output and "top1=" in listed.output
    bad = runner.invoke(main, ["train", "reward", str(study_id), "--setting", "nope=1"])
    assert bad.exit_code == 1 and "unknown reward model settings" in bad.output
    assert "--backbone" in runner.invoke(main, ["train", "reward", "--help"]).output


def test_the_api_queues_runs_and_the_dashboard_shows_them(
    client: FlaskClient, auth: dict[str, str], api_key: str, db: Database, settings: Settings,
    make_study: Callable[..., int], backbone: str,
) -> None:  # fmt: skip
    study_id, truth = study_with(make_study, 20, {"settings": {"backbone": backbone, **FAST}})
    label(db, study_id, truth, "a")
    reply = client.post(f"/api/studies/{study_id}/reward-models", json={"labels": "raw"},
                        headers=auth)  # fmt: skip
    assert reply.status_code == 202 and reply.json["status"] == "queued"
    bad = client.post(f"/api/studies/{study_id}/reward-models",
                      json={"settings": {"epochs": 0}}, headers=auth)  # fmt: skip
    assert bad.status_code == 422 and "epochs" in bad.json["error"]
    assert log_in_to_dashboard(client, api_key).status_code == 302
    page = client.get(f"/dashboard/studies/{study_id}").get_data(as_text=True)
    assert "Reward models" in page and "waiting for a crowd-models worker" in page
    run_worker(settings, burst=True, queues=("crowd-models",))
    runs = client.get(f"/api/studies/{study_id}/reward-models", headers=auth).json["runs"]
    assert runs[0]["status"] == "finished" and runs[0]["progress"]["phase"] == "done"
    assert runs[0]["metrics"]["held_out"]["chance"] == 0.25
    for body, field in (
        ({"settings": {"learning_rate": "abc"}}, "settings.learning_rate"),
        ({"settings": {"backbone": "/etc"}}, "settings.backbone"),
        ({"settings": {"backbone": "a..b"}}, "backbone"),  # the name check of the domain
        ({"settings": {"normalize": "no"}}, "settings.normalize"),
        ({"settings": {"epoch": 2}}, "settings.epoch"),
        ({"settings": []}, "settings"),
        ({"labels": "mace"}, "labels"),
        ({"label": "raw"}, "label"),
    ):
        refused = client.post(f"/api/studies/{study_id}/reward-models", json=body, headers=auth)
        assert refused.status_code == 422 and refused.json["field"] == field, body
    page = client.get(f"/dashboard/studies/{study_id}").get_data(as_text=True)
    assert "(chance 25%)" in page
    spec = client.get("/openapi.json").json
    assert "/api/studies/{study_id}/reward-models" in spec["paths"]


def test_a_real_minilm_reward_model_learns_the_mock_labelers_rule(
    db: Database, settings: Settings, make_study: Callable[..., int]
) -> None:
    """End to end on the real all-MiniLM-L6-v2 encoder (bundled, offline), paper defaults."""
    labels = mock_comparisons(140, seed=1, labeler=MockLabeler(temperature=0.3))
    records = [{"id": c.item, "query": c.query, "candidates": list(c.candidates)}
               for c in labels]  # fmt: skip
    config = {"annotations_per_item": 1, "attention_rate": 0.0, "overlap_share": 0,
              "reward_model": {"settings": {"held_out": 0.3, "seed": 2}}}  # fmt: skip
    study_id = make_study(records, config, hit_type="comparison")
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        import_annotations(session, study, [
            AnnotationRecord(where=str(c.item), worker="mock-labeler", item=str(c.item),
                             answer={"best": c.best})
            for c in labels
        ])  # fmt: skip
        run_id = request_run(session, study).id
    run = execute_run(db, settings, run_id)
    assert run.status == RunStatus.FINISHED and run.settings == {"held_out": 0.3, "seed": 2}
    saved = json.loads((Path(str(run.path)) / "reward_config.json").read_text())
    assert saved["config"]["backbone"] == "minilm" and saved["kind"] == "encoder"
    assert saved["config"]["learning_rate"] == 1.77e-5 and saved["config"]["batch_size"] == 8
    held = run.metrics["held_out"]
    assert held["n"] == 42 and held["accuracy"] >= 0.5 > held["chance"] + 0.2


def test_a_run_whose_job_was_lost_does_not_block_retraining(
    db: Database, settings: Settings, make_study: Callable[..., int], backbone: str
) -> None:
    config = {"retrain_every": 5, "labels": "bradley_terry",
              "settings": {"backbone": backbone, **FAST}}  # fmt: skip
    study_id, truth = study_with(make_study, 10, config)
    connection = redis_connection(str(settings.redis_url))
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        stuck = request_run(session, study).id  # queued, but its job never reached Redis
    label(db, study_id, truth, "a")
    label(db, study_id, truth, "b")
    run_id = maybe_retrain(db, connection, study_id)
    assert run_id is not None and run_id != stuck
    lost = run_row(db, stuck)
    assert lost.status == RunStatus.FAILED and "lost" in str(lost.error)
    run_worker(settings, burst=True, queues=("crowd-models",))
    # Aggregated labels come from imported answers too: one per item.
    done = run_row(db, run_id)
    assert done.status == RunStatus.FINISHED and done.data["labels"] == 10
