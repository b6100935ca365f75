"""`crowd demo`: a boundary study on a simulated crowd, end to end, leaving nothing running.

It creates a study from the sample passages shipped in tasks/boundary/samples (attention
checks at 10%), publishes it to a simulated crowd of which about a quarter does not read
(and so fails attention checks), serves the real web app on a local port while the
simulated workers play through HTTP, runs the queue's jobs to completion and writes the
report.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server

from crowd.accounts import authenticate, create_api_key
from crowd.app import create_app
from crowd.providers.sim import SimulatedCrowd
from crowd.queue.runner import ensure_redis, run_worker
from crowd.settings import Settings
from crowd.storage import Database, Report
from crowd.studies import create_study, import_items, parse_jsonl, publish

SAMPLES = Path(__file__).resolve().parents[1] / "tasks" / "boundary" / "samples"


def sample_records() -> list[dict[str, Any]]:
    records = []
    for name in ("passages.jsonl", "attention.jsonl"):
        with open(SAMPLES / name, encoding="utf-8") as handle:
            records.extend(parse_jsonl(handle, source=f"{name} line"))
    for record in records:
        if record["id"].startswith("attention"):
            record["kind"] = "attention"
    return records


def worker_mix(total: int) -> dict[str, int]:
    """About a quarter who do not read (attention failers and fast, careless workers)."""
    failers = max(1, round(total * 0.15))
    careless = max(1, round(total * 0.10))
    noisy = round(total * 0.2)
    always_human = round(total * 0.1)
    return {
        "attention_failer": failers,
        "fast_careless": careless,
        "noisy": noisy,
        "always_human": always_human,
        "careful": total - failers - careless - noisy - always_human,
    }


class BackgroundServer:
    """The real web app on a free local port, in a thread, until stop()."""

    def __init__(self, settings: Settings) -> None:
        # The request log of a few thousand simulated requests would drown the summary.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self.server = make_server("127.0.0.1", 0, create_app(settings), threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self) -> BackgroundServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.thread.join()


def run_demo(
    workers: int = 40, seed: int = 7, echo: Callable[[str], Any] = print
) -> dict[str, Any]:
    base = Settings.from_env()
    data_dir = base.data_dir / "demo"
    shutil.rmtree(data_dir, ignore_errors=True)
    settings = replace(
        base,
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'crowd.db'}",
    )
    db = Database(settings.database_url)
    db.upgrade()
    records = sample_records()
    with db.session() as session:
        api_key = create_api_key(session, "demo")
        experimenter = authenticate(session, api_key)
        study = create_study(
            session,
            experimenter,
            "RoFT demo: where does the machine take over?",
            "boundary",
            {"annotations_per_item": 8, "attention_rate": 0.1},
        )
        import_items(session, study, records)
        publish(session, study, ["local", "sim"])
        study_id = study.id
    echo(f"study {study_id}: {len(records)} passages (5 attention checks), 8 annotations each")

    settings, embedded = ensure_redis(settings)
    try:
        with BackgroundServer(settings) as server:
            mix = worker_mix(workers)
            echo(f"simulated crowd at {server.url}: {mix}")
            crowd = SimulatedCrowd(
                server.url, api_key, study_id, "boundary", records, mix, seed=seed
            )
            result = crowd.run(threads=4)
        if result.errors:
            echo(f"{len(result.errors)} simulated workers stopped early: {result.errors[:3]}")
        echo(f"{sum(result.items_done.values())} assignments played; running the queue ...")
        jobs = run_worker(settings, burst=True)
        echo(f"the queue ran {jobs} jobs")
    finally:
        if embedded is not None:
            embedded.stop()
    with db.session() as session:
        report = session.query(Report).filter_by(study_id=study_id).one()
        data = report.data
    db.dispose()
    attention = data["attention"]
    full, filtered = data["full"], data["filtered"]
    out = settings.reports_dir / f"study-{study_id}"
    echo("")
    echo(
        f"attention checks: {attention['workers_failed']} of {attention['workers_checked']} "
        f"workers failed ({attention['worker_failure_rate']:.0%}); their responses are "
        f"left out of the filtered set"
    )
    for label, part in (("full", full), ("filtered", filtered)):
        echo(
            f"{label:>9}: {part['n_annotations']} annotations by {part['n_workers']} workers, "
            f"exact {part['exact_accuracy']:.1%}, mean distance {part['mean_distance']:+.2f}, "
            f"mean points {part['mean_points']:.2f}"
        )
    echo(f"\nreport: {out / 'report.html'}\n        {out / 'report.json'}")
    echo(
        f"play the game yourself: CROWD_DATA_DIR={data_dir} crowd serve, then open "
        f"http://127.0.0.1:5000/play/{study_id}"
    )
    return data
