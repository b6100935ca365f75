"""QC on imported answers: their raters get evidence and rules like live workers (unless a
rule is live-only), their exclusions shape the filtered set, and the reports count and name
every rater group."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.engine import Engine

from crowd.demo import TASKS, load_samples
from crowd.exceptions import InvalidItem
from crowd.quality import stats
from crowd.queue import EVENTS, REPORTS
from crowd.queue.jobs import configure, process_event
from crowd.queue.runner import run_worker
from crowd.review import worker_history
from crowd.settings import Settings
from crowd.storage import AuditEntry, Database, OutboxEvent, Report, StudyWorker, Worker
from crowd.studies.annotations import import_file
from crowd.studies.lifecycle import get_study
from crowd.studies.reports import compute_report, export
from qc.rules import DEFAULT_RULES
from tasks.boundary.roft import write_roft_csv
from tests.conftest import join, passage

PASTED = "The machine text starts here, the style is clearly different from before."
COPIED = {
    "name": "copied_reasons", "metric": "repeated_explanations", "op": ">=", "threshold": 3,
    "action": "soft_block", "description": "The same reason pasted on many passages.",
}  # fmt: skip
GUESSES = {"paster": [2, 3, 4, 5, 1, 3, 2, 4], "careful": [3, 2, 5, 4, 2, 1, 3, 5],
           "second": [4, 4, 2, 3, 5, 2, 1, 3]}  # fmt: skip


def roft_release() -> str:
    """A RoFT CSV: 8 passages of 5 sentences, 3 annotators; "paster" gives one reason on 7."""
    rows = []
    for annotator, guesses in GUESSES.items():
        for index, guess in enumerate(guesses):
            if annotator == "paster":
                reason = PASTED if index < 7 else "Only this last one says something else."
            else:
                reason = f"{annotator} on passage {index}: sentence {guess} breaks the story."
            rows.append({
                "response_id": len(rows) + 1, "worker": annotator, "guess": guess,
                "boundary": 1 + index % 5, "created_at": f"2021-03-0{1 + index % 8}",
                "sentences": [f"Passage {index} says thing {k}." for k in range(5)],
                "generator": "gpt2", "category": "news", "decoding_value": 0.4, "points": None,
                "reasons": [], "explanation": reason, "prompt_index": index,
            })  # fmt: skip
    buffer = io.StringIO(newline="")
    write_roft_csv(rows, buffer)
    return buffer.getvalue()


def import_text(db: Database, study_id: int, text: str, fmt: str, group: str) -> None:
    with db.session() as session:
        import_file(session, get_study(session, study_id), text, fmt, rater_group=group)


def run_jobs(settings: Settings, db: Database) -> None:
    """What `crowd worker` does with the outbox: each event's handlers, QC refresh included,
    until no event is left (a large import's refresh goes on in events of its own)."""
    configure(settings)
    while True:
        with db.session() as session:
            pending = session.scalar(
                select(OutboxEvent.id)
                .where(OutboxEvent.processed_at.is_(None))
                .order_by(OutboxEvent.id)
            )
        if pending is None:
            return
        process_event(pending)


def standing(db: Database, study_id: int, provider: str, name: str) -> StudyWorker:
    with db.session() as session:
        row = session.scalar(
            select(StudyWorker)
            .join(Worker, Worker.id == StudyWorker.worker_id)
            .where(
                StudyWorker.study_id == study_id,
                Worker.provider == provider,
                Worker.external_id == name,
            )
        )
        assert row is not None, f"{provider}:{name} has no QC standing"
        session.expunge(row)
        return row


def report(settings: Settings, db: Database, study_id: int, refresh: bool) -> dict[str, Any]:
    with db.session() as session:
        computed = compute_report(session, settings, study_id, refresh=refresh)
    return {**computed.data, "html": computed.html}


def test_a_roft_annotator_who_pastes_one_reason_is_flagged_and_left_out(
    settings: Settings, db: Database, make_study: Callable[..., int]
) -> None:
    rules = [rule.to_json() for rule in DEFAULT_RULES] + [COPIED]
    config = {"annotations_per_item": 2, "attention_rate": 0.0, "qc": {"rules": rules}}
    study_id = make_study([passage("seed", 2)], config)
    import_text(db, study_id, roft_release(), "roft", "roft")
    run_jobs(settings, db)  # the import's event refreshes every imported rater's standing

    paster = standing(db, study_id, "import", "paster")
    assert paster.evidence["repeated_explanations"] == 7
    assert (paster.evidence["source"], paster.evidence["rater_groups"]) == ("imported", ["roft"])
    assert paster.evidence["too_fast_n"] == 0  # RoFT has no timing: no speed evidence
    assert paster.rule_hits == ["repeated_explanations", "copied_reasons"]
    assert paster.flags == ["repeated_explanations"]  # the default rule flags
    assert paster.excluded_by == "rule:copied_reasons"  # the study's own rule leaves out
    for name in ("careful", "second"):
        row = standing(db, study_id, "import", name)
        assert row.rule_hits == [] and row.excluded_by is None, name
    with db.session() as session:
        actions = session.scalars(
            select(AuditEntry.action)
            .where(AuditEntry.study_id == study_id, AuditEntry.worker_id == paster.worker_id)
            .order_by(AuditEntry.id)
        ).all()
        assert list(actions) == ["flag", "soft_block"]
        # A reviewer can open an imported rater's answers (they have no assignments).
        history = worker_history(session, get_study(session, study_id), paster.worker_id)
        assert len(history["answers"]) == 8 and history["rule_hits"] == paster.rule_hits

    # The report job reads the standing the event left (no refresh of its own).
    data = report(settings, db, study_id, refresh=False)
    assert data["full"]["n_workers"] == 3 and data["filtered"]["n_workers"] == 2
    assert data["excluded"]["by_rater_group"]["roft"] == {"n_workers": 1, "n_responses": 8}
    assert data["rules"]["copied_reasons"] == {
        "workers": 1, "responses": 8, "by_rater_group": {"roft": {"workers": 1, "responses": 8}},
    }  # fmt: skip
    assert data["qc"]["by_rater_group"]["roft"] == {
        "sources": ["imported"],
        "workers": {"active": 2, "excluded": 1},
        "rules_firing": {"copied_reasons": 1, "repeated_explanations": 1},
    }
    assert '<table id="qc-groups">' in data["html"]
    assert "<td>roft</td><td>imported</td><td>2</td><td>0</td><td>0</td><td>1</td>" in data["html"]
    with db.session() as session:
        buffer = io.StringIO()
        export(session, get_study(session, study_id), "jsonl", buffer, True, refresh=False)
    kept = {json.loads(line)["worker"] for line in buffer.getvalue().splitlines()}
    assert kept == {"import:careful", "import:second"}


def test_a_large_import_refreshes_its_raters_a_bounded_batch_per_job_then_the_report(
    settings: Settings,
    db: Database,
    make_study: Callable[..., int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One rater a job: the import's three raters take three events, each its own transaction.
    monkeypatch.setattr(stats, "RATERS_PER_JOB", 1)
    rules = [rule.to_json() for rule in DEFAULT_RULES] + [COPIED]
    config = {"annotations_per_item": 2, "attention_rate": 0.0, "qc": {"rules": rules}}
    study_id = make_study([passage("seed", 2)], config)
    import_text(db, study_id, roft_release(), "roft", "roft")
    configure(settings)
    with db.session() as session:
        first = session.scalar(select(OutboxEvent.id))
        raters = session.scalars(select(Worker.id).order_by(Worker.external_id)).all()
    assert first is not None and len(raters) == 3  # careful, paster, second
    process_event(first)
    with db.session() as session:
        events = session.scalars(select(OutboxEvent).order_by(OutboxEvent.id)).all()
        assert [(e.payload["worker_ids"], e.payload.get("continues"), e.processed_at is None)
                for e in events] == [(raters, None, False), (raters[1:], first, True)]  # fmt: skip
        refreshed = session.scalars(select(StudyWorker.worker_id)).all()
        assert refreshed == raters[:1]

    # A real worker runs the rest; the report it writes comes after the last rater's refresh.
    run_worker(settings, burst=True, queues=(EVENTS, REPORTS))
    paster = standing(db, study_id, "import", "paster")
    assert paster.excluded_by == "rule:copied_reasons"
    with db.session() as session:
        events = session.scalars(select(OutboxEvent).order_by(OutboxEvent.id)).all()
        assert [e.payload["worker_ids"] for e in events] == [raters, raters[1:], raters[2:]]
        assert all(e.processed_at is not None for e in events)
        assert len(session.scalars(select(StudyWorker)).all()) == 3
        stored = session.scalar(select(Report).where(Report.study_id == study_id))
        assert stored is not None and stored.responses_seen == 24
        assert stored.updated_at >= max(e.handled_at for e in events if e.handled_at)
        assert stored.data["excluded"]["by_rater_group"]["roft"] == {
            "n_workers": 1, "n_responses": 8,
        }  # fmt: skip


def test_an_import_event_reads_and_writes_its_raters_in_the_same_few_statements(
    settings: Settings, db: Database, make_study: Callable[..., int]
) -> None:
    def statements(raters: int) -> int:
        study_id = make_study([passage(f"p{i}", 2) for i in range(4)])
        lines = [
            {"worker": f"{raters}-{rater}", "item": f"p{i}", "answer": {"guess": 1 + i}}
            for rater in range(raters) for i in range(4)
        ]  # fmt: skip
        import_text(db, study_id, "\n".join(json.dumps(line) for line in lines), "jsonl", "x")
        count = 0

        def one(*_args: Any) -> None:
            nonlocal count
            count += 1

        sqlalchemy.event.listen(Engine, "before_cursor_execute", one)
        try:
            run_jobs(settings, db)
        finally:
            sqlalchemy.event.remove(Engine, "before_cursor_execute", one)
        return count

    # Not a few statements per rater: a RoFT release has thousands of raters.
    assert statements(2) == statements(20)


def play_with_reason(client: FlaskClient, who: dict[str, str], study_id: int, text: str) -> None:
    """Answer one boundary item (machine from sentence 2) and give `text` as the reason."""
    view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
    path = f"/api/work/assignments/{view['assignment_id']}"
    while not view.get("answered"):
        step = view["task"]["step"]
        body = {"step": step, "choice": "machine" if step == 2 else "human"}
        view = client.post(f"{path}/step", json=body, headers=who).get_json()
    assert view.get("needs_followup"), view
    reply = client.post(f"{path}/explanation", json={"explanation": text}, headers=who)
    assert reply.status_code == 200, reply.get_json()


def test_a_live_only_rule_judges_live_workers_and_spares_imported_raters(
    settings: Settings,
    db: Database,
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
) -> None:
    flag = next(rule for rule in DEFAULT_RULES if rule.name == "repeated_explanations")
    rules = [flag.to_json(), {**COPIED, "live_only": True}]
    config = {"annotations_per_item": 2, "attention_rate": 0.0, "qc": {"rules": rules}}
    study_id = make_study([passage(f"p{i}", 3) for i in range(4)], config)
    import_text(db, study_id, roft_release(), "roft", "roft")
    live = join(client, auth, external_id="live-paster")
    for _ in range(3):
        play_with_reason(client, live, study_id, PASTED)
    run_jobs(settings, db)

    worker = standing(db, study_id, "sim", "live-paster")
    assert worker.evidence["source"] == "live" and worker.evidence["repeated_explanations"] == 3
    assert worker.excluded_by == "rule:copied_reasons"
    paster = standing(db, study_id, "import", "paster")
    # Seven copies, but the rule is live-only: only the rule for every group fires.
    assert paster.evidence["repeated_explanations"] == 7
    assert paster.rule_hits == ["repeated_explanations"] and paster.excluded_by is None
    data = report(settings, db, study_id, refresh=True)
    assert data["excluded"]["by_rater_group"] == {
        "crowd": {"n_workers": 1, "n_responses": 3},
        "roft": {"n_workers": 0, "n_responses": 0},
    }
    assert data["qc"]["by_rater_group"]["crowd"]["sources"] == ["live"]


def test_an_imported_mturk_batch_counts_in_the_comparison_figures_per_group(
    settings: Settings, db: Database, make_study: Callable[..., int]
) -> None:
    records = load_samples("comparison")
    # The made-up MTurk batch below is two identical raters, whom the collusion rule would
    # rightly leave out; this test counts rater groups, so it runs without rules.
    config = {"template": "sentiment", "qc": {"rules": []}}
    study_id = make_study(records, config, hit_type="comparison")
    experts = (TASKS / "comparison" / "samples" / "expert_labels.csv").read_text()
    import_text(db, study_id, experts, "csv", "expert")
    # Two MTurk workers who both pick the first "tuned" candidate of 20 items: 40 labels.
    real = [r for r in records if r.get("kind", "real") == "real"][:20]
    tuned = {r["id"]: [c["policy"] for c in r["candidates"]].index("tuned") for r in real}
    batch = "worker,item,best\n" + "".join(
        f"{worker},{item},{best}\n" for worker in ("m1", "m2") for item, best in tuned.items()
    )
    import_text(db, study_id, batch, "csv", "mturk")
    run_jobs(settings, db)

    data = report(settings, db, study_id, refresh=False)
    full = data["full"]
    assert full["labels_by_group"]["mturk"] == 40
    assert full["rater_groups"] == ["expert", "mturk"]
    pairs = {(e["group_a"], e["group_b"]): e for e in full["agreement_by_group"]}
    within = pairs[("mturk", "mturk")]
    assert (within["n_agree"], within["n_pairs"], within["rate"]) == (20, 20, 1.0)
    expert_rows = list(csv.DictReader(io.StringIO(experts)))
    shared = [row for row in expert_rows if row["item"] in tuned]
    expert_mturk = pairs[("expert", "mturk")]
    assert expert_mturk["n_pairs"] == 2 * len(shared)
    assert expert_mturk["n_agree"] == 2 * sum(int(r["best"]) == tuned[r["item"]] for r in shared)
    overall = next(e for e in full["win_rates_by_group"]["mturk"] if e["k"] == "all")
    assert (overall["policy_b"], overall["wins_b"], overall["ties"]) == ("tuned", 20, 0)
    assert overall["rater_groups"] == ["mturk"]
    assert full["win_rates"] == []  # the crowd's majority: no live crowd answered yet
    assert data["aggregation_rater_groups"] == ["expert", "mturk"]
    assert data["qc"]["by_rater_group"]["mturk"]["workers"] == {"active": 2}
    html = data["html"]
    assert "<td>mturk</td><td>100.0%</td>" in html  # agreement within the MTurk batch
    assert "<td>expert - mturk</td>" in html
    assert html.count("<td>mturk</td><td>base vs tuned</td>") == 2 * 2  # K=4 and all; 2 sets
    assert "Rater groups: expert, mturk." in html
    assert "Answers of the rater groups: expert, mturk." in html


def test_an_import_that_gives_times_is_judged_on_speed(
    settings: Settings, db: Database, make_study: Callable[..., int]
) -> None:
    study_id = make_study([passage(f"p{i}", 2) for i in range(6)])
    lines = [
        {"worker": "rusher", "item": f"p{i}", "answer": {"guess": 1 + i % 5}, "seconds": 0.5}
        for i in range(6)
    ] + [
        {"worker": "reader", "item": f"p{i}", "answer": {"guess": 2}, "seconds": "45"}
        for i in range(6)
    ]
    import_text(db, study_id, "\n".join(json.dumps(line) for line in lines), "jsonl", "mturk")
    run_jobs(settings, db)
    rusher = standing(db, study_id, "import", "rusher")
    assert (rusher.evidence["too_fast_n"], rusher.evidence["responses"]) == (6, 6)
    assert rusher.excluded_by == "rule:too_fast"  # the default rule, for every rater group
    reader = standing(db, study_id, "import", "reader")
    assert reader.evidence["too_fast_n"] == 0 and reader.excluded_by is None
    with pytest.raises(InvalidItem, match="line 1: 'seconds' must be a number of seconds"):
        import_text(db, study_id, '{"worker": "x", "item": "p0", "answer": {"guess": 2}, '
                    '"seconds": -1}', "jsonl", "mturk")  # fmt: skip
    with pytest.raises(InvalidItem, match="line 2: 'seconds' must be a number"):
        import_text(db, study_id, "worker,item,guess,seconds\nx,p0,2,soon\n", "csv", "mturk")
