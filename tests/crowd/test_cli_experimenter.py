"""The CLI acts as one named experimenter, never a made-up one, and reaches only their
studies; a failed `study create` writes nothing (SQLite here, PostgreSQL with
CROWD_TEST_DATABASE_URL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from crowd.cli import main
from crowd.storage import Database, Experimenter, Study
from tests.conftest import passage


@pytest.fixture(autouse=True)
def _no_experimenter_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CROWD_EXPERIMENTER", raising=False)


def counts(db: Database) -> tuple[int, int]:
    with db.read_session() as session:
        experimenters = session.scalar(select(func.count(Experimenter.id)))
        studies = session.scalar(select(func.count(Study.id)))
    return experimenters or 0, studies or 0


def create(runner: CliRunner, *args: str) -> str:
    made = runner.invoke(main, [*args[:-1], "study", "create", "--name", args[-1]])
    assert made.exit_code == 0, made.output
    return made.stdout.strip()


def test_without_an_experimenter_the_cli_says_how_to_make_one(
    runner: CliRunner, db: Database
) -> None:
    for command in (["study", "create", "--name", "x"], ["study", "list"]):
        refused = runner.invoke(main, command)
        assert refused.exit_code == 1 and "no experimenter yet" in refused.output
        assert "`crowd keys create NAME`" in refused.output
    assert counts(db) == (0, 0)  # nobody made up: no getpass.getuser() owner


def test_the_only_experimenter_a_name_or_the_setting(
    runner: CliRunner, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner.invoke(main, ["keys", "create", "alice"])
    assert create(runner, "first") == "1"  # the only experimenter: no name needed
    second = runner.invoke(main, ["keys", "create", "bob"])
    assert "act as bob with `crowd --as bob ...`" in second.stderr
    assert create(runner, "--as", "bob", "second") == "2"
    unsure = runner.invoke(main, ["study", "create", "--name", "third"])
    assert unsure.exit_code == 1 and "several experimenters (alice, bob)" in unsure.output
    monkeypatch.setenv("CROWD_EXPERIMENTER", "bob")
    assert runner.invoke(main, ["study", "list"]).stdout.startswith("2\t")
    assert runner.invoke(main, ["--as", "alice", "study", "list"]).stdout.startswith("1\t")
    monkeypatch.setenv("CROWD_EXPERIMENTER", "carol")
    unknown = runner.invoke(main, ["study", "list"])
    assert unknown.exit_code == 1 and "no experimenter 'carol'" in unknown.output
    assert "`crowd keys create carol`" in unknown.output and "`crowd keys list`" in unknown.output
    assert counts(db) == (2, 2)


def test_a_failed_create_writes_nothing_and_shifts_no_id(
    runner: CliRunner, db: Database, tmp_path: Path
) -> None:
    runner.invoke(main, ["keys", "create", "alice"])
    nul = tmp_path / "nul.json"
    nul.write_text(json.dumps({"instructions": "a\u0000b"}))  # PostgreSQL's JSONB refuses it
    failures = {
        "unknown HIT type": ["study", "create", "--name", "x", "--type", "nope"],
        "annotations_per_item": ["study", "create", "--name", "x",
                                 "--config", '{"annotations_per_item": 0}'],
        "NaN is not a JSON number": ["study", "create", "--name", "x",
                                     "--config", '{"attention_rate": NaN}'],
        "NUL character": ["study", "create", "--name", "x", "--type", "likert",
                          "--config", f"@{nul}"],
        "lone surrogate": ["study", "create", "--name", "bad \udcff byte"],
        "1 to 200 characters": ["study", "create", "--name", "x" * 201],
        "`crowd keys create carol`": ["--as", "carol", "study", "create", "--name", "x"],
        "`crowd keys create dave`": ["study", "create", "--name", "x", "--experimenter", "dave"],
    }  # fmt: skip
    for says, command in failures.items():
        failed = runner.invoke(main, command)
        assert failed.exit_code == 1 and says in failed.output, (command, failed.output)
        assert "Traceback" not in failed.output and failed.stdout == ""  # no id printed
        assert counts(db) == (1, 0)
    # The next study is study 1: the failures took no id (on PostgreSQL, no sequence value),
    # so the id a script reads is the one the next commands act on.
    made = runner.invoke(main, ["study", "create", "--name", "pilot"])
    assert made.stdout == "1\n"
    assert made.stderr.startswith("created study 1 'pilot' (boundary) for alice")
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(passage("p0", 2)) + "\n")
    imported = runner.invoke(main, ["study", "import", "1", str(items)])
    assert imported.exit_code == 0 and "added 1 items to study 1" in imported.output


STUDY_COMMANDS = [
    ["study", "status"],
    ["study", "export", "{id}"],
    ["study", "report"],
    ["study", "publish"],
    ["study", "pause"],
    ["study", "archive"],
    ["study", "import-annotations", "{id}", "{file}"],
    ["review", "workers"],
    ["review", "audit"],
    ["review", "note", "{id}", "1", "--reason", "hi"],
    ["qc", "refresh"],
    ["webhooks", "list"],
    ["train", "runs"],
    ["mturk", "sync"],
    ["prolific", "actions"],
]


@pytest.mark.parametrize("command", STUDY_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_another_experimenters_study_is_out_of_reach(
    runner: CliRunner, db: Database, tmp_path: Path, command: list[str]
) -> None:
    runner.invoke(main, ["keys", "create", "alice"])
    runner.invoke(main, ["keys", "create", "bob"])
    study_id = create(runner, "--as", "alice", "alice's")
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"worker": "w", "item": "i", "answer": {"guess": 1}}\n')
    args = [a.format(id=study_id, file=answers) for a in command]
    if "{id}" not in command:
        args.append(study_id)
    refused = runner.invoke(main, ["--as", "bob", *args])
    assert refused.exit_code == 1, refused.output
    assert f"study {study_id} is alice's, not bob's" in refused.output
    assert "`crowd --as alice ...`" in refused.output
    with db.read_session() as session:
        found = session.get(Study, int(study_id))
        assert found is not None and found.status == "draft" and found.archived_at is None


def test_pause_resume_close_archive_unarchive(
    runner: CliRunner, db: Database, tmp_path: Path
) -> None:
    runner.invoke(main, ["keys", "create", "alice"])
    study_id = create(runner, "pilot")
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(passage("p0", 2)) + "\n")
    runner.invoke(main, ["study", "import", study_id, str(items)])
    early = runner.invoke(main, ["study", "pause", study_id])
    assert early.exit_code == 1 and "is draft: it cannot pause" in early.output
    assert runner.invoke(main, ["study", "publish", study_id]).exit_code == 0

    def change(what: str) -> str:
        result = runner.invoke(main, ["study", what, study_id])
        assert result.exit_code == 0, result.output
        return str(result.stdout)

    assert change("pause") == f"study {study_id} 'pilot': paused\n"
    assert change("pause") == f"study {study_id} 'pilot': paused\n"  # twice is harmless
    assert change("resume") == f"study {study_id} 'pilot': published\n"
    assert change("close") == f"study {study_id} 'pilot': completed\n"
    more = runner.invoke(main, ["study", "import", study_id, str(items)])
    assert more.exit_code == 1 and "completed" in more.output
    assert change("archive") == f"study {study_id} 'pilot': completed, archived\n"
    assert runner.invoke(main, ["study", "list"]).stdout == ""
    assert change("unarchive") == f"study {study_id} 'pilot': completed\n"
    assert runner.invoke(main, ["study", "list"]).stdout.startswith(f"{study_id}\tcompleted")
    reopened = runner.invoke(main, ["study", "resume", study_id])
    assert reopened.exit_code == 1 and "is completed: it cannot resume" in reopened.output


def test_users_review_the_acting_experimenters_studies(runner: CliRunner, db: Database) -> None:
    runner.invoke(main, ["keys", "create", "alice"])
    made = runner.invoke(main, ["users", "create", "rita", "--password", "long-enough-pw"])
    assert made.exit_code == 0 and "reviews the studies of alice" in made.output
    unknown = runner.invoke(
        main, ["users", "create", "sam", "--experimenter", "zed", "--password", "long-enough-pw"]
    )
    assert unknown.exit_code == 1 and "`crowd keys create zed`" in unknown.output
    assert counts(db) == (1, 0)
