"""QC benchmark: does quality control catch the bad workers a real crowd has, how early, and
does it leave the aggregated labels at least as accurate as without it?

The crowd is `benchmarks/qc_crowd.py`, written apart from the project's simulators and
talking HTTP only: careful and noisy readers beside bad kinds that all read at a human pace
(slow random clickers, colluding groups, drifters, pasters of one LLM's output, position
bias), so no bad kind is caught by speed. For each HIT type, crowd mix and redundancy (answers
per item: 3, 5, 15) a study of synthetic items with known truth is played through the real web
app while a real `crowd worker` runs the QC jobs (rules stop workers mid-run, as in
production). Then we measure:
- exclusion precision (bad workers among the bad and careful workers excluded) and recall
  per bad kind;
- careful and noisy workers excluded (noisy workers read but err often: neither bad nor
  careful, they count in neither precision nor recall);
- items a bad worker answered before QC stopped them (for drifters: after they drifted);
- the accuracy of aggregated labels on real items against the truth, for every method, with
  QC (the answers of the workers it kept) and without (a control study the same crowd plays
  with every rule off and no gold or checks, each worker answering an item alike in both:
  `benchmarks/qc_labels.py`; `--no-control` skips it), pooled over a row's runs (each label
  compared counts once);
- issue 19's bar per HIT type, with exact intervals (`benchmarks/qc_bar.py`).

Run: `.venv/bin/python benchmarks/qc_bench.py` (or `make bench-qc`); the results block in
benchmarks/RESULTS.md is rewritten. `--types`, `--redundancy` and `--mixes` run a part.
`--flag-only --dump DIR` plays studies whose rules only flag, for `benchmarks/qc_policies.py`
to try other rules on every worker's whole record.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from qc_bar import GOOD, bar_table
from qc_crowd import DRIFT_AFTER, BenchCrowd
from qc_items import CONFIGS, MAKERS, truth_labels
from results_md import write_block
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qc_labels import (  # noqa: E402
    combine_labels,
    compare,
    control_config,
    first_answers_labels,
    flag_only_config,
    label_table,
    study_labels,
)

from crowd.accounts import authenticate, create_api_key  # noqa: E402
from crowd.demo import BackgroundServer  # noqa: E402
from crowd.platforms.publishing import open_study  # noqa: E402
from crowd.quality import standing as quality  # noqa: E402
from crowd.queue.runner import ensure_redis, run_worker  # noqa: E402
from crowd.settings import Settings  # noqa: E402
from crowd.storage import (  # noqa: E402
    AuditEntry,
    Database,
    Item,
    ItemKind,
    OutboxEvent,
    Response,
    StudyWorker,
    Worker,
)
from crowd.studies.lifecycle import create_study, get_study, import_items  # noqa: E402
from tasks import load_builtin  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
START, END = "<!-- qc:start -->", "<!-- qc:end -->"
BAD = ("slow_random", "colluder", "drifter", "paster", "position_biased")
# 40 workers each: half bad (4 of each bad kind), or mostly careful (4 colluders, 2 of the rest).
MIXES: dict[str, dict[str, int]] = {
    "half_bad": {"careful": 16, "noisy": 4, **{kind: 4 for kind in BAD}},
    "mostly_careful": {"careful": 24, "noisy": 4, "slow_random": 2, "colluder": 4,
                       "drifter": 2, "paster": 2, "position_biased": 2},
}  # fmt: skip
REDUNDANCY = (3, 5, 15)
# A worker's share of real items (the rest are gold and attention checks), to size a study so
# that every worker finds work at the given redundancy.
REAL_SHARE = 0.75


def start_worker(settings: Settings) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CROWD_DATA_DIR": str(settings.data_dir),
        "CROWD_DATABASE_URL": settings.database_url,
        "CROWD_REDIS_URL": settings.redis_url or "",
        "CROWD_SECRET_KEY": settings.secret_key,
        # People answer in minutes: a study's 2 s between batches never holds one worker's
        # answers back; at this crowd's pace it would, and stop them later than people.
        "CROWD_QC_REFRESH_INTERVAL": "0",
    }
    crowd = Path(sys.executable).with_name("crowd")
    return subprocess.Popen(
        [str(crowd), "worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


@dataclass
class Played:
    db: Database
    study_id: int
    result: Any  # qc_crowd.BenchResult
    seconds: float
    pace: QueuePace | None
    data_dir: Path


def play(
    hit_type: str, mix_name: str, redundancy: int, args: argparse.Namespace, base: Settings,
    records: list[dict[str, Any]], control: bool = False,
) -> Played:  # fmt: skip
    """The crowd plays a study of `records`: with a live QC worker, or for the `control`
    with every rule off, no gold or checks and no worker (qc_labels)."""
    data_dir = Path(tempfile.mkdtemp(prefix=f"qc-bench-{hit_type}-"))
    settings = replace(base, data_dir=data_dir, database_url=f"sqlite:///{data_dir / 'c.db'}")
    db = Database(settings.database_url)
    db.upgrade()
    config = {**CONFIGS[hit_type], "annotations_per_item": redundancy}
    over = json.loads(args.qc)  # --qc: sections laid over the type's own (none by default)
    config["qc"] = {k: {**config.get("qc", {}).get(k, {}), **v} for k, v in over.items()}
    if control or args.flag_only:
        config = control_config(config) if control else flag_only_config(hit_type, config)
    with db.session() as session:
        api_key = create_api_key(session, "bench")
        study = create_study(session, authenticate(session, api_key), f"QC {hit_type}",
                             hit_type, config)  # fmt: skip
        import_items(session, study, records)
        open_study(session, study, ["sim"])
        study_id = study.id
    if control:  # a Redis of its own: its QC jobs, never run, must not reach the next study's
        settings = replace(settings, redis_url=None)
    settings, embedded = ensure_redis(settings)
    worker = None if control else start_worker(settings)
    pace = None if control or args.round_wait <= 0 else QueuePace(db, args.round_wait)
    started = time.perf_counter()
    try:
        try:
            with BackgroundServer(settings) as server:
                crowd = BenchCrowd(server.url, api_key, study_id, hit_type, records,
                                   MIXES[mix_name], seed=args.seed, items_per_worker=args.items)
                result = crowd.run(threads=4, between_rounds=pace)
            if worker is not None:
                worker.terminate()
                worker.wait(timeout=60)
                run_worker(settings, burst=True)  # whatever the live worker had not got to
        finally:
            if worker is not None and worker.poll() is None:
                worker.kill()
            if embedded is not None:
                embedded.stop()
    except BaseException:
        shutil.rmtree(data_dir, ignore_errors=True)  # a study cut short is no use to replay
        raise
    return Played(db, study_id, result, time.perf_counter() - started, pace, data_dir)


def run_scenario(
    hit_type: str, mix_name: str, redundancy: int, args: argparse.Namespace, base: Settings
) -> dict[str, Any]:
    """One study: the crowd plays it with a live QC worker; detection; and, unless
    --no-control, label accuracy against the control study without QC (qc_labels)."""
    rng = random.Random(args.seed)
    workers = sum(MIXES[mix_name].values())
    n_real = math.ceil(workers * args.items * REAL_SHARE / redundancy)
    records = MAKERS[hit_type](rng, n_real, args.gold, args.attention)
    played = play(hit_type, mix_name, redundancy, args, base, records)
    db, study_id, result = played.db, played.study_id, played.result
    with db.session() as session:
        study = get_study(session, study_id)
        quality.refresh_study(session, study)
        excluded_by = {
            ext: row.excluded_by
            for row, ext in session.execute(
                select(StudyWorker, Worker.external_id)
                .join(Worker, Worker.id == StudyWorker.worker_id)
                .where(StudyWorker.study_id == study_id, StudyWorker.excluded_by.is_not(None))
            ).all()
        }
        answered = _answered(session)
        out = detection(result.workers, excluded_by, answered, _stops(session, study_id))
        if args.dump:
            dump_workers(Path(args.dump), f"{hit_type}-{mix_name}-{redundancy}-{args.seed}",
                         session, study_id, result.workers, answered)  # fmt: skip
        by_rule: dict[str, int] = {}
        for rule in excluded_by.values():
            by_rule[str(rule)] = by_rule.get(str(rule), 0) + 1
    out.update(accuracy_all={}, accuracy_filtered={}, labelled_items=0, control_seconds=0.0)
    if not args.no_control:
        kept, kept_full = study_labels(db, study_id, redundancy, filtered=True)
        control = play(hit_type, mix_name, redundancy, args, base, records, control=True)
        try:
            found, control_full = first_answers_labels(control.db, control.study_id, redundancy)
        finally:
            control.db.dispose()
            shutil.rmtree(control.data_dir, ignore_errors=True)
        truth = truth_labels(hit_type, records)
        out.update(compare(kept, kept_full, found, control_full, truth))
        out["control_seconds"] = round(control.seconds, 1)
    db.dispose()
    if not args.dump:  # a dump names the database, for qc_replay.py
        shutil.rmtree(played.data_dir, ignore_errors=True)
    pace = played.pace
    out.update(
        hit_type=hit_type, mix=mix_name, redundancy=redundancy, seed=args.seed,
        errors=len(result.errors),
        seconds=round(played.seconds, 1), responses=sum(answered.values()),
        paced=round(pace.waited, 1) if pace else 0.0, pace_timeouts=pace.timeouts if pace else 0,
        excluded_by=dict(sorted(by_rule.items())),
    )  # fmt: skip
    return out


class QueuePace:
    """Between the crowd's rounds, wait (at most `limit` seconds) until the live `crowd
    worker` has processed every outbox event: people answer an item in tens of seconds, so
    the queue reads each answer before the next; the simulated crowd answers a round of 40
    in a second or two, and on 2 cores shared with the web server and the crowd the queue
    falls behind it. Waiting keeps the stop where QC's evidence puts it; `waited` and
    `timeouts` say what it cost."""

    def __init__(self, db: Database, limit: float) -> None:
        self.db, self.limit = db, limit
        self.waited, self.timeouts = 0.0, 0

    def __call__(self) -> None:
        began = time.perf_counter()
        while True:
            with self.db.session() as session:
                left = session.scalar(
                    select(func.count(OutboxEvent.id)).where(OutboxEvent.processed_at.is_(None))
                )
            if not left:
                break
            if time.perf_counter() - began > self.limit:
                self.timeouts += 1
                break
            time.sleep(0.1)
        self.waited += time.perf_counter() - began


def dump_workers(
    folder: Path,
    name: str,
    session: Any,
    study_id: int,
    kinds: dict[str, str],
    answered: dict[str, int],
) -> None:
    """Each worker's kind, answers, exclusion and evidence; the database, for qc_replay.py."""
    rows = session.execute(
        select(Worker.external_id, StudyWorker)
        .join(StudyWorker, StudyWorker.worker_id == Worker.id)
        .where(StudyWorker.study_id == study_id)
    ).all()
    stopped = dict(
        session.execute(
            select(AuditEntry.worker_id, func.min(AuditEntry.at))
            .where(
                AuditEntry.study_id == study_id, AuditEntry.action.in_(("soft_block", "stop"))
            )  # fmt: skip
            .group_by(AuditEntry.worker_id)
        ).all()
    )
    out = {}
    for ext, row in rows:
        at = stopped.get(row.worker_id)
        before = None
        if at is not None:  # answers stored by the time the rule acted (the queue's lag aside)
            before = session.scalar(
                select(func.count(Response.id))
                .join(Item, Item.id == Response.item_id)
                .where(
                    Response.worker_id == row.worker_id,
                    Response.created_at <= at,
                    Item.kind != ItemKind.TRAINING,
                )  # fmt: skip
            )
        out[ext] = {"kind": kinds.get(ext), "answered": answered.get(ext, 0),
                    "answered_when_stopped": before, "excluded_by": row.excluded_by,
                    "evidence": row.evidence}  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    dump = {"database": str(session.get_bind().url), "study_id": study_id, "workers": out}
    (folder / f"{name}.json").write_text(json.dumps(dump, indent=1, default=str))


def detection(
    kinds: dict[str, str],
    excluded_by: dict[str, str],
    answered: dict[str, int],
    stops: dict[str, tuple[int | None, int]] | None = None,
) -> dict[str, Any]:
    """Precision, recall per kind and items before the stop, from who was excluded (and by
    which rule).

    Items before the stop are the answers the deciding QC refresh read (`stops`: per worker,
    the answers the first stop's refresh read and those stored by the time it acted), the
    evidence QC needed; the answers stored meanwhile are the queue's lag, counted apart
    ("lag"). The simulated crowd answers far faster than people (a round of 40 answers in a
    second or two), so the lag here is the queue's, not QC's; without a record of the stop,
    every answer counts. "missed": the answers each worker of the kind QC did not stop gave
    (all their items, or fewer where the study's work ran out first).

    >>> kinds = {"d1": "drifter", "d2": "drifter", "c1": "careful"}
    >>> out = detection(kinds, {"d1": "rule:drifted"}, {"d1": 14, "d2": 30, "c1": 30})
    >>> out["kinds"]["drifter"]["before_stop"], out["kinds"]["drifter"]["missed"]
    ([6], [30])
    >>> out["precision"], out["kinds"]["careful"]["missed"]
    (1.0, [30])
    """
    stops = stops or {}
    excluded = set(excluded_by)
    bad = {ext for ext, kind in kinds.items() if kind in BAD}
    judged = {ext for ext, kind in kinds.items() if kind != "noisy"}
    out: dict[str, Any] = {
        "excluded": len(excluded),
        "precision": _share(len(excluded & bad), len(excluded & judged)),
        "kinds": {},
    }
    for kind in (*BAD, *GOOD):
        members = {ext for ext, k in kinds.items() if k == kind}
        caught = members & excluded
        read: dict[str, int] = {}
        for ext in caught:
            seen = stops.get(ext, (None, 0))[0]
            read[ext] = answered.get(ext, 0) if seen is None else seen
        before = [read[ext] - (DRIFT_AFTER if kind == "drifter" else 0) for ext in caught]
        lag = [max(stops[ext][1] - read[ext], 0) for ext in caught if ext in stops]
        rules = sorted(str(excluded_by[ext]).removeprefix("rule:") for ext in caught)
        missed = sorted(answered.get(ext, 0) for ext in members - caught)
        out["kinds"][kind] = {"n": len(members), "excluded": len(caught), "before_stop": before,
                              "lag": lag, "rules": rules, "missed": missed}  # fmt: skip
    return out


def _answered(session: Any) -> dict[str, int]:
    """Items each worker answered (attention and gold included, training not)."""
    rows = session.execute(
        select(Worker.external_id, func.count(Response.id))
        .join(Response, Response.worker_id == Worker.id)
        .join(Item, Item.id == Response.item_id)
        .where(Item.kind != ItemKind.TRAINING)
        .group_by(Worker.external_id)
    ).all()
    return {external_id: int(n) for external_id, n in rows}


def _stops(session: Any, study_id: int) -> dict[str, tuple[int | None, int]]:
    """Per worker QC stopped: the answers the first stop's refresh read (its audit entry's
    answers_read) and the answers (training apart) stored by the time it acted."""
    out: dict[str, tuple[int | None, int]] = {}
    entries = session.execute(
        select(Worker.external_id, AuditEntry)
        .join(Worker, Worker.id == AuditEntry.worker_id)
        .where(AuditEntry.study_id == study_id, AuditEntry.action.in_(("soft_block", "stop")))
        .order_by(AuditEntry.at, AuditEntry.id)
    ).all()
    for ext, entry in entries:
        if ext in out:
            continue
        stored = session.scalar(
            select(func.count(Response.id))
            .join(Item, Item.id == Response.item_id)
            .where(Response.worker_id == entry.worker_id, Response.created_at <= entry.at,
                   Item.kind != ItemKind.TRAINING)
        )  # fmt: skip
        read = (entry.details or {}).get("answers_read")
        out[ext] = (None if read is None else int(read), int(stored or 0))
    return out


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _seeds(seeds: list[int]) -> str:
    """Seeds as the table shows them: 27-30, or 27, 29 where they do not run on.

    >>> _seeds([27, 28, 29, 30]), _seeds([27, 29])
    ('27-30', '27, 29')
    """
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def _count(value: float | None) -> str:
    """A median count as the table shows it: 13, 9.5."""
    return "n/a" if value is None else f"{value:g}"


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs of one scenario (seeds): exclusions summed, precision over the sum, means of
    label accuracy."""
    out: dict[str, Any] = {key: runs[0][key] for key in ("hit_type", "mix", "redundancy")}
    kinds: dict[str, dict[str, Any]] = {}
    for run in runs:
        for kind, data in run["kinds"].items():
            acc = kinds.setdefault(kind, {"n": 0, "excluded": 0, "before_stop": [], "lag": [],
                                          "rules": []})  # fmt: skip
            acc["n"] += data["n"]
            acc["excluded"] += data["excluded"]
            acc["before_stop"] += data["before_stop"]
            acc["lag"] += data.get("lag", [])
            acc["rules"] += data["rules"]
    out["kinds"] = kinds
    caught_bad = sum(kinds[k]["excluded"] for k in BAD)
    out["precision"] = _share(caught_bad, caught_bad + kinds["careful"]["excluded"])
    caught = [n for kind in BAD for n in kinds[kind]["before_stop"]]
    out["before_stop_median"] = statistics.median(caught) if caught else None
    lags = [n for kind in BAD for n in kinds[kind]["lag"]]
    out["lag_median"] = statistics.median(lags) if lags else None
    out.update(combine_labels(runs))
    rules: dict[str, int] = {}
    for run in runs:
        for rule, n in run["excluded_by"].items():
            rules[rule] = rules.get(rule, 0) + n
    out["excluded_by"] = dict(sorted(rules.items()))
    out["runs"] = len(runs)
    out["seeds"] = sorted(run["seed"] for run in runs if "seed" in run)
    counts = ("seconds", "responses", "errors", "paced", "pace_timeouts", "labelled_items")
    for key in (*counts, "control_seconds"):
        out[key] = round(sum(run.get(key, 0) for run in runs), 1)
    return out


def earlier_results(path: Path, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This run's rows and those of the runs in `path` (a --runs-file), in the table's order
    (HIT type, mix, redundancy); a row measured now replaces an earlier one."""
    grouped: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            run = json.loads(line)
            grouped.setdefault((run["hit_type"], run["mix"], run["redundancy"]), []).append(run)
    rows = {key: combine(runs) for key, runs in grouped.items()}
    rows.update({(r["hit_type"], r["mix"], r["redundancy"]): r for r in results})
    types, mixes = list(MAKERS), list(MIXES)

    def order(key: tuple[str, str, int]) -> tuple[int, int, int]:
        return types.index(key[0]), mixes.index(key[1]), key[2]

    return [rows[key] for key in sorted(rows, key=order)]


def results_block(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join([".venv/bin/python", "benchmarks/qc_bench.py", *sys.argv[1:]])
    mixes = "; ".join(
        f"{name}: " + ", ".join(f"{n} {kind}" for kind, n in mix.items())
        for name, mix in MIXES.items()
    )
    lines = [
        START,
        f"Measured {now} with `{command}` on {os.cpu_count()} cores, "
        f"Python {platform.python_version()}.",
        "",
        f"Per study: 40 workers of `benchmarks/qc_crowd.py` ({mixes}), up to {args.items} "
        f"items each, real items sized to the redundancy, {args.gold} gold and "
        f"{args.attention} attention items, attention rate 0.1, default QC settings; a live "
        "`crowd worker` runs the QC jobs. The runs of each row and their seeds are in the "
        "exclusions list below; exclusions are summed over runs. Precision: bad workers among "
        "the bad and careful workers excluded (noisy workers, who read but err often, are neither: "
        "their exclusions have a column of their own). Recall cells: excluded / workers of "
        "the kind. Items before stop: median over the bad workers excluded of the answers "
        "the QC refresh that stopped them had read (a drifter's counted from its drift); "
        "queue lag: median of the answers they stored meanwhile (the simulated crowd answers "
        "a round of 40 items in a second or two, people take minutes).",
        "",
        "| HIT type | mix | answers per item | precision | " + " | ".join(BAD)
        + " | careful excluded | noisy excluded | items before stop | queue lag |",
        "|---|---|---|---|" + "---|" * len(BAD) + "---|---|---|---|",
    ]  # fmt: skip
    for r in results:
        kinds = r["kinds"]
        cells = [f"{kinds[k]['excluded']}/{kinds[k]['n']}" for k in BAD]
        lines.append(
            f"| {r['hit_type']} | {r['mix']} | {r['redundancy']} | {_fmt(r['precision'])} | "
            + " | ".join(cells)
            + f" | {kinds['careful']['excluded']}/{kinds['careful']['n']}"
            f" | {kinds['noisy']['excluded']}/{kinds['noisy']['n']}"
            f" | {_count(r['before_stop_median'])} | {_count(r.get('lag_median'))} |"
        )
    if any(r["accuracy_all"] for r in results):
        lines += label_table(results)
    else:
        lines += ["", "Labels: not measured (`--no-control`)."]
    lines += bar_table(results)
    lines += ["", "Exclusions by rule:", ""]
    for r in results:
        rules = ", ".join(f"{k}: {v}" for k, v in r["excluded_by"].items()) or "none"
        seeds = f", seeds {_seeds(r['seeds'])}" if r.get("seeds") else ""
        lines.append(
            f"- {r['hit_type']}, {r['mix']}, {r['redundancy']} per item "
            f"({r.get('runs', '?')} runs{seeds}): {rules} "
            f"({r['responses']} responses, {r['seconds']} s of which {r.get('paced', 0)} s "
            f"waiting for the queue ({r.get('pace_timeouts', 0)} waits cut short), "
            f"{r['errors']} errors; {r.get('labelled_items', '?')} real items compared; "
            f"control {r.get('control_seconds', 0)} s)"
        )
    lines.append(END)
    return "\n".join(lines)


def write_results(block: str) -> None:
    write_block(
        START,
        END,
        block,
        intro=(
            "\n# Benchmark: quality control on simulated crowds\n\n"
            "`benchmarks/qc_bench.py` (`make bench-qc`): see its docstring. The block below is "
            "rewritten by each run.\n\n"
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=30, help="items per worker")
    parser.add_argument("--gold", type=int, default=40, help="gold items per study")
    parser.add_argument("--attention", type=int, default=10, help="attention items per study")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--runs", type=int, default=1, help="runs per row (seeds seed, ...)")
    parser.add_argument("--types", default="boundary,likert,comparison,form")
    parser.add_argument("--mixes", default=",".join(MIXES))
    parser.add_argument("--redundancy", default=",".join(map(str, REDUNDANCY)))
    parser.add_argument("--runs-file", help="append each run's result to this file (JSON lines)")
    parser.add_argument(
        "--add-runs",
        help="a --runs-file of earlier runs (same settings) whose rows join this run's table",
    )
    parser.add_argument("--dump", help="folder for each study's per-worker evidence (JSON); "
                        "the databases are then kept in /tmp for qc_replay.py")  # fmt: skip
    parser.add_argument("--qc", default="{}", help="QC settings laid over each study's (JSON)")
    parser.add_argument("--round-wait", type=float, default=30.0,
                        help="most seconds to wait between rounds for the queue to catch up "
                             "(0: do not wait)")  # fmt: skip
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    parser.add_argument("--flag-only", action="store_true", help="rules flag, stop nobody: "
                        "whole records for qc_policies.py (detection is then meaningless)")
    parser.add_argument("--no-control", action="store_true",
                        help="skip the control study without QC (and the label table)")  # fmt: skip
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # killed: play stops its worker
    load_builtin()
    base = Settings.from_env()
    results = []
    for hit_type in filter(None, args.types.split(",")):  # "": only the --add-runs rows
        for mix in args.mixes.split(","):
            for redundancy in map(int, args.redundancy.split(",")):
                runs = []
                for n in range(args.runs):
                    print(f"{hit_type}, {mix}, {redundancy} per item: run {n + 1} ...", flush=True)
                    seeded = argparse.Namespace(**{**vars(args), "seed": args.seed + n})
                    runs.append(run_scenario(hit_type, mix, redundancy, seeded, base))
                    if args.runs_file:
                        with open(args.runs_file, "a", encoding="utf-8") as out:
                            out.write(json.dumps(runs[-1]) + "\n")
                    print({k: v for k, v in runs[-1].items() if k != "kinds"}, flush=True)
                    print(runs[-1]["kinds"], flush=True)
                results.append(combine(runs))
    if args.add_runs:
        results = earlier_results(Path(args.add_runs), results)
    block = results_block(results, args)
    print(block)
    if not args.no_write:
        write_results(block)


if __name__ == "__main__":
    main()
