"""CLI start-up: the CPU time `crowd --help` and the light commands take before they answer.

Each command runs as a child process on a fresh SQLite data dir (CROWD_DATA_DIR in a temp
dir, with one experimenter and one study made first); its CPU time is the user + system
time of the child (resource.getrusage(RUSAGE_CHILDREN) before and after), the median of
--runs runs after one warm-up run (which writes the bytecode caches). `python -c pass` is
the floor: the interpreter's own start.

Targets (issue 17): `crowd --help` and `crowd study --help` under 0.5 s of CPU, `crowd keys
list` and `crowd study list` under 1 s. The script exits with status 1 when a median
misses its target. The CPU may be shared with other processes: the block notes the load
average before the runs.

Run: `.venv/bin/python benchmarks/cli_startup.py` (or `make bench-cli`); the block between
the cli markers in benchmarks/RESULTS.md is rewritten (--no-write leaves it alone).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from results_md import write_block

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).with_name("RESULTS.md")
START, END = "<!-- cli:start -->", "<!-- cli:end -->"

# (label, arguments after the interpreter or the crowd command, target in CPU seconds).
CASES: list[tuple[str, list[str], float | None]] = [
    ("python -c pass", ["-c", "pass"], None),
    ("crowd --help", ["--help"], 0.5),
    ("crowd study --help", ["study", "--help"], 0.5),
    ("crowd keys list", ["keys", "list"], 1.0),
    ("crowd study list", ["study", "list"], 1.0),
]


def crowd_command() -> list[str]:
    """The installed `crowd` script beside this interpreter, else `python -m crowd.cli`."""
    script = Path(sys.executable).with_name("crowd")
    return [str(script)] if script.exists() else [sys.executable, "-m", "crowd.cli"]


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `command`, which must succeed."""
    cpu, wall = child_cpu(), time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=env["CROWD_DATA_DIR"])  # fmt: skip
    return child_cpu() - cpu, time.perf_counter() - wall


def fresh_env(data_dir: Path) -> dict[str, str]:
    # Nothing of the caller's crowd settings (a PostgreSQL URL, another experimenter).
    env = {key: value for key, value in os.environ.items() if not key.startswith("CROWD_")}
    env["CROWD_DATA_DIR"] = str(data_dir)
    return env


def measure(runs: int) -> list[dict[str, object]]:
    crowd = crowd_command()
    with tempfile.TemporaryDirectory(prefix="crowd-cli-bench-") as tmp:
        env = fresh_env(Path(tmp))
        # One experimenter (the CLI acts as them) and one study: the lists have a line.
        for setup in (["keys", "create", "bench"], ["study", "create", "--name", "bench"]):
            subprocess.run([*crowd, *setup], env=env, check=True, capture_output=True, cwd=tmp)
        results = []
        for label, args, target in CASES:
            command = [sys.executable, *args] if label.startswith("python") else [*crowd, *args]
            run_once(command, env)  # warm-up
            samples = [run_once(command, env) for _ in range(runs)]
            cpu = statistics.median(s[0] for s in samples)
            results.append({
                "label": label,
                "cpu": cpu,
                "cpu_min": min(s[0] for s in samples),
                "cpu_max": max(s[0] for s in samples),
                "wall": statistics.median(s[1] for s in samples),
                "target": target,
                "ok": target is None or cpu < target,
            })  # fmt: skip
            print(f"{label:22} cpu {cpu:.3f} s (min {results[-1]['cpu_min']:.3f}) "
                  f"wall {results[-1]['wall']:.3f} s", flush=True)  # fmt: skip
    return results


def results_block(results: list[dict[str, object]], runs: int, load: tuple[float, ...]) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join([".venv/bin/python", "benchmarks/cli_startup.py", *sys.argv[1:]])
    lines = [
        START,
        f"Measured {now} with `{command}` on {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()}; load average 1/5/15 min before "
        f"the runs: {' / '.join(f'{x:.1f}' for x in load)}.",
        "",
        f"CPU time (user + system) of each command as a child process, median of {runs} runs "
        "after a warm-up run, on a fresh SQLite data dir holding one experimenter and one "
        "study.",
        "",
        "| command | CPU s (median) | min - max | wall s (median) | target | |",
        "|---|---|---|---|---|---|",
    ]
    for row in results:
        target = f"< {row['target']} s" if row["target"] is not None else "-"
        verdict = "" if row["target"] is None else ("met" if row["ok"] else "MISSED")
        lines.append(
            f"| `{row['label']}` | {row['cpu']:.3f} | {row['cpu_min']:.3f} - "
            f"{row['cpu_max']:.3f} | {row['wall']:.3f} | {target} | {verdict} |"
        )
    lines.append(END)
    return "\n".join(lines)


def write_results(block: str) -> None:
    write_block(
        START,
        END,
        block,
        intro=(
            "\n# Benchmark: CLI start-up\n\n"
            "`benchmarks/cli_startup.py` (`make bench-cli`, also run by `make bench`): see its "
            "docstring. The block below is rewritten by each run.\n\n"
        ),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="measured runs per command")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    args = parser.parse_args()
    load = os.getloadavg()
    results = measure(args.runs)
    block = results_block(results, args.runs, load)
    print(block)
    if not args.no_write:
        write_results(block)
    missed = [str(row["label"]) for row in results if not row["ok"]]
    if missed:
        print(f"missed the target: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
