"""Annotations collected elsewhere become imported responses that every analysis uses."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from sqlalchemy import func, select

from crowd.cli import main
from crowd.exceptions import InvalidItem, ValidationError
from crowd.storage import Database, Item, OutboxEvent, Response, ResponseSource
from crowd.studies.annotations import import_file, records_from_csv, roft_item_id
from crowd.studies.lifecycle import get_study
from crowd.studies.reports import analysis_rows, export
from tasks.boundary.roft import ROFT_COLUMNS
from tests.conftest import join, passage


def _responses(db: Database, study_id: int) -> list[Response]:
    with db.session() as session:
        rows = session.scalars(
            select(Response).where(Response.study_id == study_id).order_by(Response.id)
        ).all()
        session.expunge_all()
        return list(rows)


def _import(db: Database, study_id: int, text: str, fmt: str, **options: Any) -> dict[str, Any]:
    with db.session() as session:
        study = get_study(session, study_id)
        summary = import_file(session, study, text, fmt, **options)
        return summary.to_json()


def test_jsonl_answers_become_imported_responses_with_their_times(
    db: Database, make_study: Any
) -> None:
    study_id = make_study([passage("a", 2), passage("b", 5)])
    lines = [
        {"worker": "mturk-A1", "item": "a", "answer": {"guess": 2}, "created_at": "2021-03-01"},
        {"worker": "mturk-A1", "item": "b", "answer": {"guess": 3},
         "created_at": "2021-03-01T10:00:00+02:00", "explanation": "odd", "reasons": ["generic"]},
        {"worker": "teacher-1", "item": "a", "answer": {"guess": "4"}, "rater_group": "expert"},
    ]  # fmt: skip
    text = "\n".join(json.dumps(line) for line in lines)
    assert _import(db, study_id, text, "jsonl") == {
        "added": 3, "skipped_duplicates": 0, "items_added": 0, "workers": 2,
    }  # fmt: skip
    stored = _responses(db, study_id)
    assert [r.answer for r in stored] == [
        {"guess": 2, "all_human": False},
        {"guess": 3, "all_human": False},
        {"guess": 4, "all_human": False},
    ]
    assert all(r.source == ResponseSource.IMPORTED and r.assignment_id is None for r in stored)
    assert [r.rater_group for r in stored] == ["crowd", "crowd", "expert"]
    assert stored[0].created_at.isoformat() == "2021-03-01T00:00:00+00:00"
    assert stored[1].created_at.isoformat() == "2021-03-01T08:00:00+00:00"
    assert stored[1].explanation == "odd" and stored[1].reasons == ["generic"]
    assert [r.score for r in stored] == [5.0, 0.0, 3.0]  # the server scores imports too
    with db.session() as session:
        study = get_study(session, study_id)
        rows, _excluded = analysis_rows(session, study)
        assert {row["source"] for row in rows} == {"imported"}
        # One outbox event per import refreshes the workers' numbers and the report.
        events = session.scalars(select(OutboxEvent)).all()
        assert [e.topic for e in events] == ["responses.imported"]
        assert len(events[0].payload["worker_ids"]) == 2


def test_unicode_line_separators_inside_records_are_text_not_line_ends(
    db: Database, make_study: Any
) -> None:
    study_id = make_study([passage("a", 2), passage("b", 3)])
    jsonl = json.dumps(
        {"worker": "w1", "item": "a", "answer": {"guess": 2}, "explanation": "odd\u2028turn"},
        ensure_ascii=False,
    )
    assert "\u2028" in jsonl
    assert _import(db, study_id, jsonl, "jsonl")["added"] == 1
    csv_text = "worker,item,guess,explanation\r\nw1,b,3,page\x0cbreak\r\n"
    assert _import(db, study_id, csv_text, "csv")["added"] == 1
    assert [r.explanation for r in _responses(db, study_id)] == ["odd\u2028turn", "page\x0cbreak"]


def test_a_bad_record_anywhere_stores_nothing(db: Database, make_study: Any) -> None:
    study_id = make_study([passage("a", 2), passage("b", 5)])
    good = json.dumps({"worker": "w1", "item": "a", "answer": {"guess": 2}})
    for bad, message in [
        ({"worker": "w1", "item": "zzz", "answer": {"guess": 2}}, "no item 'zzz'"),
        ({"worker": "w2", "item": "a", "answer": {"guess": 9}}, "outside 1..5"),
        ({"worker": "w2", "item": "a", "answer": {"guess": "two"}}, "whole number"),
        ({"worker": "w2", "item": "a", "answer": 2}, "must be a JSON object"),
        ({"worker": "", "item": "a", "answer": {"guess": 2}}, "'worker'"),
        ({"worker": "w2", "item": "a", "answer": {"guess": 2}, "created_at": "yesterday"},
         "ISO 8601"),
        ({"worker": "w2", "item": "a", "answer": {"guess": 2}, "extra": 1}, "unknown keys"),
    ]:  # fmt: skip
        with pytest.raises(ValidationError, match=message):
            _import(db, study_id, good + "\n" + json.dumps(bad), "jsonl")
    assert _responses(db, study_id) == []
    with pytest.raises(InvalidItem, match="line 2.*already on line 1"):
        _import(db, study_id, good + "\n" + good, "jsonl")


def test_duplicates_of_earlier_imports_are_refused_or_skipped(
    db: Database, make_study: Any
) -> None:
    study_id = make_study([passage("a", 2), passage("b", 3)])
    first = "worker,item,guess\nw1,a,2\n"
    _import(db, study_id, first, "csv")
    grown = first + "w1,b,3\nw2,a,5\n"
    with pytest.raises(InvalidItem, match="already has an answer.*skip_duplicates"):
        _import(db, study_id, grown, "csv")
    summary = _import(db, study_id, grown, "csv", skip_duplicates=True)
    assert summary["added"] == 2 and summary["skipped_duplicates"] == 1
    assert len(_responses(db, study_id)) == 3


def test_csv_rows_of_one_worker_and_item_gather_into_one_long_format_answer() -> None:
    text = (
        "worker,item,attribute,rating,rater_group\n"
        "t1,s1,grammaticality,4,expert\n"
        "t1,s1,relevance,,expert\n"
        "t2,s1,grammaticality,3,expert\n"
    )
    records = records_from_csv(io.StringIO(text))
    assert [(r.worker, r.item, r.answer, r.rater_group) for r in records] == [
        ("t1", "s1", {"grammaticality": "4", "relevance": None}, "expert"),
        ("t2", "s1", {"grammaticality": "3"}, "expert"),
    ]
    with pytest.raises(InvalidItem, match="second 'grammaticality'"):
        records_from_csv(io.StringIO(text + "t2,s1,grammaticality,5,expert\n"))
    with pytest.raises(ValidationError, match="lacks column.*item"):
        records_from_csv(io.StringIO("worker,guess\nw,1\n"))
    with pytest.raises(InvalidItem, match="line 3: 2 fields"):
        records_from_csv(io.StringIO("worker,item,guess\nw,a,1\nw,b\n"))


def test_a_roft_release_round_trips_into_a_new_study(
    client: FlaskClient, auth: dict[str, str], db: Database, make_study: Any
) -> None:
    """Play a study live, export it as RoFT CSV, import that into an empty study."""
    items = [passage(f"p{i}", 1 + i % 4, category="news", generator="gpt2") for i in range(4)]
    source_id = make_study(items, {"annotations_per_item": 2, "attention_rate": 0.0})
    for worker in ("w1", "w2"):
        headers = join(client, auth, external_id=worker)
        for _ in range(4):
            view = client.post(
                f"/api/work/studies/{source_id}/next", json={}, headers=headers
            ).get_json()
            path = f"/api/work/assignments/{view['assignment_id']}"
            step = 0
            while not view.get("answered"):
                choice = "machine" if step == 2 else "human"
                view = client.post(
                    f"{path}/step", json={"step": step, "choice": choice}, headers=headers
                ).get_json()
                step += 1
            if view.get("needs_followup"):
                client.post(f"{path}/explanation", json={"reasons": ["grammar"]}, headers=headers)
    buffer = io.StringIO()
    with db.session() as session:
        export(session, get_study(session, source_id), "roft", buffer, filtered=False)
    created = client.post(
        "/api/studies", json={"name": "RoFT release", "hit_type": "boundary"}, headers=auth
    ).get_json()
    url = f"/api/studies/{created['id']}/annotations?format=roft&rater_group=roft"
    answer = client.post(url, data=buffer.getvalue(), headers=auth)
    assert answer.status_code == 201, answer.get_json()
    assert answer.get_json() == {
        "added": 8, "skipped_duplicates": 0, "items_added": 4, "workers": 2,
    }  # fmt: skip
    with db.session() as session:
        before = {(r["worker"].rsplit(":", 1)[1], r["guess"], r["boundary"], r["points"])
                  for r in analysis_rows(session, get_study(session, source_id))[0]}  # fmt: skip
        after_rows = analysis_rows(session, get_study(session, created["id"]))[0]
        after = {(r["worker"].rsplit(":", 1)[1], r["guess"], r["boundary"], r["points"])
                 for r in after_rows}  # fmt: skip
        assert after == before
        assert {r["category"] for r in after_rows} == {"news"}
        assert {r["generator"] for r in after_rows} == {"gpt2"}
        assert {tuple(r["reasons"]) for r in after_rows if r["guess"] < 5} <= {("grammar",)}
        item = session.scalar(select(Item).where(Item.study_id == created["id"]).limit(1))
        assert item is not None
        assert item.external_id == roft_item_id(
            item.content["sentences"], item.expected["boundary"]
        )
    # The same file again: every answer is already there.
    again = client.post(url, data=buffer.getvalue(), headers=auth)
    assert again.status_code == 422 and "already has an answer" in again.get_json()["error"]
    skipped = client.post(url + "&skip_duplicates=true", data=buffer.getvalue(), headers=auth)
    assert skipped.get_json() == {
        "added": 0, "skipped_duplicates": 8, "items_added": 0, "workers": 0,
    }  # fmt: skip


def test_the_api_refuses_other_experimenters_and_bad_parameters(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study([passage("a", 2)])
    url = f"/api/studies/{study_id}/annotations"
    assert client.post(url, data="worker,item,guess\nw,a,2\n").status_code == 401
    bad = client.post(url + "?format=xml", data="", headers=auth)
    assert bad.status_code == 422 and bad.get_json()["field"] == "format"
    assert "'jsonl', 'csv' or 'roft'" in bad.get_json()["error"]
    ok = client.post(url + "?format=csv", data="worker,item,guess\nw,a,2\n", headers=auth)
    assert ok.status_code == 201 and ok.get_json()["added"] == 1
    for query, field in (("?skip_duplicates=maybe", "skip_duplicates"),
                         ("?max_sentences=0", "max_sentences"),
                         ("?rater_group=" + "g" * 101, "rater_group")):  # fmt: skip
        reply = client.post(url + query, data="worker,item,guess\nw,a,2\n", headers=auth)
        assert reply.status_code == 422 and reply.get_json()["field"] == field, query
    assert client.post(url + "?format=csv", data="", headers=auth).status_code == 422


def test_a_cell_over_the_csv_field_limit_is_refused_on_its_line(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    """An unclosed quote swallows the rest of the file into one cell: csv stops it at
    csv.field_size_limit, and the client learns where, instead of a server error."""
    study_id = make_study([passage("a", 2)])
    url = f"/api/studies/{study_id}/annotations"
    huge = "x" * (csv.field_size_limit() + 1)
    for fmt, text in (
        ("csv", f'worker,item,guess\nw,a,2\nv,a,"{huge}"\n'),
        ("roft", f'{",".join(ROFT_COLUMNS)}\n"{huge}"\n'),
    ):
        reply = client.post(f"{url}?format={fmt}", data=text, headers=auth)
        assert reply.status_code == 422, reply.get_json()
        body = reply.get_json()
        assert body["field"] == ("line 3" if fmt == "csv" else "line 2"), body
        assert "longer than" in body["error"]
    with pytest.raises(InvalidItem, match="longer than"):
        records_from_csv(io.StringIO(f'worker,item,guess\nw,a,"{huge}"\n', newline=""))


def test_cli_imports_annotations_and_guesses_the_format(
    runner: CliRunner, tmp_path: Path, db: Database, make_study: Any
) -> None:
    study_id = make_study([passage("a", 2), passage("b", 3)])
    path = tmp_path / "old-batch.csv"
    path.write_text("worker,item,guess,created_at\nA1,a,2,2020-01-01\nA1,b,3,2020-01-01\n")
    result = runner.invoke(
        main, ["study", "import-annotations", str(study_id), str(path), "--rater-group", "mturk"]
    )
    assert result.exit_code == 0, result.output
    assert "added 2 responses by 1 workers" in result.output and "(csv;" in result.output
    with db.session() as session:
        groups = session.scalars(select(Response.rater_group).distinct()).all()
        assert groups == ["mturk"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"worker": "x", "item": "nope", "answer": {"guess": 1}}\n')
    failed = runner.invoke(main, ["study", "import-annotations", str(study_id), str(bad)])
    assert failed.exit_code == 1 and "no item 'nope'" in failed.output
    with db.session() as session:
        assert session.scalar(select(func.count(Response.id))) == 2


def _sample_study(db: Database, make_study: Any, hit_type: str, config: dict[str, Any]) -> int:
    from crowd.demo import load_samples

    return make_study(load_samples(hit_type), config, hit_type=hit_type)


def test_a_spreadsheet_of_expert_ratings_becomes_a_rater_group_of_the_likert_analysis(
    db: Database, make_study: Any
) -> None:
    from crowd.demo import TASKS

    study_id = _sample_study(db, make_study, "likert", {"template": "story"})
    text = (TASKS / "likert" / "samples" / "expert_ratings.csv").read_text()
    summary = _import(db, study_id, text, "csv")
    assert summary["added"] == 90 and summary["workers"] == 3
    first = text.splitlines()[1].split(",")  # expert-1, story-01-human, expert, 4 ratings
    stored = _responses(db, study_id)
    assert stored[0].answer["ratings"] == {
        "grammaticality": int(first[3]),
        "cohesiveness": int(first[4]),
        "likability": int(first[5]),
        "relevance": int(first[6]),
    }
    # Long format (one row per rating), another group, with a missing rating.
    long = (
        "worker,item,attribute,rating,created_at\n"
        "t1,story-01-human,grammaticality,5,2023-04-01\n"
        "t1,story-01-human,cohesiveness,4,2023-04-01\n"
        "t1,story-01-human,relevance,,2023-04-01\n"
    )
    assert _import(db, study_id, long, "csv", rater_group="teachers")["added"] == 1
    with db.session() as session:
        study = get_study(session, study_id)
        rows, _excluded = analysis_rows(session, study)
        data = _analyze("likert", rows, study.config)
    assert data["full"]["rater_groups"] == ["expert", "teachers"]
    assert data["full"]["counts"]["by_rater_group"]["expert"]["n_raters"] == 3
    teachers = [row for row in rows if row["rater_group"] == "teachers"]
    assert teachers[0]["ratings"]["relevance"] is None
    with pytest.raises(InvalidItem, match="line 2.*unknown attribute 'fluency'"):
        _import(db, study_id, "worker,item,fluency\nx,story-01-human,3\n", "csv")
    with pytest.raises(InvalidItem, match="line 2.*no rating given"):
        _import(db, study_id, "worker,item,likability\nx,story-01-human,\n", "csv")


def test_expert_labels_fill_the_expert_rows_of_the_comparison_agreement_table(
    db: Database, make_study: Any
) -> None:
    from crowd.demo import TASKS

    study_id = _sample_study(db, make_study, "comparison", {"template": "sentiment"})
    text = (TASKS / "comparison" / "samples" / "expert_labels.csv").read_text()
    assert _import(db, study_id, text, "csv")["added"] == 30
    lines = [line.split(",") for line in text.splitlines()[1:]]
    by_item: dict[str, list[int]] = {}
    for _worker, item, _group, best in lines:
        by_item.setdefault(item, []).append(int(best))
    agreeing = sum(1 for labels in by_item.values() if labels[0] == labels[1])
    with db.session() as session:
        study = get_study(session, study_id)
        rows, _excluded = analysis_rows(session, study)
        data = _analyze("comparison", rows, study.config)
    expert = data["full"]["agreement"]["expert_expert"]
    assert (expert["n_agree"], expert["n_pairs"]) == (agreeing, 15)
    with pytest.raises(InvalidItem, match="'best' 7 is outside 0..3"):
        _import(db, study_id, "worker,item,best\nx,sentiment-01,7\n", "csv")


def _analyze(hit_type: str, rows: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    from tasks import get_hit_type

    return get_hit_type(hit_type).analyze(rows, set(), config)
