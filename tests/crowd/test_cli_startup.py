"""`crowd --help` and the light commands load only what they use: no ML, data-frame, cloud
or queue libraries (benchmarks/cli_startup.py times them; this checks the behaviour)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# What a second of start-up went to before: HIT types' analyses and plots, the ML stack,
# boto3 for MTurk, the queue.
HEAVY = ("torch", "transformers", "sklearn", "scipy", "pandas", "numpy", "matplotlib",
         "boto3", "botocore", "rq", "redis", "crowdkit", "flask")  # fmt: skip

PROBE = """
import json, sys
from crowd.cli import main
try:
    main(sys.argv[1:], prog_name="crowd")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def loaded_by(args: list[str], data_dir: Path) -> set[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CROWD_")}
    env["CROWD_DATA_DIR"] = str(data_dir)
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    modules = set(json.loads(done.stderr.strip().splitlines()[-1]))
    return {name.split(".")[0] for name in modules} | {
        name for name in modules if name.startswith("tasks.")
    }


@pytest.mark.parametrize(
    "args", [["--help"], ["study", "--help"], ["keys", "--help"], ["review", "--help"]]
)
def test_help_loads_no_heavy_library(args: list[str], tmp_path: Path) -> None:
    loaded = loaded_by(args, tmp_path)
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))
    if args == ["--help"]:
        # Neither the database layer nor a HIT type's package (they load their analyses).
        assert "sqlalchemy" not in loaded and "tasks.boundary" not in loaded


def test_keys_and_study_list_load_no_hit_type_and_no_migrations(tmp_path: Path) -> None:
    loaded_by(["init"], tmp_path)  # the schema, made once
    for args in (["keys", "list"], ["study", "list", "--all"]):
        loaded = loaded_by(args, tmp_path)
        assert "sqlalchemy" in loaded  # it did reach the database
        assert loaded.isdisjoint(HEAVY), (args, sorted(loaded & set(HEAVY)))
        assert not any(name.startswith(("tasks.boundary", "tasks.likert")) for name in loaded)
        assert "alembic" not in loaded  # at head: one query, not Alembic's upgrade


def test_the_schema_check_agrees_with_alembic(tmp_path: Path) -> None:
    from alembic.script import ScriptDirectory

    from crowd.cli.common import _head_revision, schema_is_current
    from crowd.storage import Database

    db = Database(f"sqlite:///{tmp_path / 'crowd.db'}")
    scripts = ScriptDirectory.from_config(db.alembic_config())
    head = scripts.get_current_head()
    assert head is not None and _head_revision() == head
    assert not schema_is_current(db)  # no tables yet
    db.upgrade(str(scripts.get_revision(head).down_revision))
    assert not schema_is_current(db)  # one behind
    db.upgrade()
    assert schema_is_current(db)
    db.dispose()
