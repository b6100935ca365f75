"""Item uploads in JSON lines or CSV: a per-line preview first, then all or none stored."""

from __future__ import annotations

import csv
import io
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from crowd.accounts import get_or_create_experimenter
from crowd.cli import main
from crowd.demo import load_samples
from crowd.exceptions import InvalidItem, StudyNotOpen, ValidationError
from crowd.storage import Database, Item
from crowd.studies import uploads
from crowd.studies.lifecycle import change_status, create_study, get_study

TASKS = Path(__file__).resolve().parents[3] / "tasks"
HIT_TYPES = ("boundary", "likert", "comparison", "taboo")
# The columns the round trip writes as dotted parts rather than one cell.
DOTTED = ("decoding", "expected_ratings")


def _study(db: Database, hit_type: str = "boundary", config: dict[str, Any] | None = None) -> int:
    with db.session() as session:
        owner = get_or_create_experimenter(session, "ada")
        return create_study(session, owner, f"{hit_type} items", hit_type, config or {}).id


def _check(db: Database, study_id: int, text: str, fmt: str = "auto") -> dict[str, Any]:
    with db.session() as session:
        return uploads.check_items(session, get_study(session, study_id), text, fmt)


def _store(db: Database, study_id: int, text: str, fmt: str = "auto") -> int:
    with db.session() as session:
        return uploads.store_items(session, get_study(session, study_id), text, fmt)


def _items(db: Database, study_id: int) -> dict[str, dict[str, Any]]:
    with db.read_session() as session:
        rows = session.scalars(select(Item).where(Item.study_id == study_id)).all()
        return {
            row.external_id: {
                "kind": str(row.kind), "content": row.content, "expected": row.expected,
                "meta": row.meta, "category": row.category, "rank": row.rank,
                "target": row.target,
            }
            for row in rows
        }  # fmt: skip


def _problems(preview: dict[str, Any]) -> list[tuple[int, str | None, str]]:
    return [(line["line"], line["field"], line["error"]) for line in preview["lines"]
            if not line["ok"]]  # fmt: skip


