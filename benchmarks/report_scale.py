"""Reports over many boundary annotations, against the plain read of the same rows.

    make bench            # or: .venv/bin/python benchmarks/report_scale.py [--postgres]

For each size (--sizes, default 100k and 1M annotations) a boundary study is made in bulk
(benchmarks/report_data.py: 10 answers per 10-sentence passage, 500 per worker, 2% gold and
2% attention checks, an explanation and a reason on most answers, step events as the answer
path stores them). Then, each in a fresh process and the two arms interleaved `--rounds`
times:

- **plain read**: the columns of the responses a boundary report uses (worker, item, guess,
  explanation, reasons, attention verdict, rater group, time) and the items' (kind,
  category, boundary, generator, decoding), fetched by the DB-API cursor in batches of
  20,000 into numpy arrays; nothing computed. Any report reads at least this.
- **report**: `compute_report(..., refresh=False)`, what the report job runs after answers
  arrive (QC standing as the queue keeps it): the read, the full and filtered analysis, rule
  removals, QC summary, majority vote, Dawid-Skene and first-change labels, and the HTML
  report with its plots.

Each process reports the wall time of its measured part and its peak resident memory (the
whole process: Python, numpy, SQLAlchemy and matplotlib included). Targets: the report
within 3x the plain read's time and under 2 GB, at 1M.

SQLite studies are kept in benchmarks/out/report/ (git-ignored) and reused by later runs;
--postgres uses the database `bench` (never `test`): its studies of these sizes are reused
where it has them (other benchmarks reset it; --fresh does here).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "benchmarks"
OUT_DIR = BENCH_DIR / "out" / "report"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from results_md import write_block  # noqa: E402
from rps_servers import reset_postgres  # noqa: E402

START, END = "<!-- report:start -->", "<!-- report:end -->"
INTRO = """
## Reports over many annotations (`benchmarks/report_scale.py`)

See the script's docstring. The block below is rewritten by each run.

"""
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/bench"


def plain_read(database_url: str, study_id: int) -> dict[str, Any]:
    """The responses' and items' columns into numpy arrays, with the DB-API cursor."""
    import numpy as np
    from sqlalchemy import create_engine

    engine = create_engine(database_url)
    postgres = engine.dialect.name == "postgresql"
    guess = "(answer->>'guess')::int" if postgres else "json_extract(answer, '$.guess')"
    passed = (
        "(qc_flags->>'attention_passed')::boolean"
        if postgres
        else "json_extract(qc_flags, '$.attention_passed')"
    )
    reasons = "reasons::text" if postgres else "reasons"
    boundary = (
        "(expected->>'boundary')::int" if postgres else "json_extract(expected, '$.boundary')"
    )
    generator = "meta->>'generator'" if postgres else "json_extract(meta, '$.generator')"
    decoding = (
        "(meta->'decoding'->>'value')::float"
        if postgres
        else "json_extract(meta, '$.decoding.value')"
    )
    mark = "%s" if postgres else "?"
    started = time.perf_counter()
    connection = engine.raw_connection()
    try:
        cursor = connection.cursor()
        cursor.execute(
            f"SELECT id, worker_id, item_id, {guess}, explanation, {reasons}, {passed}, "
            f"rater_group, created_at FROM responses WHERE study_id = {mark}",
            (study_id,),
        )
        columns: list[list[Any]] = [[] for _ in range(9)]
        while batch := cursor.fetchmany(20_000):
            for column, values in zip(columns, zip(*batch, strict=True), strict=True):
                column.extend(values)
        arrays = [np.asarray(column, dtype=np.int64) for column in columns[:4]]
        arrays += [np.asarray(column, dtype=object) for column in columns[4:]]
        cursor.execute(
            f"SELECT id, kind, category, {boundary}, {generator}, {decoding} FROM items "
            f"WHERE study_id = {mark}",
            (study_id,),
        )
        items = cursor.fetchall()
        cursor.close()
    finally:
        connection.close()
    return {"seconds": time.perf_counter() - started, "rows": int(arrays[0].size),
            "items": len(items)}  # fmt: skip


def report(database_url: str, study_id: int, data_dir: str) -> dict[str, Any]:
    """The report job's computation (compute_report with refresh=False), timed."""
    from crowd.settings import Settings
    from crowd.storage import Database
    from crowd.studies.reports import compute_report
    from tasks import load_builtin

    load_builtin()
    settings = replace(Settings.from_env(), database_url=database_url, data_dir=Path(data_dir))
    db = Database(database_url)
    started = time.perf_counter()
    with db.read_session() as session:
        computed = compute_report(session, settings, study_id, refresh=False)
    seconds = time.perf_counter() - started
    db.dispose()
    methods = sorted(computed.data.get("aggregation", {}))
    return {"seconds": seconds, "rows": computed.responses_seen, "methods": methods}


