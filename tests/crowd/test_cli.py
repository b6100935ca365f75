"""The `crowd` command line against a real database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from crowd.cli import main
from crowd.settings import Settings
from tasks.base import LIVE_RATER_GROUP
from tests.conftest import passage


@pytest.fixture(autouse=True)
def _no_experimenter_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CROWD_EXPERIMENTER", raising=False)


def test_study_commands_end_to_end(runner: CliRunner, tmp_path: Path, settings: Settings) -> None:
    key = runner.invoke(main, ["keys", "create", "alice"])
    assert key.exit_code == 0 and key.stdout.startswith("crowd_")
    assert "the CLI acts as alice" in key.stderr
    created = runner.invoke(
        main, ["study", "create", "--name", "cli study", "--config", '{"annotations_per_item": 2}']
    )
    assert created.exit_code == 0, created.output
    study_id = created.stdout.strip()  # the id alone, for scripts
    assert created.stderr.startswith(f"created study {study_id} 'cli study' (boundary) for alice")
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(json.dumps(passage(f"p{i}", 2)) for i in range(3)))
    imported = runner.invoke(main, ["study", "import", study_id, str(items)])
    assert "added 3 items" in imported.output
    again = runner.invoke(main, ["study", "import", study_id, str(items)])
    assert again.exit_code == 1 and "already in study" in again.output
    # The estimate first: 3 items x 2 answers, 3 items a HIT, 2 assignments: 1 HIT at $0.60.
    estimate = runner.invoke(main, ["study", "publish", study_id, "--provider", "mturk",
                                    "--reward", "0.50", "--option", "items_per_session=3",
                                    "--estimate"])  # fmt: skip
    assert estimate.exit_code == 0, estimate.output
    assert estimate.stdout.splitlines()[:2] == [
        "mturk: 1.20 USD",
        "  1 HIT(s) x 2 assignment(s), 3 item(s) each, on the sandbox (no money changes hands)",
    ]
    no_reward = runner.invoke(main, ["study", "publish", study_id, "--provider", "mturk",
                                     "--estimate"])  # fmt: skip
    assert no_reward.exit_code == 1 and "reward" in no_reward.output
    published = runner.invoke(main, ["study", "publish", study_id, "--provider", "local"])
    assert f"/play/{study_id}" in published.output
    status = json.loads(runner.invoke(main, ["study", "status", study_id]).stdout)
    assert status["status"] == "published" and status["items"] == {"real": 3}
    report = runner.invoke(main, ["study", "report", study_id])
    assert report.exit_code == 0 and Path(report.stdout.splitlines()[0]).exists()
    assert report.stdout.splitlines()[1].endswith("report.json")
    assert "analysing the 0 responses of study" in report.stderr
    assert f"report of study {study_id} written" in report.stderr
    out = tmp_path / "export.csv"
    exported = runner.invoke(
        main, ["study", "export", study_id, "--format", "roft", "-o", str(out)]
    )
    assert exported.exit_code == 0 and out.read_text().startswith("date,model,dataset")
    assert exported.stdout == f"wrote 0 rows to {out}\n"
    assert "reading the 0 responses of study" in exported.stderr
    to_stdout = runner.invoke(main, ["study", "export", study_id, "--format", "csv"])
    assert to_stdout.exit_code == 0 and "wrote 0 rows (csv)" in to_stdout.stderr
    assert "reading" not in to_stdout.stdout and "wrote" not in to_stdout.stdout


def test_errors_are_messages_not_tracebacks(runner: CliRunner) -> None:
    runner.invoke(main, ["keys", "create", "alice"])
    result = runner.invoke(main, ["study", "status", "999"])
    assert result.exit_code == 1 and "no study 999" in result.output
    assert "`crowd study list`" in result.output and "GET /api" not in result.output
    bad = runner.invoke(main, ["study", "create", "--name", "x", "--config", "{oops"])
    assert bad.exit_code == 1 and "not valid JSON" in bad.output


def test_help_names_the_commands(runner: CliRunner) -> None:
    text = runner.invoke(main, ["--help"]).output
    for command in ("init", "serve", "worker", "keys", "demo", "study"):
        assert command in text
    assert "--as NAME" in text and "CROWD_EXPERIMENTER" in text
    assert "taboo" in text  # a live HIT type's command, listed without loading it
    study_help = runner.invoke(main, ["study", "--help"]).output
    for command in ("create", "import", "publish", "status", "export", "report", "list",
                    "pause", "resume", "close", "archive", "unarchive"):  # fmt: skip
        assert command in study_help
    taboo = runner.invoke(main, ["taboo", "--help"])
    assert taboo.exit_code == 0 and "tournament" in taboo.output
    annotations = runner.invoke(main, ["study", "import-annotations", "--help"]).output
    assert f"[default: {LIVE_RATER_GROUP}]" in annotations


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
                                   "--type", hit_type])  # fmt: skip
    assert created.exit_code == 0, created.output
    study_id = created.stdout.strip()
    lines = (samples / "attention.jsonl").read_text().splitlines()
    imported = runner.invoke(main, ["study", "import", study_id, str(samples / "attention.jsonl")])
    assert imported.exit_code == 0, imported.output
    status = json.loads(runner.invoke(main, ["study", "status", study_id]).stdout)
    assert status["items"] == {"attention": len(lines)}


def test_keys_are_listed_without_their_secrets_and_revoked(runner: CliRunner, app: Any) -> None:
    alice = runner.invoke(main, ["keys", "create", "alice"]).stdout.strip()
    bob = runner.invoke(main, ["keys", "create", "bob"]).stdout.strip()
    client = app.test_client()
    as_alice = {"Authorization": f"Bearer {alice}"}
    assert client.get("/api/studies", headers=as_alice).status_code == 200

    listed = runner.invoke(main, ["keys", "list"])
    assert listed.exit_code == 0, listed.output
    prefix = alice.split("_")[1]
    assert f"{prefix}  alice" in listed.output and "bob" in listed.output
    assert alice.split("_", 2)[2] not in listed.output  # the secret is never shown
    only_bob = runner.invoke(main, ["keys", "list", "--experimenter", "bob"]).output
    assert "alice" not in only_bob and bob.split("_")[1] in only_bob

    revoked = runner.invoke(main, ["keys", "revoke", prefix])
    assert revoked.exit_code == 0 and f"revoked {prefix} (alice)" in revoked.output
    assert client.get("/api/studies", headers=as_alice).status_code == 401
    assert client.get("/api/studies", headers={"Authorization": f"Bearer {bob}"}).status_code == 200
    assert "revoked 20" in runner.invoke(main, ["keys", "list", "--experimenter", "alice"]).output
    assert runner.invoke(main, ["keys", "revoke", bob]).exit_code == 0  # the whole key works too

    unknown = runner.invoke(main, ["keys", "revoke", "0123456789ab"])
    assert unknown.exit_code == 1 and "crowd keys list" in unknown.output


def test_study_list_shows_your_studies_and_everyones_with_all(
    runner: CliRunner, tmp_path: Path
) -> None:
    runner.invoke(main, ["keys", "create", "alice"])
    empty = runner.invoke(main, ["study", "list"])
    assert empty.exit_code == 0 and empty.stdout == "" and "no studies (alice's)" in empty.stderr
    runner.invoke(main, ["keys", "create", "bob"])
    for owner, name in (("alice", "first"), ("bob", "second")):
        made = runner.invoke(main, ["--as", owner, "study", "create", "--name", name])
        assert made.exit_code == 0, made.output
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(json.dumps(passage(f"p{i}", 2)) for i in range(3)))
    assert runner.invoke(main, ["--as", "alice", "study", "import", "1", str(items)]).exit_code == 0
    everyone = runner.invoke(main, ["study", "list", "--all"]).stdout.splitlines()
    assert everyone == ["1\tdraft\tboundary\talice\t3 items\tfirst",
                        "2\tdraft\tboundary\tbob\t0 items\tsecond"]  # fmt: skip
    bobs = runner.invoke(main, ["--as", "bob", "study", "list"]).stdout
    assert bobs.splitlines() == ["2\tdraft\tboundary\tbob\t0 items\tsecond"]
    # With two experimenters and no name the CLI does not guess.
    unsure = runner.invoke(main, ["study", "list"])
    assert unsure.exit_code == 1 and "several experimenters (alice, bob)" in unsure.output
    assert "crowd --as NAME" in unsure.output and "CROWD_EXPERIMENTER" in unsure.output

    assert runner.invoke(main, ["--as", "alice", "study", "archive", "1"]).exit_code == 0
    assert runner.invoke(main, ["--as", "alice", "study", "list"]).stdout == ""
    archived = runner.invoke(main, ["--as", "alice", "study", "list", "--archived"]).stdout
    assert archived.splitlines() == ["1\tcompleted\tboundary\talice\t3 items\tfirst"]
    assert len(runner.invoke(main, ["study", "list", "--all"]).stdout.splitlines()) == 1
