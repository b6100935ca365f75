"""QC benchmark: does quality control catch spammers and careless workers, how early, and do
aggregated labels beat majority vote?

For each HIT type a simulated crowd of known kinds (60% careful, 20% noisy, 10% spammers,
10% careless) plays a study of synthetic items with known truth through the real web app,
while a real `crowd worker` process runs the QC jobs (so rules stop workers mid-run, as in
production). Then we measure, per HIT type:
- precision and recall of the workers QC excluded, against their true kinds;
- how many items a bad worker answered before QC stopped them;
- the accuracy of aggregated labels on real items against the truth, for majority vote,
  Dawid-Skene, MACE (and Bradley-Terry for comparisons), on every worker's labels.

Run: `.venv/bin/python benchmarks/qc_bench.py` (or `make bench-qc`); the results block in
benchmarks/RESULTS.md is rewritten.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from results_md import write_block
from sqlalchemy import select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crowd.accounts import authenticate, create_api_key  # noqa: E402
from crowd.demo import BackgroundServer  # noqa: E402
from crowd.platforms.providers.sim import SimulatedCrowd  # noqa: E402
from crowd.platforms.publishing import open_study  # noqa: E402
from crowd.quality import labels  # noqa: E402
from crowd.quality import standing as quality  # noqa: E402
from crowd.queue.runner import ensure_redis, run_worker  # noqa: E402
from crowd.settings import Settings  # noqa: E402
from crowd.storage import (  # noqa: E402
    Database,
    Item,
    ItemKind,
    Response,
    StudyWorker,
    Worker,
)
from crowd.studies.lifecycle import create_study, get_study, import_items  # noqa: E402
from qc.aggregation import label_accuracy  # noqa: E402
from tasks import get_hit_type, load_builtin  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
START, END = "<!-- qc:start -->", "<!-- qc:end -->"
WORDS = [
    "river",
    "stone",
    "lamp",
    "quiet",
    "market",
    "winter",
    "signal",
    "garden",
    "paper",
    "orbit",
    "violet",
    "harbor",
    "engine",
    "canvas",
    "thunder",
    "meadow",
    "silver",
    "pocket",
    "lantern",
    "bridge",
    "copper",
    "window",
    "velvet",
    "ember",
    "forest",
]
ATTRIBUTES = ("grammaticality", "cohesiveness", "likability", "relevance")


@dataclass(frozen=True)
class Plan:
    hit_type: str
    config: dict[str, Any]
    kinds: dict[str, str]  # role -> the type's simulator kind
    items_per_worker: int


PLANS = (
    Plan(
        "boundary",
        {"annotations_per_item": 5, "attention_rate": 0.1},
        {"careful": "careful", "noisy": "noisy", "spammer": "spammer", "careless": "fast_careless"},
        20,
    ),
    Plan(
        "likert",
        {"template": "story", "annotations_per_item": 5, "attention_rate": 0.1},
        {"careful": "careful", "noisy": "noisy", "spammer": "spammer", "careless": "straightliner"},
        20,
    ),
    Plan(
        "comparison",
        {
            "template": "sentiment",
            "annotations_per_item": 5,
            "attention_rate": 0.1,
            "overlap_share": 0,
        },
        {
            "careful": "skilled",
            "noisy": "noisy",
            "spammer": "spammer",
            "careless": "position_biased",
        },
        20,
    ),
)
SHARES = {"careful": 0.6, "noisy": 0.2, "spammer": 0.1, "careless": 0.1}
BAD = ("spammer", "careless")


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def boundary_items(rng: random.Random, n_real: int, n_gold: int, n_att: int) -> list[dict]:
    items = []
    for i in range(n_real + n_gold):
        sentences = [f"Passage {i}, sentence {s}: {words(rng, 14)}." for s in range(10)]
        kind = "gold" if i >= n_real else "real"
        items.append(
            {"id": f"p{i}", "sentences": sentences, "boundary": rng.randint(1, 10), "kind": kind}
        )
    for i in range(n_att):
        sentences = [f"Check {i}, sentence {s}: {words(rng, 8)}." for s in range(9)]
        sentences.append("This passage is all human: answer human at every step.")
        items.append({"id": f"att{i}", "sentences": sentences, "kind": "attention"})
    return items


def likert_items(rng: random.Random, n_real: int, n_gold: int, n_att: int) -> list[dict]:
    items = []
    for i in range(n_real + n_gold):
        quality_ = {name: round(rng.uniform(1.3, 4.7), 2) for name in ATTRIBUTES}
        record: dict[str, Any] = {
            "id": f"s{i}",
            "prompt": f"Prompt {i}: {words(rng, 8)}",
            "text": f"Story {i}. {words(rng, 60)}.",
            "meta": {"quality": quality_},
        }
        if i >= n_real:
            record["kind"] = "gold"
            record["expected_ratings"] = {k: int(v + 0.5) for k, v in quality_.items()}
        items.append(record)
    for i in range(n_att):
        wanted = rng.randint(1, 5)
        items.append(
            {
                "id": f"att{i}",
                "kind": "attention",
                "expected_rating": wanted,
                "prompt": "Attention check: read the text below.",
                "text": f"Check {i}: this is not a story. Choose {wanted} for every "
                f"question about this text. {words(rng, 20)}.",
            }
        )
    return items


def comparison_items(rng: random.Random, n_real: int, n_gold: int, n_att: int) -> list[dict]:
    items = []
    for i in range(n_real + n_gold):
        utility = [round(rng.gauss(0, 1), 3) for _ in range(4)]
        record: dict[str, Any] = {
            "id": f"q{i}",
            "query": f"Query {i}: {words(rng, 12)}",
            "candidates": [f"Candidate {i}.{c}: {words(rng, 12)}." for c in range(4)],
            "meta": {"utility": utility},
        }
        if i >= n_real:
            record["kind"] = "gold"
            record["best"] = utility.index(max(utility))
        items.append(record)
    for i in range(n_att):
        best = rng.randrange(4)
        candidates = [f"Check {i}.{c}: {words(rng, 10)}." for c in range(4)]
        candidates[best] = f"Check {i}.{best}: the banana {words(rng, 8)}."
        items.append(
            {
                "id": f"att{i}",
                "kind": "attention",
                "best": best,
                "candidates": candidates,
                "query": f"Attention check {i}: choose the candidate that says banana.",
            }
        )
    return items


MAKERS = {"boundary": boundary_items, "likert": likert_items, "comparison": comparison_items}


def truth_labels(hit_type: str, records: list[dict]) -> dict[str, Any]:
    """The true label of every (real item, question) task, keyed like crowd.quality.labels."""
    truth: dict[str, Any] = {}
    for record in records:
        if record.get("kind", "real") != "real":
            continue
        if hit_type == "boundary":
            truth[f"{record['id']}/boundary"] = record["boundary"]
        elif hit_type == "likert":
            for name, value in record["meta"]["quality"].items():
                truth[f"{record['id']}/{name}"] = min(5, max(1, int(value + 0.5)))
        else:
            utility = record["meta"]["utility"]
            truth[f"{record['id']}/best"] = utility.index(max(utility))
    return truth


def start_worker(settings: Settings) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CROWD_DATA_DIR": str(settings.data_dir),
        "CROWD_DATABASE_URL": settings.database_url,
        "CROWD_REDIS_URL": settings.redis_url or "",
        "CROWD_SECRET_KEY": settings.secret_key,
    }
    crowd = Path(sys.executable).with_name("crowd")
    return subprocess.Popen(
        [str(crowd), "worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def run_plan(plan: Plan, args: argparse.Namespace, base: Settings) -> dict[str, Any]:
    rng = random.Random(args.seed)
    records = MAKERS[plan.hit_type](rng, args.real, args.gold, args.attention)
    data_dir = Path(tempfile.mkdtemp(prefix=f"qc-bench-{plan.hit_type}-"))
    settings = replace(base, data_dir=data_dir, database_url=f"sqlite:///{data_dir / 'c.db'}")
    db = Database(settings.database_url)
    db.upgrade()
    with db.session() as session:
        api_key = create_api_key(session, "bench")
        study = create_study(
            session,
            authenticate(session, api_key),
            f"QC {plan.hit_type}",
            plan.hit_type,
            plan.config,
        )
        import_items(session, study, records)
        open_study(session, study, ["sim"])
        study_id = study.id
    counts = {role: round(share * args.workers) for role, share in SHARES.items()}
    mix = {plan.kinds[role]: n for role, n in counts.items()}
    role_of_kind = {kind: role for role, kind in plan.kinds.items()}
    settings, embedded = ensure_redis(settings)
    worker = start_worker(settings)
    started = time.perf_counter()
    try:
        with BackgroundServer(settings) as server:
            crowd = SimulatedCrowd(
                server.url,
                api_key,
                study_id,
                plan.hit_type,
                records,
                mix,
                seed=args.seed,
                items_per_worker=plan.items_per_worker,
            )
            result = crowd.run(threads=4)
        worker.terminate()
        worker.wait(timeout=30)
        run_worker(settings, burst=True)  # whatever the live worker had not got to yet
    finally:
        if worker.poll() is None:
            worker.kill()
        if embedded is not None:
            embedded.stop()
    elapsed = time.perf_counter() - started
    with db.session() as session:
        study = get_study(session, study_id)
        quality.refresh_study(session, study)
        standings = {
            worker_.external_id: row
            for row, worker_ in session.execute(
                select(StudyWorker, Worker).join(Worker, Worker.id == StudyWorker.worker_id)
            ).all()
        }
        answered = _answered(session)
        roles = {ext: role_of_kind[kind] for ext, kind in result.workers.items()}
        excluded = {ext for ext, row in standings.items() if row.excluded_by is not None}
        by_rule: dict[str, int] = {}
        for ext in excluded:
            rule = standings[ext].excluded_by or ""
            by_rule[rule] = by_rule.get(rule, 0) + 1
        bad = {ext for ext, role in roles.items() if role in BAD}
        out: dict[str, Any] = {
            "hit_type": plan.hit_type,
            "workers": dict(sorted(mix.items())),
            "items_per_worker": plan.items_per_worker,
            "errors": len(result.errors),
            "seconds": round(elapsed, 1),
            "responses": sum(answered.values()),
            "excluded_by": dict(sorted(by_rule.items())),
            "precision_bad": _share(len(excluded & bad), len(excluded)),
        }
        for role in ("spammer", "careless", "noisy", "careful"):
            members = {ext for ext, r in roles.items() if r == role}
            out[f"excluded_{role}"] = _share(len(excluded & members), len(members))
        out["precision_spammer_or_careless"] = out.pop("precision_bad")
        caught = sorted(answered.get(ext, 0) for ext in excluded & bad)
        out["items_before_stop_median"] = statistics.median(caught) if caught else None
        out["items_before_stop_max"] = max(caught) if caught else None
        careful = [answered.get(ext, 0) for ext, r in roles.items() if r == "careful"]
        out["items_careful_median"] = statistics.median(careful) if careful else None
        truth = truth_labels(plan.hit_type, records)
        methods = labels.METHODS
        labels.aggregate_study(session, study, filtered=False, methods=methods)
        stored = labels.stored(session, study_id)
        out["accuracy_all_workers"] = {
            method: label_accuracy(data["labels"], truth) for method, data in stored.items()
        }
        labels.aggregate_study(session, study, filtered=True, methods=methods)
        stored = labels.stored(session, study_id)
        out["accuracy_filtered"] = {
            method: label_accuracy(data["labels"], truth) for method, data in stored.items()
        }
        out["hit_type_gold_threshold"] = get_hit_type(plan.hit_type).gold_threshold
    db.dispose()
    return out


def _answered(session: Any) -> dict[str, int]:
    """Items each worker answered (attention and gold included, training not)."""
    rows = session.execute(
        select(Worker.external_id, Response.id)
        .join(Response, Response.worker_id == Worker.id)
        .join(Item, Item.id == Response.item_id)
        .where(Item.kind != ItemKind.TRAINING)
    ).all()
    counts: dict[str, int] = {}
    for external_id, _ in rows:
        counts[external_id] = counts.get(external_id, 0) + 1
    return counts


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def replace_seed(args: argparse.Namespace, seed: int) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "seed": seed})


DETECTION = (
    "precision_spammer_or_careless", "excluded_spammer", "excluded_careless", "excluded_noisy",
    "excluded_careful",
)  # fmt: skip


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs of one type: means, with the worst run of each detection figure."""
    out = dict(runs[0])
    for key in DETECTION:
        values = [r[key] for r in runs if r[key] is not None]
        out[key] = statistics.mean(values) if values else None
        worst = min(values) if key.startswith(("precision", "excluded_s")) else max(values)
        out[f"{key}_worst"] = worst if values else None
    medians = [r["items_before_stop_median"] for r in runs if r["items_before_stop_median"]]
    out["items_before_stop_median"] = statistics.median(medians) if medians else None
    out["items_before_stop_max"] = max((r["items_before_stop_max"] or 0) for r in runs)
    for which in ("accuracy_all_workers", "accuracy_filtered"):
        methods = runs[0][which]
        out[which] = {
            m: statistics.mean(r[which][m] for r in runs if r[which].get(m) is not None)
            for m in methods
        }
    rules: dict[str, int] = {}
    for r in runs:
        for rule, n in r["excluded_by"].items():
            rules[rule] = rules.get(rule, 0) + n
    out["excluded_by"] = dict(sorted(rules.items()))
    for key in ("seconds", "responses", "errors"):
        out[key] = round(sum(r[key] for r in runs), 1)
    out["runs"] = len(runs)
    return out


