"""The `crowd` command line against a real database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from crowd.cli import main
from crowd.settings import Settings
from tests.conftest import passage


def test_study_commands_end_to_end(runner: CliRunner, tmp_path: Path, settings: Settings) -> None:
    key = runner.invoke(main, ["keys", "create", "alice"])
    assert key.exit_code == 0 and key.output.startswith("crowd_")
    created = runner.invoke(
        main,
        [
            "study",
            "create",
            "--name",
            "cli study",
            "--experimenter",
            "alice",
            "--config",
            '{"annotations_per_item": 2}',
        ],
    )
    assert created.exit_code == 0, created.output
    study_id = created.output.strip()
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(json.dumps(passage(f"p{i}", 2)) for i in range(3)))
    imported = runner.invoke(main, ["study", "import", study_id, str(items)])
    assert "added 3 items" in imported.output
    again = runner.invoke(main, ["study", "import", study_id, str(items)])
    assert again.exit_code == 1 and "already in study" in again.output
    published = runner.invoke(main, ["study", "publish", study_id, "--provider", "local"])
    assert f"/play/{study_id}" in published.output
    status = json.loads(runner.invoke(main, ["study", "status", study_id]).output)
    assert status["status"] == "published" and status["items"] == {"real": 3}
    report = runner.invoke(main, ["study", "report", study_id])
    assert report.exit_code == 0 and Path(report.output.splitlines()[0]).exists()
    out = tmp_path / "export.csv"
    exported = runner.invoke(
        main, ["study", "export", study_id, "--format", "roft", "-o", str(out)]
    )
    assert exported.exit_code == 0 and out.read_text().startswith("date,model,dataset")


def test_errors_are_messages_not_tracebacks(runner: CliRunner) -> None:
    result = runner.invoke(main, ["study", "status", "999"])
    assert result.exit_code == 1 and "no study 999" in result.output
    bad = runner.invoke(main, ["study", "create", "--name", "x", "--config", "{oops"])
    assert bad.exit_code == 1 and "not valid JSON" in bad.output


def test_help_names_the_commands(runner: CliRunner) -> None:
    text = runner.invoke(main, ["--help"]).output
    for command in ("init", "serve", "worker", "keys", "demo", "study"):
        assert command in text
    study_help = runner.invoke(main, ["study", "--help"]).output
    for command in ("create", "import", "publish", "status", "export", "report"):
        assert command in study_help


def test_worker_burst_processes_the_outbox(runner: CliRunner, make_study: Any) -> None:
    make_study()
    result = runner.invoke(main, ["worker", "--burst"])
    assert result.exit_code == 0 and "ran 0 jobs" in result.output


@pytest.mark.parametrize("hit_type", ["boundary", "likert", "comparison"])
def test_the_shipped_attention_checks_import_as_attention_checks(
    runner: CliRunner, hit_type: str
) -> None:
    """`crowd study import` of a type's samples/attention.jsonl makes attention checks, not
    real items (every line says "kind": "attention")."""
    samples = Path(__file__).resolve().parents[2] / "tasks" / hit_type / "samples"
    assert runner.invoke(main, ["keys", "create", "alice"]).exit_code == 0
    created = runner.invoke(main, ["study", "create", "--name", f"{hit_type} checks",
                                   "--experimenter", "alice", "--type", hit_type])  # fmt: skip
    assert created.exit_code == 0, created.output
    study_id = created.output.strip()
    lines = (samples / "attention.jsonl").read_text().splitlines()
    imported = runner.invoke(main, ["study", "import", study_id, str(samples / "attention.jsonl")])
    assert imported.exit_code == 0, imported.output
    status = json.loads(runner.invoke(main, ["study", "status", study_id]).output)
    assert status["items"] == {"attention": len(lines)}
