"""The results of benchmarks/submit_rps.py: the table, and its block in RESULTS.md."""

from __future__ import annotations

import argparse
import contextlib
import platform
import re
from dataclasses import dataclass
from pathlib import Path

from results_md import write_block
from rps_load import LoadResult

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
COMMAND = ".venv/bin/python benchmarks/submit_rps.py"
START_MARK = "<!-- results:start -->"
END_MARK = "<!-- results:end -->"


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@dataclass
class Row:
    name: str
    result: LoadResult
    note: str = ""

    @property
    def elapsed(self) -> float:
        return max(1e-9, self.result.finished - self.result.started)

    def cells(self) -> list[str]:
        res = self.result
        every = [v for values in res.latencies.values() for v in values]
        store = res.latencies.get("store") or res.latencies.get("submit") or []
        answers = f"{res.answers / self.elapsed:.0f}" if "store" in res.latencies else "-"
        return [
            self.name,
            f"{res.requests / self.elapsed:.0f}",
            answers,
            f"{percentile(every, 0.5):.1f}",
            f"{percentile(every, 0.95):.1f}",
            f"{percentile(store, 0.5):.1f}",
            f"{percentile(store, 0.95):.1f}",
            str(res.errors),
            str(res.requests),
        ]


HEADER = [
    "target", "requests/s", "answers/s", "p50 ms", "p95 ms",
    "store p50 ms", "store p95 ms", "errors", "requests",
]  # fmt: skip


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def ratios(rows: list[Row]) -> list[str]:
    """Per engine, crowd's requests/s and answers/s over the floor's, each arm's rounds
    pooled (their requests over their seconds)."""
    pooled: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        arm, _, rest = row.name.partition(", ")
        engine = rest.split(" (")[0]
        got = pooled.setdefault((arm, engine), [0.0, 0.0, 0.0])
        got[0] += row.result.requests
        got[1] += row.result.answers
        got[2] += row.elapsed
    lines = []
    for engine in sorted({engine for arm, engine in pooled if arm == "crowd"}):
        crowd, floor = pooled.get(("crowd", engine)), pooled.get(("floor", engine))
        if not crowd or not floor or not floor[0] or not floor[1]:
            continue
        rps = (crowd[0] / crowd[2]) / (floor[0] / floor[2])
        aps = (crowd[1] / crowd[2]) / (floor[1] / floor[2])
        lines.append(
            f"- {engine}: crowd {crowd[0] / crowd[2]:.0f} requests/s against the floor's "
            f"{floor[0] / floor[2]:.0f}: **{rps:.2f}x** (answers/s {aps:.2f}x)"
        )
    return lines


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text()
        match = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
        if match:
            return match.group(1).strip()
    return platform.processor() or "unknown CPU"


def results_block(rows: list[Row], facts: dict[str, str], args: argparse.Namespace) -> str:
    notes = [f"- {row.name}: {row.note}" for row in rows if row.note]
    lines = [
        START_MARK,
        f"Measured {facts['date']} with `make bench` (that is, `{COMMAND}`).",
        "",
        f"- Machine: {facts['cores']} cores ({facts['cpu']}), Linux, Python {facts['python']}; "
        f"load average 1/5/15 min at the start: {facts['load']}.",
        f"- Server: gunicorn with deploy/gunicorn.conf.py: {args.workers} workers x 4 threads "
        "(gthread), access log on, bound to 127.0.0.1.",
        f"- Load: {args.clients} client threads in {args.client_processes} processes on the same "
        f"machine, {args.duration:.0f} s per target after a {args.warmup:.0f} s warm-up, at most "
        f"{args.max_requests} requests per target.",
        f"- Stores: SQLite (WAL) file; PostgreSQL {facts['pg']} database `bench`; Redis "
        f"{facts['redis']} (db 14) takes the RQ job each answer enqueues after its commit "
        "(no queue worker runs during the benchmark).",
        "",
        table(rows),
        "",
        "crowd against the floor (benchmarks/floor_app.py: the same three requests with the "
        "minimal honest work, same engine settings, gunicorn config and client), the rounds "
        "of each arm pooled:",
        "",
        *ratios(rows),
        "",
        "requests/s counts every request; for crowd and the floor that is next + reveal step "
        "+ store step per answer, so answers/s is about a third of it. p50/p95 cover every "
        "request; the store columns cover the step that stores the answer (the only request "
        "for bare Flask). Statements per answer (next, reveal, store): 10 for crowd, counted "
        "by tests/crowd/work/test_statements.py; 9 for the floor.",
        *([""] + notes if notes else []),
        END_MARK,
    ]
    return "\n".join(lines)


RESULTS_INTRO = """# Benchmark: answer submission under gunicorn

`benchmarks/submit_rps.py` measures requests per second and latency of crowd's answer path
(join once, then per item: `POST /api/work/studies/<id>/next`, a reveal step and the step
that stores the answer) under gunicorn, against a bare Flask endpoint
(`benchmarks/bare_flask.py`) under the same gunicorn settings, on SQLite and on PostgreSQL
with Redis, and against the floor (`benchmarks/floor_app.py`): the same requests with the
minimal honest work, interleaved with crowd's runs. Run it with `make bench`. The block
below is rewritten by each run; text outside it is kept.

"""


def write_results(block: str) -> None:
    write_block(START_MARK, END_MARK, block, RESULTS_INTRO)