def child(arm: str, database_url: str, study_id: int, data_dir: str) -> None:
    """Run one arm in this (fresh) process and print its result as JSON."""
    result = (
        plain_read(database_url, study_id)
        if arm == "plain"
        else report(database_url, study_id, data_dir)
    )
    result["peak_mb"] = peak_mb()
    print(json.dumps(result))


def peak_mb() -> float:
    """This process's peak resident memory: VmHWM, which a new program starts afresh.

    Not getrusage's ru_maxrss: Linux carries it across fork and exec, so a child started
    by a parent that filled a database in bulk would report the parent's size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status (not Linux?)")


def run_arm(arm: str, database_url: str, study_id: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", arm, "--url", database_url,
         "--study", str(study_id)],
        capture_output=True, text=True, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH_DIR)])},
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"the {arm} arm failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def has_schema(database_url: str) -> bool:
    """Whether the database exists and has crowd's tables (then its studies are reused)."""
    from sqlalchemy import create_engine, inspect

    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            return inspect(connection).has_table("responses")
    except Exception:  # noqa: BLE001 - no database yet
        return False
    finally:
        engine.dispose()


def study_with(database_url: str, size: int) -> int:
    """A study of `size` annotations in the database: the one there, or a new one."""
    from report_data import fill
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            found = connection.execute(
                text("SELECT study_id FROM responses GROUP BY study_id HAVING count(*) = :n"),
                {"n": size},
            ).first()
            if found is not None:
                return int(found[0])
    except Exception:  # noqa: BLE001 - no schema yet: fill it
        pass
    finally:
        engine.dispose()
    started = time.perf_counter()
    study_id = fill(database_url, size)
    print(f"  made {size:,} annotations in {time.perf_counter() - started:.0f} s", flush=True)
    return study_id


def measure(database_url: str, engine: str, sizes: list[int], rounds: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        if engine == "SQLite":
            OUT_DIR.mkdir(parents=True, exist_ok=True)
            database_url = f"sqlite:///{OUT_DIR / f'boundary-{size}.db'}"
        print(f"{engine}, {size:,} annotations", flush=True)
        study_id = study_with(database_url, size)
        arms: dict[str, list[dict[str, Any]]] = {"plain": [], "report": []}
        for _ in range(rounds):
            for arm in ("plain", "report"):
                arms[arm].append(run_arm(arm, database_url, study_id))
                print(f"  {arm}: {arms[arm][-1]}", flush=True)
        rows.append({"engine": engine, "size": size, **arms})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| database | annotations | plain read: s | report: s | report / read | "
        "plain read: peak MB | report: peak MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        plain = statistics.median(r["seconds"] for r in row["plain"])
        done = statistics.median(r["seconds"] for r in row["report"])
        plain_mb = max(r["peak_mb"] for r in row["plain"])
        report_mb = max(r["peak_mb"] for r in row["report"])
        lines.append(f"| {row['engine']} | {row['size']:,} | {plain:.1f} | {done:.1f} | "
                     f"{done / plain:.1f}x | {plain_mb:,.0f} | {report_mb:,.0f} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="annotations, comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each arm, interleaved")
    parser.add_argument("--postgres", nargs="?", const=DEFAULT_POSTGRES, default=None,
                        help=f"also on PostgreSQL (default URL {DEFAULT_POSTGRES})")  # fmt: skip
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="reset the PostgreSQL database even where it holds the studies",
    )
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--study", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.url, args.study, str(OUT_DIR / "data"))
        return
    sizes = [int(size) for size in args.sizes.split(",") if size]
    began = datetime.now(UTC)
    rows = measure("", "SQLite", sizes, args.rounds)
    if args.postgres:
        if args.fresh or not has_schema(args.postgres):
            version = reset_postgres(args.postgres)
            print(f"PostgreSQL {version}", flush=True)
        rows += measure(args.postgres, "PostgreSQL", sizes, args.rounds)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT, check=False).stdout.strip()  # fmt: skip
    block = "\n".join([
        START,
        f"Measured {began:%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, commit {commit}; medians of {args.rounds} interleaved "
        "runs a row, each in a fresh process; peak memory is the process's maximum resident "
        "set (the largest of the runs).",
        "",
        table(rows),
        END,
    ])  # fmt: skip
    print(block)
    if not args.no_write:
        write_block(START, END, block, INTRO)


if __name__ == "__main__":
    main()
