"""Schemathesis over real HTTP: requests generated from /openapi.json, valid and invalid.

The real app serves on a local port (SQLite, or PostgreSQL when CROWD_TEST_DATABASE_URL is
set), seeded with a published study of each HIT type, an experimenter key and a worker token.
Every declared operation is called with generated paths, queries and bodies, once with the
experimenter's key and once with the worker's token; a test fails on any 5xx, a status code
or content type the description does not list, a body that does not match its schema, or
invalid input (by the schema) that the server accepts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import requests

from crowd.accounts import authenticate, create_api_key
from crowd.demo import BackgroundServer, load_samples
from crowd.platforms.publishing import open_study
from crowd.settings import Settings
from crowd.storage import Database
from crowd.studies.lifecycle import create_study, import_items
from tests.conftest import SECRET, _reset_postgres

# About 70 operations x EXAMPLES per caller: comfortably over 1,000 generated requests each.
EXAMPLES = 16
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "negative_data_rejection",
)
SEEDED = {
    "boundary": {"annotations_per_item": 2, "attention_rate": 0.1},
    "likert": {},
    "comparison": {},
    "taboo": {},
}
ST = Path(sys.executable).with_name("st")


@dataclass
class Target:
    url: str
    experimenter: dict[str, str]
    worker: dict[str, str]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory, redis_server: str) -> Iterator[Target]:
    root: Path = tmp_path_factory.mktemp("fuzz")
    url = os.environ.get("CROWD_TEST_DATABASE_URL")
    if url:
        _reset_postgres(url)
    database_url = url or f"sqlite:///{root / 'crowd.db'}"
    redis.Redis.from_url(redis_server).flushdb()
    settings = Settings(
        data_dir=root / "data",
        database_url=database_url,
        secret_key=SECRET,
        redis_url=redis_server,
        testing=True,
        delivery_allow_private=True,
    )
    db = Database(database_url)
    db.upgrade()
    with db.session() as session:
        key = create_api_key(session, "fuzzer")
        owner = authenticate(session, key)
        for hit_type, config in SEEDED.items():
            study = create_study(session, owner, f"fuzzed {hit_type}", hit_type, config)
            import_items(session, study, load_samples(hit_type)[:12])
            open_study(session, study, ["local", "sim"])
    db.dispose()
    with BackgroundServer(settings) as server:
        joined = requests.post(f"{server.url}/api/work/join", json={"name": "fuzz"}, timeout=10)
        joined.raise_for_status()
        yield Target(
            url=server.url,
            experimenter={"Authorization": f"Bearer {key}"},
            worker={"X-Crowd-Worker": joined.json()["worker_token"]},
        )
        redis.Redis.from_url(redis_server).flushdb()


def fuzz(target: Target, headers: dict[str, str], out: Path) -> dict[str, Any]:
    """Run schemathesis's CLI (its pytest plugin does not run on pytest 9) over HTTP."""
    # One worker: with two, hypothesis describes filter lambdas by ast.parse in both threads at
    # once, and the ast module of our CPython (3.11.7) keeps one recursion depth for all
    # threads: "SystemError: AST constructor recursion depth mismatch" (cf. gh-106905), a
    # Runtime Error that stops the coverage phase.
    command = [str(ST), "run", f"{target.url}/openapi.json", "--checks", ",".join(CHECKS),
               "--max-examples", str(EXAMPLES), "--seed", "15", "--workers", "1",
               "--phases", "examples,coverage,fuzzing", "--suppress-health-check", "all",
               "--request-timeout", "30", "--report", "ndjson", "--report-ndjson-path",
               str(out), "--output-truncate", "true"]  # fmt: skip
    # While working on a few routes: CROWD_FUZZ_PATHS=regex fuzzes only the paths it matches.
    if os.environ.get("CROWD_FUZZ_PATHS"):
        command += ["--include-path-regex", os.environ["CROWD_FUZZ_PATHS"]]
    for name, value in headers.items():
        command += ["--header", f"{name}: {value}"]
    # In the report's folder: schemathesis keeps a cache where it runs.
    run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=out.parent)
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-5000:]
    return {"output": run.stdout, "requests": _count_requests(out)}


def _count_requests(path: Path) -> int:
    count = 0
    for line in path.read_text().splitlines():
        if '"ScenarioFinished"' in line:
            event = json.loads(line)["ScenarioFinished"]
            count += len(event.get("recorder", {}).get("interactions", {}))
    return count


# One test per caller, so that pytest-xdist runs the two on two processes: together they were
# the suite's longest test (six minutes on PostgreSQL), which the rest had to wait for.
@pytest.mark.slow
@pytest.mark.parametrize("caller", ["experimenter", "worker"])
def test_generated_requests_never_break_the_api(
    target: Target, tmp_path: Path, caller: str
) -> None:
    found = fuzz(target, getattr(target, caller), tmp_path / f"{caller}.ndjson")
    if not os.environ.get("CROWD_FUZZ_PATHS"):
        assert found["requests"] >= 1000, (found["requests"], found["output"][-3000:])
