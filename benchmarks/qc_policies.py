"""Rules tried on whole records: replay flag-only QC studies under other rules, offline.

`qc_bench.py --flag-only --dump DIR` plays studies whose rules only flag, so nobody is stopped
and every worker's record runs to its end (the items served still follow QC's doubt: gold
and extra checks come as in a live run). This script judges every worker after every
`--step` answers of the study, with the study's default rules acting (soft block) and with
each `--variant`, and prints per HIT type and variant the careful workers a rule would have
stopped (with the rule and the answers it had read) and bad workers' median answers before
the first stop (a drifter's counted from its drift, as qc_bench counts them).

A variant is a name and its changes, separated by commas: `scale=K` puts every rule on a
probability at 1 - (1 - threshold) x K (2: 0.95 becomes 0.9, 0.99 becomes 0.98),
`RULE.METRIC=N` makes RULE wait until METRIC is at least N too, and `RULE.threshold=T` sets
RULE's threshold. For example
`--variant 'four=stopped_reading.stopped_reading_n=4'` (the rule before 2026-11-30), or
`stopped_reading.gold_doubt=0` (gold never vouches). Rules that act later than the live
ones can be tried here, which `qc_replay.py` cannot: a live stop ends the record.

With nobody stopped, bad workers' answers stay in the crowd for the whole study (a live run
asks for them again), so careful workers meet a dirtier consensus here than live: more of
them are stopped, not fewer. `--scale`-d variants make rare stops common enough to count.

    .venv/bin/python benchmarks/qc_policies.py --dump DIR --variant 'NAME=CHANGES' [--jobs 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections import defaultdict
from multiprocessing import Pool
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qc_bar import GOOD  # noqa: E402
from qc_crowd import DRIFT_AFTER  # noqa: E402
from qc_replay import judgements  # noqa: E402
from sqlalchemy import select  # noqa: E402

from crowd.quality.exclusion import study_qc  # noqa: E402
from crowd.quality.standing import crowd_rows, qc_rows  # noqa: E402
from crowd.storage import Database, Study, Worker  # noqa: E402
from qc.config import parse_qc_config  # noqa: E402
from qc.rules import Action, Rule, evaluate  # noqa: E402


def variant_rules(rules: tuple[Rule, ...], changes: str) -> tuple[Rule, ...]:
    """`rules` with a variant's changes (module docstring).

    >>> from qc.rules import DEFAULT_RULES
    >>> changes = "scale=2,too_fast.responses=9,attention_failed.threshold=0.995"
    >>> got = {r.name: r for r in variant_rules(DEFAULT_RULES, changes)}
    >>> round(got["below_crowd"].threshold, 3), got["too_fast"].min_evidence
    (0.9, {'responses': 9})
    >>> got["attention_failed"].threshold, got["attention_failed"].min_evidence
    (0.995, {'attention_failed': 4})
    """
    out = list(rules)
    for change in filter(None, (c.strip() for c in changes.split(","))):
        key, _, value = change.partition("=")
        if key == "scale":
            k = float(value)
            out = [dataclasses.replace(r, threshold=1 - (1 - r.threshold) * k)
                   if r.metric.endswith("_prob") else r for r in out]  # fmt: skip
            continue
        name, _, metric = key.partition(".")
        if not metric or name not in {r.name for r in out}:
            raise SystemExit(
                f"--variant: {change!r} is none of scale=K, RULE.METRIC=N, RULE.threshold=T"
            )
        least = float(value)
        if metric == "threshold":
            out = [dataclasses.replace(r, threshold=least) if r.name == name else r for r in out]
            continue
        number = int(least) if least.is_integer() else least
        out = [dataclasses.replace(r, min_evidence={**r.min_evidence, metric: number})
               if r.name == name else r for r in out]  # fmt: skip
    return tuple(out)


def replay(job: tuple[str, dict[str, str], int]) -> tuple[str, dict[str, Any]]:
    """Per worker of one dumped study: kind, and per variant the first stop (answers read,
    rule) or None."""
    path, variants, step = job
    dump = json.loads(Path(path).read_text())
    db = Database(dump["database"])
    with db.session() as session:
        study = session.get(Study, dump["study_id"])
        assert study is not None, dump["database"]
        # The rules the study's settings make by default (the study's own only flagged).
        raw = study_qc(study).to_json()
        raw.pop("rules")
        config = parse_qc_config(raw)
        found = crowd_rows(session, study)
        rows = qc_rows(session, study)
        names = dict(session.execute(select(Worker.id, Worker.external_id)).all())
    db.dispose()
    rules = {name: variant_rules(config.rules, changes) for name, changes in variants.items()}
    first: dict[str, dict[str, tuple[int, str]]] = defaultdict(dict)
    for evidence in judgements(study, config, found, rows, step):
        for name, theirs in rules.items():
            for decision in evaluate(evidence, theirs):
                if decision.action is not Action.FLAG:
                    answers = evidence[decision.worker]["responses"]
                    first[decision.worker].setdefault(name, (answers, decision.rule))
    kinds = {name: data.get("kind") for name, data in dump["workers"].items()}
    return Path(path).stem, {
        names[int(w)]: {"kind": kinds.get(names[int(w)]), "first": found_first}
        for w, found_first in first.items()
    } | {
        name: {"kind": kinds.get(name), "first": {}}
        for wid, name in names.items() if str(wid) not in first
    }  # fmt: skip


def report(studies: dict[str, dict[str, Any]], variants: list[str]) -> list[str]:
    """Per HIT type (the dump's name starts with it) and variant: careful workers stopped and
    bad workers' answers before the stop."""
    lines = []
    types = sorted({name.split("-")[0] for name in studies})
    for hit in types:
        mine = {name: ws for name, ws in studies.items() if name.startswith(f"{hit}-")}
        for variant in variants:
            careful, stopped, stops, never = 0, [], [], 0
            for study, workers in sorted(mine.items()):
                for worker, data in sorted(workers.items()):
                    kind, stop = data["kind"], data["first"].get(variant)
                    if kind == "careful":
                        careful += 1
                        if stop:
                            stopped.append(f"{study} {worker} at {stop[0]} ({stop[1]})")
                    elif kind not in GOOD and kind is not None:
                        if stop is None:
                            never += 1
                        else:
                            stops.append(stop[0] - (DRIFT_AFTER if kind == "drifter" else 0))
            median = statistics.median(stops) if stops else "-"
            lines.append(f"{hit:11} {variant:14} careful stopped {len(stopped)}/{careful}; bad: "
                         f"median {median} before the stop, never stopped {never} of "
                         f"{never + len(stops)}")  # fmt: skip
            lines += [f"    {line}" for line in stopped]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", required=True, help="the folder qc_bench.py --dump wrote")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=CHANGES (module docstring); the live rules are 'live'")
    parser.add_argument("--step", type=int, default=8, help="answers between judgements")
    parser.add_argument("--jobs", type=int, default=1, help="studies replayed at once")
    parser.add_argument("--save", help="write every worker's first stop per variant (JSON)")
    args = parser.parse_args()
    variants = {"live": ""}
    for spec in args.variant:
        name, sep, changes = spec.partition("=")
        if not sep or not name:
            raise SystemExit(f"--variant {spec!r}: write NAME=CHANGES")
        variant_rules(parse_qc_config({}).rules, changes)  # a mistake fails before the replay
        variants[name] = changes
    jobs = [(str(p), variants, args.step) for p in sorted(Path(args.dump).glob("*.json"))]
    with Pool(args.jobs) as pool:
        studies = dict(pool.map(replay, jobs))
    print("\n".join(report(studies, list(variants))))
    if args.save:
        Path(args.save).write_text(json.dumps(studies))


if __name__ == "__main__":
    main()
