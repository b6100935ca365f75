"""`crowd demo`: three studies on simulated crowds, end to end, leaving nothing running.

Boundary (RoFT), Likert rating and best-of-4 comparison studies are created from the sample
items shipped in tasks/*/samples, with attention checks, and published to simulated crowds
in which some workers do not read (they fail attention checks), some are noisy, biased or
spam. The Likert study also gets ratings by (simulated) experts and the comparison study
labels by (simulated) experts, imported the way a spreadsheet from elsewhere would be. The
real web app serves on a local port while the simulated workers play through HTTP; then the
queue's jobs run to completion and write each study's report.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server

from crowd.accounts import authenticate, create_api_key
from crowd.app import create_app
from crowd.platforms.providers.sim import SimulatedCrowd
from crowd.platforms.publishing import open_study
from crowd.plugins import live_modules
from crowd.queue.runner import ensure_redis, run_worker
from crowd.settings import Settings
from crowd.storage import Database, Report
from crowd.studies.annotations import import_file
from crowd.studies.lifecycle import create_study, get_study, import_items, parse_jsonl

TASKS = Path(__file__).resolve().parents[1] / "tasks"


def load_samples(hit_type: str) -> list[dict[str, Any]]:
    """Every sample item a HIT type ships (tasks/<type>/samples/*.jsonl)."""
    records = []
    for path in sorted((TASKS / hit_type / "samples").glob("*.jsonl")):
        with open(path, encoding="utf-8") as handle:
            records.extend(parse_jsonl(handle, source=f"{path.name} line"))
    return records


def sample_records() -> list[dict[str, Any]]:
    return load_samples("boundary")


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


Summary = Callable[[dict[str, Any]], list[str]]


@dataclass(frozen=True)
class DemoStudy:
    hit_type: str
    name: str
    config: dict[str, Any]
    mix: dict[str, int]
    summary: Summary
    items_per_worker: int = 10
    # Annotations gathered "elsewhere": (file in the type's samples/, rater group).
    imports: tuple[tuple[str, str], ...] = ()
    # Every n-th real item becomes a gold item (its truth is known), 0 for none.
    gold_every: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)


def _pct(value: Any) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _num(value: Any, fmt: str = ".2f") -> str:
    return "n/a" if value is None else format(value, fmt)


def _attention_line(data: dict[str, Any]) -> str:
    attention = data["attention"]
    return (
        f"attention checks: {attention['workers_failed']} of {attention['workers_checked']} "
        f"workers failed ({_pct(attention['worker_failure_rate'])})"
    )


def qc_lines(data: dict[str, Any]) -> list[str]:
    """What QC did: workers left out by each rule, and the aggregated labels by method."""
    rules = data.get("rules") or {}
    removed = ", ".join(
        f"{name} {entry['workers']} workers / {entry['responses']} responses"
        for name, entry in sorted(rules.items())
    )
    lines = [f"QC left out: {removed or 'nobody'} (the filtered set)"]
    flagged = (data.get("qc") or {}).get("workers", {}).get("flagged")
    if flagged:
        lines[-1] += f"; {flagged} more flagged for review"
    aggregation = data.get("aggregation") or {}
    cells = [
        f"{method} {_pct(entry.get('gold_accuracy'))}"
        for method, entry in aggregation.items()
        if "error" not in entry and entry.get("gold_accuracy") is not None
    ]
    if cells:
        lines.append(f"aggregated labels, accuracy on gold items: {', '.join(cells)}")
    return lines


def boundary_summary(data: dict[str, Any]) -> list[str]:
    lines = [_attention_line(data), *qc_lines(data)]
    for label in ("full", "filtered"):
        part = data[label]
        lines.append(
            f"{label:>9}: {part['n_annotations']} annotations by {part['n_workers']} workers, "
            f"exact {part['exact_accuracy']:.1%}, mean distance {part['mean_distance']:+.2f}, "
            f"mean points {part['mean_points']:.2f}"
        )
    return lines


def likert_summary(data: dict[str, Any]) -> list[str]:
    lines = [_attention_line(data), *qc_lines(data)]
    for label in ("full", "filtered"):
        part = data[label]
        counts = part["counts"]
        lines.append(
            f"{label:>9}: {counts['n_ratings']} ratings by {counts['n_raters']} raters "
            f"({', '.join(part['rater_groups'])})"
        )
    filtered = data["filtered"]
    for row in filtered["table"]:
        if row["item_group"] is None:
            continue
        cells = ", ".join(
            f"{name} {_num(cell['mean'])} (alpha {_num(cell['alpha_interval'])})"
            for name, cell in row["cells"].items()
        )
        lines.append(f"  {row['rater_group']:>6} / {row['item_group']:<5} {cells}")
    taus = [
        f"{t['attribute']} {_num(t['tau'])}"
        for t in filtered["tau_between_groups"]
        if t["tau"] is not None
    ]
    if taus:
        lines.append(f"  Kendall's tau, crowd vs expert item means: {', '.join(taus)}")
    return lines


def comparison_summary(data: dict[str, Any]) -> list[str]:
    lines = [_attention_line(data), *qc_lines(data)]
    for label in ("full", "filtered"):
        part = data[label]
        table = part["agreement"]
        cells = [f"chance {_pct(table['chance']['rate'])}"]
        for key in ("worker_worker", "expert_worker", "expert_expert"):
            entry = table[key]
            cells.append(
                f"{key.replace('_', '-')} {_pct(entry['rate'])} "
                f"[{_pct(entry['ci_low'])}, {_pct(entry['ci_high'])}]"
            )
        lines.append(f"{label:>9}: {part['n_labels']} labels; agreement " + ", ".join(cells))
    for win in data["filtered"]["win_rates"]:
        if win["k"] != "all":
            continue
        lines.append(
            f"  {win['policy_a']} beats {win['policy_b']} on {_pct(win['win_rate_a'])} of "
            f"{win['wins_a'] + win['wins_b']} decided items (95% CI {_pct(win['ci_low'])} to "
            f"{_pct(win['ci_high'])}; {win['ties']} ties), by the majority of the crowd"
        )
    return lines


def form_summary(data: dict[str, Any]) -> list[str]:
    lines = [_attention_line(data), *qc_lines(data)]
    for label in ("full", "filtered"):
        counts = data[label]["counts"]
        lines.append(
            f"{label:>9}: {counts['n_responses']} forms by {counts['n_workers']} workers "
            f"on {counts['n_items']} items"
        )
    for entry in data["filtered"]["fields"]:
        agreement, shown = entry["agreement"], entry["distribution"]
        if entry["type"] == "rating":
            what = f"mean {_num(shown.get('mean'))}"
        elif entry["type"] == "category":
            top = max(shown["choices"], key=lambda choice: choice["count"], default=None)
            what = f"most chosen {top['value']!r} ({_pct(top['rate'])})" if top else "no answer"
        elif entry["type"] == "rank":
            top = min((c for c in shown["choices"] if c["mean_rank"] is not None),
                      key=lambda choice: choice["mean_rank"], default=None)  # fmt: skip
            what = f"ranked first on average: {top['value']!r}" if top else "no answer"
        else:
            what = f"{entry['n_answers']} texts, median {_num(shown.get('median'), '.0f')} chars"
        alpha = (
            f", alpha ({agreement['level']}) {_num(agreement['alpha'])}"
            if agreement.get("level")
            else ""
        )
        lines.append(f"  {entry['id']} ({entry['type']}): {what}{alpha}")
    return lines


def reward_lines(settings: Settings, study_id: int) -> list[str]:
    """What the reward-model runs the labels triggered did."""
    from crowd.ml.reward import runs_of

    db = Database(settings.database_url)
    try:
        with db.read_session() as session:
            runs = runs_of(session, study_id)
            lines = []
            for run in reversed(runs):
                held = run.metrics.get("held_out") or {}
                if run.status != "finished":
                    lines.append(f"reward model run {run.id}: {run.status} {run.error or ''}")
                    continue
                lines.append(
                    f"reward model run {run.id} ({run.trigger}, after {run.labels_at_request} "
                    f"labels): trained on {run.data.get('train_labels')} filtered labels "
                    f"({run.data.get('labels_left_out')} left out by QC) in "
                    f"{run.metrics.get('seconds')} s; held-out top-1 {_pct(held.get('accuracy'))}"
                    f" on {held.get('n')} labels (chance {_pct(held.get('chance'))})"
                )
                lines.append(f"  saved in {run.path}")
            return lines or ["no reward model run yet (retrain_every not reached)"]
    finally:
        db.dispose()


def plan(workers: int) -> list[DemoStudy]:
    return [
        DemoStudy(
            "boundary",
            "RoFT demo: where does the machine take over?",
            {"annotations_per_item": 8, "attention_rate": 0.1},
            worker_mix(workers),
            boundary_summary,
            gold_every=5,
        ),
        DemoStudy(
            "likert",
            "Story ratings: human vs GPT-2 stories",
            {"template": "story", "annotations_per_item": 5, "attention_rate": 0.2},
            {"careful": 12, "noisy": 4, "biased": 3, "spammer": 3, "straightliner": 2},
            likert_summary,
            items_per_worker=12,
            imports=(("expert_ratings.csv", "expert"),),
        ),
        DemoStudy(
            "comparison",
            "Best of 4: the most positive continuation",
            # A reward model (the bundled MiniLM) retrains after every 100 new labels.
            {"template": "sentiment", "annotations_per_item": 3, "attention_rate": 0.1,
             "reward_model": {"retrain_every": 100}},
            {"skilled": 16, "noisy": 6, "spammer": 4, "position_biased": 4},
            comparison_summary,
            items_per_worker=12,
            imports=(("expert_labels.csv", "expert"),),
        ),
        DemoStudy(
            "form",
            "Summary check: four questions per summary",
            json.loads((TASKS / "form" / "samples" / "study.json").read_text(encoding="utf-8")),
            {"careful": 14, "noisy": 4, "random_clicker": 3, "attention_failer": 3},
            form_summary,
            items_per_worker=12,
        ),
    ]


def with_gold(records: list[dict[str, Any]], every: int) -> list[dict[str, Any]]:
    """Mark every `every`-th real record as gold (records whose truth the sample carries)."""
    if not every:
        return records
    real = [r for r in records if r.get("kind", "real") == "real"]
    gold_ids = {r["id"] for r in real[::every]}
    return [{**r, "kind": "gold"} if r["id"] in gold_ids else r for r in records]


def run_demo(
    workers: int = 40, seed: int = 7, echo: Callable[[str], Any] = print
) -> dict[str, dict[str, Any]]:
    """Run every demo study; returns each study's report data by HIT type."""
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
    studies = [
        replace(study, records=with_gold(load_samples(study.hit_type), study.gold_every))
        for study in plan(workers)
    ]
    ids: dict[str, int] = {}
    with db.session() as session:
        api_key = create_api_key(session, "demo")
        experimenter = authenticate(session, api_key)
        for study in studies:
            created = create_study(session, experimenter, study.name, study.hit_type, study.config)
            import_items(session, created, study.records)
            open_study(session, created, ["local", "sim"])
            ids[study.hit_type] = created.id
            kinds = [r.get("kind", "real") for r in study.records]
            echo(
                f"study {created.id} ({study.hit_type}): {len(kinds)} items "
                f"({kinds.count('attention')} attention checks, {kinds.count('training')} "
                f"training), {study.config['annotations_per_item']} workers per item"
            )
        for study in studies:
            for name, group in study.imports:
                path = TASKS / study.hit_type / "samples" / name
                summary = import_file(
                    session,
                    get_study(session, ids[study.hit_type]),
                    path.read_text(encoding="utf-8"),
                    "csv",
                    rater_group=group,
                    source=f"{name} line",
                )
                echo(
                    f"study {ids[study.hit_type]}: imported {summary.added} {group} answers "
                    f"by {len(summary.workers)} raters from {name}"
                )

    live_demos = [(name, live.demo) for name, live in live_modules() if hasattr(live, "demo")]
    settings, embedded = ensure_redis(settings)
    try:
        with BackgroundServer(settings) as server:
            for offset, study in enumerate(studies):
                echo(f"{study.hit_type}: simulated crowd at {server.url}: {study.mix}")
                crowd = SimulatedCrowd(
                    server.url,
                    api_key,
                    ids[study.hit_type],
                    study.hit_type,
                    study.records,
                    study.mix,
                    seed=seed + offset,
                    items_per_worker=study.items_per_worker,
                    prefix=f"sim-{study.hit_type}",
                )
                result = crowd.run(threads=4)
                if result.errors:
                    echo(f"  {len(result.errors)} workers stopped early: {result.errors[:3]}")
                echo(f"  {sum(result.items_done.values())} assignments done")
            # HIT types played live bring their own demo (a live package's `demo`).
            live_ids = {
                name: demo.start(settings, db, api_key, server.url, seed, echo,
                                 load_samples(name))
                for name, demo in live_demos
            }  # fmt: skip
        echo("running the queue ...")
        jobs = run_worker(settings, burst=True)
        echo(f"the queue ran {jobs} jobs")
    finally:
        if embedded is not None:
            embedded.stop()
    reports: dict[str, dict[str, Any]] = {}
    with db.session() as session:
        for study in studies:
            study_id = ids[study.hit_type]
            report = session.query(Report).filter_by(study_id=study_id).one()
            reports[study.hit_type] = report.data
    db.dispose()
    for study in studies:
        study_id = ids[study.hit_type]
        out = settings.reports_dir / f"study-{study_id}"
        echo(f"\n== study {study_id}: {study.name} ({study.hit_type})")
        for line in study.summary(reports[study.hit_type]):
            echo(line)
        echo(f"report: {out / 'report.html'}\n        {out / 'report.json'}")
        if study.hit_type == "comparison":
            for line in reward_lines(settings, study_id):
                echo(line)
    for name, demo in live_demos:
        for line in demo.lines(settings, live_ids[name]):
            echo(line)
    echo(
        f"\nplay yourself: CROWD_DATA_DIR={data_dir} crowd serve, then open "
        "http://127.0.0.1:5000/play"
    )
    return reports