def results_block(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join([".venv/bin/python", "benchmarks/qc_bench.py", *sys.argv[1:]])
    lines = [
        START,
        f"Measured {now} with `{command}`"
        f" on {os.cpu_count()} cores, Python {platform.python_version()}.",
        "",
        f"Per HIT type: {args.workers} simulated workers (60% careful, 20% noisy, 10% spammers, "
        f"10% careless), {args.real} real items x 5 workers, {args.gold} gold and "
        f"{args.attention} attention items, attention rate 0.1, default QC settings "
        "(adaptive gold rate 0.05-0.5, default rules); a live `crowd worker` runs the QC jobs. "
        f"Each figure is the mean over {args.runs} runs (seeds {args.seed} to "
        f"{args.seed + args.runs - 1}), the worst run in brackets; exclusions are summed.",
        "",
        "| HIT type | precision (spam+careless) | recall spammers | recall careless | "
        "excluded noisy | excluded careful | items before stop (median / max) | "
        "items, careful (median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        cells = [f"{_fmt(r[key])} ({_fmt(r[key + '_worst'])})" for key in DETECTION]
        lines.append(
            f"| {r['hit_type']} | " + " | ".join(cells) + " | "
            f"{_fmt(r['items_before_stop_median'])} / {_fmt(r['items_before_stop_max'])} | "
            f"{_fmt(r['items_careful_median'])} |"
        )
    lines += [
        "",
        "Accuracy of aggregated labels on real items against the truth "
        "(every worker's labels; filtered set in brackets):",
        "",
        "| HIT type | majority vote | Dawid-Skene | MACE | ordinal mean | first change | "
        "Bradley-Terry |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        cells = []
        for method in (
            "majority_vote", "dawid_skene", "mace", "ordinal_mean", "first_change",
            "bradley_terry",
        ):  # fmt: skip
            full = r["accuracy_all_workers"].get(method)
            kept = r["accuracy_filtered"].get(method)
            cells.append("-" if full is None else f"{full:.3f} ({_fmt(kept)})")
        lines.append(f"| {r['hit_type']} | " + " | ".join(cells) + " |")
    lines += ["", "Exclusions by rule:", ""]
    for r in results:
        rules = ", ".join(f"{k}: {v}" for k, v in r["excluded_by"].items()) or "none"
        lines.append(
            f"- {r['hit_type']}: {rules} ({r['responses']} responses, "
            f"{r['seconds']} s, {r['errors']} simulated workers stopped by errors)"
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
    parser.add_argument("--workers", type=int, default=50, help="simulated workers per type")
    parser.add_argument("--real", type=int, default=150, help="real items per study")
    parser.add_argument("--gold", type=int, default=40, help="gold items per study")
    parser.add_argument("--attention", type=int, default=10, help="attention items per study")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--runs", type=int, default=3, help="runs per type (seeds seed, seed+1, ...)"
    )
    parser.add_argument("--types", default="boundary,likert,comparison")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    args = parser.parse_args()
    load_builtin()
    base = Settings.from_env()
    results = []
    for plan in PLANS:
        if plan.hit_type not in args.types.split(","):
            continue
        runs = []
        for n in range(args.runs):
            print(f"{plan.hit_type}: run {n + 1} of {args.runs} ...", flush=True)
            runs.append(run_plan(plan, replace_seed(args, args.seed + n), base))
            print(runs[-1], flush=True)
        results.append(combine(runs))
    block = results_block(results, args)
    print(block)
    if not args.no_write:
        write_results(block)


if __name__ == "__main__":
    main()