def as_csv(records: list[dict[str, Any]]) -> str:
    """Item records as CSV in the plain forms: lists one entry per line of the cell,
    candidates as numbered columns, small objects as dotted columns, meta as a JSON cell."""
    rows: list[dict[str, str]] = []
    for record in records:
        row: dict[str, str] = {}
        for key, value in record.items():
            if value is None:
                continue
            if key == "candidates":
                for index, candidate in enumerate(value):
                    row[f"candidates.{index}.text"] = candidate["text"]
                    row[f"candidates.{index}.policy"] = candidate["policy"]
            elif key in DOTTED:
                row.update({f"{key}.{part}": str(inner) for part, inner in value.items()})
            elif isinstance(value, list):
                row[key] = "\n".join(value)
            elif isinstance(value, dict):
                row[key] = json.dumps(value)
            else:
                row[key] = str(value)
        rows.append(row)
    header = list(dict.fromkeys(name for row in rows for name in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, header, restval="")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


@pytest.mark.parametrize("hit_type", HIT_TYPES)
def test_each_types_samples_store_the_same_items_from_csv_as_from_json_lines(
    db: Database, hit_type: str
) -> None:
    records = load_samples(hit_type)
    from_jsonl, from_csv = _study(db, hit_type), _study(db, hit_type)
    text = "\n".join(json.dumps(record) for record in records)
    assert _store(db, from_jsonl, text) == len(records)
    table = as_csv(records)
    preview = _check(db, from_csv, table)
    assert preview["format"] == "csv" and preview["invalid"] == 0, _problems(preview)
    assert preview["total"] == preview["valid"] == len(records)
    assert _items(db, from_csv) == {}  # a check stores nothing
    assert _store(db, from_csv, table) == len(records)
    assert _items(db, from_csv) == _items(db, from_jsonl)


@pytest.mark.parametrize("hit_type", HIT_TYPES)
def test_the_sample_csv_of_each_type_is_its_json_samples(db: Database, hit_type: str) -> None:
    study_id = _study(db, hit_type)
    text = (TASKS / hit_type / "samples" / "items.csv").read_text(encoding="utf-8")
    assert _check(db, study_id, text)["invalid"] == 0
    _store(db, study_id, text)
    stored = _items(db, study_id)
    assert len(stored) >= 4
    reference = _study(db, hit_type)
    by_id = {str(r.get("id", r.get("word"))): r for r in load_samples(hit_type)}
    shared = [by_id[item_id] for item_id in stored if item_id in by_id]
    _store(db, reference, "\n".join(json.dumps(record) for record in shared))
    for item_id, item in _items(db, reference).items():
        mine = stored[item_id]
        assert mine["content"] == item["content"] and mine["expected"] == item["expected"]
        # The Likert sample leaves out the simulator's meta.quality and adds meta.source.
        assert all(item["meta"][k] == v for k, v in mine["meta"].items() if k != "source")


def test_the_likert_sample_csv_fills_nested_fields_from_dotted_columns(db: Database) -> None:
    study_id = _study(db, "likert")
    _store(db, study_id, (TASKS / "likert" / "samples" / "items.csv").read_text())
    stored = _items(db, study_id)
    gold = next(item for item in stored.values() if item["kind"] == "gold")
    assert gold["expected"] == {"expected_ratings": {"grammaticality": 4, "cohesiveness": 4,
                                                     "likability": 3, "relevance": 5}}  # fmt: skip
    assert stored["story-01-human"]["meta"] == {"source": "stories.jsonl", "group": "human"}
    assert stored["attention-1"]["expected"] == {"expected_rating": 2}


def test_csv_cells_take_json_or_plain_lists_numbers_as_text_and_numbered_columns(
    db: Database,
) -> None:
    study_id = _study(db, "comparison")
    table = (
        "\ufeffid;query;candidates;policies;best;kind;meta.utility;meta.note\n"
        'q1;Once;"[""a"", ""b""]";x|y;1.0;gold;[1, 2];{"deep": true}\n'
        "q2; Twice ;c | d |e;;;;0.5|-1.5|3; plain text \n"
        'q3;Thrice;"e\n\nf\n";"x\ny";;;;\n'
    )
    preview = _check(db, study_id, table)
    assert preview["format"] == "csv" and _problems(preview) == []
    assert [line["line"] for line in preview["lines"]] == [2, 3, 4]
    _store(db, study_id, table)
    items = _items(db, study_id)
    assert items["q1"]["content"]["candidates"] == ["a", "b"]
    assert items["q1"]["expected"] == {"best": 1} and items["q1"]["kind"] == "gold"
    assert items["q1"]["meta"] == {"utility": [1, 2], "note": {"deep": True},
                                   "policies": ["x", "y"]}  # fmt: skip
    assert items["q2"]["content"]["candidates"] == ["c", "d", "e"]
    assert items["q2"]["meta"]["utility"] == [0.5, -1.5, 3]
    assert items["q2"]["meta"]["note"] == "plain text"  # the spaces around a cell go
    assert items["q3"]["content"]["candidates"] == ["e", "f"]
    assert items["q3"]["meta"]["policies"] == ["x", "y"]
    numbered = _study(db, "boundary")
    table = (
        "id,sentences.0,sentences.1,sentences.2,boundary,decoding.strategy,decoding.value,,\n"
        "p1,One.,Two.,Three.,2,top-k,40,,\n"
        "p2,One.,Two.,,2,,,,\n"
    )
    assert _store(db, numbered, table) == 2
    items = _items(db, numbered)
    assert items["p1"]["content"]["sentences"] == ["One.", "Two.", "Three."]
    assert items["p1"]["meta"]["decoding"] == {"strategy": "top-k", "value": 40}
    assert items["p2"]["content"]["sentences"] == ["One.", "Two."]


def test_each_bad_line_is_named_with_its_field_and_nothing_is_stored(db: Database) -> None:
    study_id = _study(db, "boundary")
    with db.session() as session:
        uploads.store_items(session, get_study(session, study_id),
                            '{"id": "old", "sentences": ["a", "b"], "boundary": 1}')  # fmt: skip
    table = (
        "id,sentences,boundary,meta,category\n"
        'a,"One.\nTwo.\nThree.",2,,news\n'  # lines 2-4: fine
        "b,One.|Two.,two,,\n"  # 5: not a number
        "c,One.|Two.,9,,\n"  # 6: out of range
        "a,One.|Two.,1,,\n"  # 7: the id of line 2
        "old,One.|Two.,1,,\n"  # 8: already stored
        'd,One.|Two.,1,"{""x"": ",\n'  # 9: broken JSON
        "e,One.,1,,\n"  # 10: one sentence
        "f,One.|Two.,1,,news,extra\n"  # 11: a cell past the header
        "\n"
        ",One.|Two.,1,,\n"  # 13: no id
        f"{'x' * 201},One.|Two.,1,,\n"  # 14: longer than the items table holds
        f"g,One.|Two.,1,,{'c' * 101}\n"  # 15: so is the category
        "h,One.|Two.,1.5,,\n"  # 16: not whole
    )
    preview = _check(db, study_id, table)
    assert (preview["total"], preview["valid"], preview["invalid"]) == (12, 1, 11)
    problems = _problems(preview)
    assert [(line, field) for line, field, _ in problems] == [
        (5, "boundary"), (6, "boundary"), (7, "id"), (8, "id"), (9, "meta"),
        (10, "sentences"), (11, None), (13, "id"), (14, "id"), (15, "category"),
        (16, "boundary"),
    ]  # fmt: skip
    messages = dict((line, error) for line, _, error in problems)
    assert "'two' is not a whole number" in messages[5]
    assert "line 2 has it too" in messages[7] and "already in study" in messages[8]
    assert "6 cells but the header has 5 columns" in messages[11]
    first = preview["lines"][0]
    assert first == {"line": 2, "id": "a", "kind": "real", "ok": True, "error": None,
                     "field": None, "summary": "One. Two. Three."}  # fmt: skip
    with pytest.raises(InvalidItem) as refused:
        _store(db, study_id, table)
    assert refused.value.where == "line 5, boundary"
    assert "10 more lines have problems" in refused.value.message
    assert set(_items(db, study_id)) == {"old"}


def test_the_types_checks_against_the_study_name_the_line(db: Database) -> None:
    """Likert ratings are checked against the study's scales (plan_items), per line."""
    study_id = _study(db, "likert", {"attributes": [
        {"name": "fluency", "question": "How fluent?", "scale": [1, 3]}]})  # fmt: skip
    table = (
        "id,kind,text,expected_ratings.fluency,expected_rating\n"
        "g1,gold,A text.,2,\n"
        "g2,gold,Another.,5,\n"
        "a1,attention,Pick 1.,,1\n"
        "r1,real,Plain.,,\n"
        "r2,real,Plain.,3,\n"
    )
    problems = _problems(_check(db, study_id, table))
    assert [(line, field) for line, field, _ in problems] == [
        (3, "expected_ratings.fluency"), (6, "expected_ratings"),
    ]  # fmt: skip
    assert "outside the scale 1-3" in problems[0][2]


def test_a_file_that_cannot_be_read_is_refused_naming_the_line(db: Database) -> None:
    study_id = _study(db, "boundary")
    for text, where in (
        ("id,sentences,colour\na,b|c,red\n", "line 1, column 'colour'"),
        ("\n\nid,id\n", "line 3, column 'id'"),
        ('id,sentences,boundary\na,"b|c,1\n', "line 2"),
        ("id,sentences.99999999999\n", "line 1, column 'sentences.99999999999'"),
        ('id,sentences,boundary\na,"' + "x" * 200_000 + '",1\n', "line 2"),
    ):
        with pytest.raises(ValidationError) as refused:
            _check(db, study_id, text)
        if where is not None:
            assert refused.value.where == where, refused.value
    superscript = _check(db, study_id, "id,sentences.\u00b2,boundary\na,One.,1\n")
    assert _problems(superscript)[0][:2] == (2, "sentences")  # a name, not a place
    gap = _check(db, study_id, "id,sentences.0,sentences.2,boundary\na,One.,Three.,1\n")
    assert _problems(gap)[0][:2] == (2, "sentences") and "sentences.1 is empty" in gap[
        "lines"][0]["error"]  # fmt: skip
    for text in ("", "\n \n", "id,sentences,boundary\n\n", ",,,\n"):
        with pytest.raises(ValidationError, match="no items|empty|no header"):
            _check(db, study_id, text)
    assert _items(db, study_id) == {}


def test_json_lines_report_every_bad_line(db: Database) -> None:
    study_id = _study(db, "taboo")
    text = '{"word": "dog"}\n\n{"word": \n[1, 2]\n{"word": "x", "colour": 1}\n{"word": "dog"}\n'
    preview = _check(db, study_id, text)
    assert preview["format"] == "jsonl"
    assert [(line, field) for line, field, _ in _problems(preview)] == [
        (3, None), (4, None), (5, "colour"), (6, "id"),
    ]  # fmt: skip
    assert preview["lines"][0]["summary"] == "dog" and preview["lines"][0]["id"] == "dog"
    assert preview["lines"][1]["summary"] == '{"word":'  # the line itself when it is not JSON


def test_formats_are_detected_by_name_then_first_line_and_text_is_decoded() -> None:
    assert uploads.detect_format("{}", "items.CSV") == "csv"
    assert uploads.detect_format("id,text", "items.jsonl") == "jsonl"
    assert uploads.detect_format('\ufeff\n  {"id": 1}') == "jsonl"
    assert uploads.detect_format("id,text\n") == "csv"
    assert uploads.decode("\ufeffid".encode()) == "\ufeffid"  # the BOM goes when read
    for data, where in (
        (b"id\na\ncaf\xe9\n", "line 3"),
        ("id\n".encode("utf-16"), "line 1"),
        (b"id\nx\x00\n", "line 2"),
    ):
        with pytest.raises(ValidationError) as refused:
            uploads.decode(data)
        assert refused.value.where == where


def test_a_completed_study_takes_no_items_not_even_a_check(db: Database) -> None:
    study_id = _study(db, "taboo")
    with db.session() as session:
        change_status(session, get_study(session, study_id), "close")
    with pytest.raises(StudyNotOpen):
        _check(db, study_id, "word\ndog\n")


def test_cli_imports_csv_and_previews_with_check(
    runner: CliRunner, db: Database, tmp_path: Path
) -> None:
    study_id = str(_study(db, "boundary"))
    good = tmp_path / "items.csv"
    good.write_text('id,sentences,boundary\na,"One.\nTwo.",2\nb,One.|Two.,1\n', encoding="utf-8")
    checked = runner.invoke(main, ["study", "import", study_id, str(good), "--check"])
    assert checked.exit_code == 0, checked.output
    assert checked.output.splitlines() == [
        "line 2\tok\treal\ta\tOne. Two.",
        "line 4\tok\treal\tb\tOne. Two.",
        f"{good}: 2 items (csv), 2 valid, 0 with problems; nothing stored",
    ]
    assert _items(db, int(study_id)) == {}
    bad = tmp_path / "bad.txt"
    bad.write_text("id,sentences,boundary\nc,One.|Two.,7\n", encoding="utf-8")
    checked = runner.invoke(main, ["study", "import", study_id, str(bad), "--check"])
    assert checked.exit_code == 1 and "line 2\tERROR\treal\tc\tboundary: 'boundary'" in (
        checked.output
    )  # fmt: skip
    refused = runner.invoke(main, ["study", "import", study_id, str(bad)])
    assert refused.exit_code == 1 and f"{bad}: line 2, boundary:" in refused.output
    forced = runner.invoke(main, ["study", "import", study_id, str(good), "--format", "jsonl"])
    assert forced.exit_code == 1 and "line 1: not valid JSON" in forced.output
    added = runner.invoke(main, ["study", "import", study_id, str(good)])
    assert added.exit_code == 0 and "added 2 items" in added.output
    assert set(_items(db, int(study_id))) == {"a", "b"}


def test_the_readmes_csv_examples_import(db: Database) -> None:
    """The README's item formats show a CSV per type (and a Likert config): they must work."""
    readme = (TASKS.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Item formats") : readme.index("Answers collected")]
    tables = [textwrap.dedent(block) for block in re.findall(r"```csv\n(.*?)```", section, re.S)]
    config = json.loads(textwrap.dedent(re.findall(r"```json\n(.*?)```", section, re.S)[0]))
    assert len(tables) == 3
    for hit_type, table, options in zip(("boundary", "likert", "comparison"), tables,
                                        ({}, config, {}), strict=True):  # fmt: skip
        study_id = _study(db, hit_type, options)
        preview = _check(db, study_id, table)
        assert preview["invalid"] == 0 and preview["total"] >= 2, (hit_type, _problems(preview))
