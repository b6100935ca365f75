"""Replay finished QC-benchmark studies through the QC code of this checkout, answer by answer.

`benchmarks/qc_bench.py --dump DIR` writes each study's workers (kind, exclusion, evidence)
with the path of its database, which the run leaves in its temporary folder. This script
reads those databases and judges every worker as the study stood after every `--step`
answers (of all workers), with the QC settings the study had or with `--qc` over them, and
prints per bad kind the answers at which a soft-blocking rule first fires, per rule, the
careful and noisy workers any rule would have stopped, and the careful workers' highest
probability of being below the crowd by judged answers (how much room a rule on
`agreement_below_prob` has). `--save FILE` keeps every worker's replay as JSON, with their
(answers, judged answers, P(below the crowd)) at every judgement, so rules on that
probability can be tried offline without replaying again. Answers are counted as the
worker's `responses` when the rule first fires, within `--step`; qc_bench counts a
drifter's from its drift, so the two medians differ.

Rules that act sooner than the live run's can be tried this way in minutes. One that acts
later cannot: a worker the live run stopped answered nothing more.

    .venv/bin/python benchmarks/qc_replay.py --dump DIR [--qc '{"crowd": {"early_answers": 6}}']
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qc_bar import GOOD  # noqa: E402
from sqlalchemy import select  # noqa: E402

from crowd.quality.exclusion import study_qc  # noqa: E402
from crowd.quality.standing import crowd_metrics_of, crowd_rows, qc_rows  # noqa: E402
from crowd.storage import Database, Study, Worker  # noqa: E402
from qc.config import parse_qc_config  # noqa: E402
from qc.evidence import worker_evidence  # noqa: E402
from qc.rules import Action, evaluate  # noqa: E402


def settings(study: Study, override: dict[str, Any]) -> Any:
    """The study's QC settings with `override`'s sections laid over them; a study whose rules
    were the defaults gets the defaults of the new settings."""
    current = study_qc(study)
    raw = current.to_json()
    defaults = parse_qc_config({k: v for k, v in raw.items() if k != "rules"}).rules
    if "rules" not in override and current.rules == defaults:
        raw.pop("rules")
    for section, values in override.items():
        raw[section] = values if section == "rules" else {**(raw.get(section) or {}), **values}
    return parse_qc_config(raw)


def judgements(
    study: Study, config: Any, found: list[Any], rows: list[dict[str, Any]], step: int
) -> Iterator[dict[str, dict[str, Any]]]:
    """Every worker's evidence as the study stood after every `step` answers of `found`
    (crowd_rows) and at the end; `rows` are the study's qc_rows."""
    for n in [*range(step, len(found), step), len(found)]:
        ids = {row[0] for row in found[:n]}
        crowd = crowd_metrics_of(study, config, found[:n])
        yield worker_evidence([r for r in rows if r["response_id"] in ids], config, crowd)


def replay(dump: dict[str, Any], override: dict[str, Any], step: int) -> dict[str, Any]:
    """Per worker (external id): kind, {rule: answers when it first fired} and the track:
    (answers, judged answers, agreement_below_prob) at every judgement."""
    db = Database(dump["database"])
    with db.session() as session:
        study = session.get(Study, dump["study_id"])
        assert study is not None, dump["database"]
        config = settings(study, override)
        found = crowd_rows(session, study)
        rows = qc_rows(session, study)
        names = dict(session.execute(select(Worker.id, Worker.external_id)).all())
    db.dispose()
    first: dict[str, dict[str, int]] = defaultdict(dict)
    track: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    for evidence in judgements(study, config, found, rows, step):
        for worker, metrics in evidence.items():
            judged, below = metrics.get("agreement_n") or 0, metrics.get("agreement_below_prob")
            if judged and below is not None:
                track[worker].append((metrics["responses"], judged, below))
        for decision in evaluate(evidence, config.rules):
            if decision.action is not Action.FLAG:
                answers = evidence[decision.worker]["responses"]
                first[decision.worker].setdefault(decision.rule, answers)
    workers = dump["workers"]
    return {
        name: {"kind": workers.get(name, {}).get("kind"), "first": first.get(str(wid), {}),
               "track": track.get(str(wid), [])}
        for wid, name in names.items()
    }  # fmt: skip


def report(studies: dict[str, dict[str, Any]]) -> None:
    stops: dict[str, list[int]] = defaultdict(list)
    missed: dict[str, int] = defaultdict(int)
    by_rule: dict[str, int] = defaultdict(int)
    good_stopped: list[str] = []
    highest: dict[int, list[float]] = defaultdict(list)
    for name, workers in sorted(studies.items()):
        for worker, found in sorted(workers.items()):
            kind, first = found["kind"], found["first"]
            if kind in GOOD and first:  # noisy workers read, if carelessly: not bad
                good_stopped.append(f"{name} {worker} ({kind}) {first}")
            if kind == "careful":  # each worker's highest at each number of judged answers
                theirs: dict[int, float] = {}
                for _, judged, below in found["track"]:
                    theirs[judged] = max(theirs.get(judged, 0.0), below)
                for judged, below in theirs.items():
                    highest[judged].append(below)
            if kind in GOOD or kind is None:
                continue
            if not first:
                missed[kind] += 1
                continue
            rule = min(first, key=lambda r: first[r])
            stops[kind].append(first[rule])
            by_rule[rule] += 1
    everyone = [n for kind in stops.values() for n in kind]
    print(f"{len(studies)} studies; answers before the first soft block, all bad workers: "
          f"median {statistics.median(everyone) if everyone else '-'}")  # fmt: skip
    for kind in sorted(stops.keys() | missed.keys()):
        got = stops.get(kind, [])
        median = statistics.median(got) if got else "-"
        print(f"  {kind:16} median {median:>5}  never stopped {missed[kind]} of "
              f"{len(got) + missed[kind]}")  # fmt: skip
    print("  first rule to fire:", dict(sorted(by_rule.items())))
    print(f"careful and noisy workers stopped: {len(good_stopped)}")
    for line in good_stopped:
        print("  " + line)
    print("careful workers' highest P(below the crowd), by judged answers:")
    for judged in sorted(highest)[:16]:
        top = sorted(highest[judged], reverse=True)
        print(f"  {judged:3}: {len(top)} workers, highest {', '.join(f'{v:.3f}' for v in top[:3])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", required=True, help="the folder qc_bench.py --dump wrote")
    parser.add_argument("--qc", default="{}", help="QC settings laid over each study's (JSON)")
    parser.add_argument("--step", type=int, default=5, help="answers between judgements")
    parser.add_argument("--only", default="", help="only the studies whose name has this")
    parser.add_argument(
        "--save",
        help="write each worker's replay (JSON): kind, first firing per rule, and "
        "(answers, judged, P(below the crowd)) at every judgement",
    )
    args = parser.parse_args()
    override = json.loads(args.qc)
    studies = {}
    for path in sorted(Path(args.dump).glob("*.json")):
        if args.only in path.stem:
            studies[path.stem] = replay(json.loads(path.read_text()), override, args.step)
    report(studies)
    if args.save:
        Path(args.save).write_text(json.dumps(studies))


if __name__ == "__main__":
    main()
