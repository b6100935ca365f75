"""The reviewer UI (/review), driven end to end in headless Chromium.

A small simulated crowd plays a boundary study over HTTP (two attention failers among
them), QC runs on what they did, and people log in to look at the workers and act on them:
a reviewer judges work, an experimenter may also block and pay bonuses. Every action must
show in the page, in the audit log and in the database; forged and token-less posts must not.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from crowd.accounts import authenticate, create_api_key, create_user
from crowd.demo import BackgroundServer, sample_records
from crowd.platforms.providers.sim import SimulatedCrowd
from crowd.platforms.publishing import open_study
from crowd.quality import standing as quality
from crowd.settings import Settings
from crowd.storage import (
    Assignment,
    AssignmentState,
    AuditEntry,
    Bonus,
    Database,
    Decision,
    Response,
    Study,
    StudyWorker,
    Worker,
    WorkerBlock,
    WorkerStatus,
)
from crowd.studies.lifecycle import create_study, get_study, import_items
from tests.conftest import SECRET
from tests.crowd.web.conftest import BROWSER_MARKS

pytestmark = BROWSER_MARKS

PASSWORD = "correct-horse-battery"
REVIEWER = "rita"
EXPERIMENTER = "erin"
OUTSIDER = "oscar"  # a reviewer for another experimenter
# Kind -> how many; the attention failers fail their checks, the others pass them.
MIX = {"careful": 2, "attention_failer": 2, "always_human": 1}
FAILERS = {"sim-attention_failer-00", "sim-attention_failer-01"}
COLUMNS = [
    "Worker", "Responses", "Gold accuracy", "Gold posterior", "Attention failed", "Too fast",
    "Constant", "Longest run", "Flags", "Status", "Rules firing",
]  # fmt: skip


@dataclass(frozen=True)
class Reviewed:
    """A played and QC-checked study, and the people who log in to review it."""

    base: str
    study_id: int
    workers: dict[str, int]  # external id -> worker id

    def url(self, path: str = "") -> str:
        return f"{self.base}/review/studies/{self.study_id}{path}"

    def worker_url(self, external_id: str) -> str:
        return self.url(f"/workers/{self.workers[external_id]}")


def play_and_check(db: Database, base_url: str, api_key: str) -> None:
    """Publish a small boundary study to the simulated crowd, let it play over HTTP, run QC
    on what it did (no RQ worker runs in tests) and create the logins the tests use."""
    records = sample_records()
    real = [r for r in records if r.get("kind", "real") == "real"][:16]
    items = real + [r for r in records if r.get("kind") == "attention"]
    config = {"annotations_per_item": 2, "attention_rate": 0.25}
    with db.session() as session:
        experimenter = authenticate(session, api_key)
        study = create_study(session, experimenter, "test study", "boundary", config)
        import_items(session, study, items)
        open_study(session, study, ("sim",))
        study_id = study.id
    crowd = SimulatedCrowd(
        base_url, api_key, study_id, "boundary", items, MIX, seed=3, items_per_worker=7
    )
    result = crowd.run(threads=len(crowd.workers))
    assert result.errors == []
    with db.session() as session:
        assert quality.refresh_study(session, get_study(session, study_id)) == sum(MIX.values())
        create_user(session, "tester", REVIEWER, "reviewer", PASSWORD)
        create_user(session, "tester", EXPERIMENTER, "experimenter", PASSWORD)
        create_user(session, "someone-else", OUTSIDER, "reviewer", PASSWORD)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory, redis_server: str) -> Iterator[Path | None]:
    """A SQLite database in which the crowd played once for the whole module; each test
    gets a copy of it. None on PostgreSQL, where each test lets the crowd play again."""
    if os.environ.get("CROWD_TEST_DATABASE_URL"):
        yield None
        return
    folder = tmp_path_factory.mktemp("reviewed")
    settings = Settings(
        data_dir=folder / "data",
        database_url=f"sqlite:///{folder / 'crowd.db'}",
        secret_key=SECRET,
        redis_url=redis_server,
        testing=True,
    )
    database = Database(settings.database_url)
    database.upgrade()
    with database.session() as session:
        key = create_api_key(session, "tester")
    with BackgroundServer(settings) as server:
        play_and_check(database, server.url, key)
    database.dispose()
    yield folder / "crowd.db"


@pytest.fixture
def database_url(database_url: str, played: Path | None) -> str:
    """The conftest's database, filled with a copy of the played one where there is one."""
    if played is not None:
        source = sqlite3.connect(played)
        target = sqlite3.connect(database_url.removeprefix("sqlite:///"))
        with target:
            source.backup(target)
        source.close()
        target.close()
    return database_url


@pytest.fixture
def reviewed(live_server: Any, api_key: str, db: Database, played: Path | None) -> Reviewed:
    if played is None:
        play_and_check(db, live_server.url, api_key)
    with db.session() as session:
        study_id = session.scalars(select(Study.id)).one()
        workers = {w.external_id: w.id for w in session.scalars(select(Worker))}
        excluded = {
            row.worker_id: row.excluded_by
            for row in session.scalars(select(StudyWorker).where(StudyWorker.study_id == study_id))
            if row.excluded_by
        }
    assert sorted(workers) == sorted(f"sim-{k}-{n:02d}" for k, c in MIX.items() for n in range(c))
    # The QC the tests rely on: the attention failers, and only they, are excluded by rule.
    assert excluded == {workers[f]: "rule:attention_failed" for f in FAILERS}
    return Reviewed(live_server.url, study_id, workers)


@pytest.fixture
def db_state(db: Database) -> Callable[[], dict[str, Any]]:
    """A snapshot of everything a reviewer action may change."""

    def snapshot() -> dict[str, Any]:
        with db.session() as session:
            standing = select(
                StudyWorker.worker_id, StudyWorker.decision, StudyWorker.excluded_by,
                StudyWorker.serving, StudyWorker.cleared_rules, StudyWorker.flags,
            )  # fmt: skip
            return {
                "assignments": rows(session, select(Assignment.id, Assignment.state)),
                "standing": rows(session, standing),
                "workers": rows(session, select(Worker.id, Worker.status)),
                "blocks": rows(session, select(WorkerBlock.worker_id, WorkerBlock.experimenter_id)),
                "audit": rows(session, select(AuditEntry.id, AuditEntry.actor, AuditEntry.action)),
                "bonuses": rows(session, select(Bonus.id)),
            }

    return snapshot


def rows(session: Any, query: Any) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in session.execute(query)]


# -- helpers -----------------------------------------------------------------------------------
def login(page: Any, base: str, name: str, password: str = PASSWORD) -> int:
    """Log in through the form; returns the HTTP status of the page it leads to."""
    page.goto(f"{base}/review/login")
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", password)
    with page.expect_navigation() as navigation:
        page.click("#login button[type=submit]")
    status: int = navigation.value.status
    return status


def cells(page: Any, rows: str) -> list[list[str]]:
    """The text of each cell of each row matched by the selector `rows`."""
    texts: list[list[str]] = page.eval_on_selector_all(
        rows, "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))"
    )
    return texts


def worker_rows(page: Any) -> list[dict[str, Any]]:
    """The workers table as shown: worker, its cells by column, status, rules."""
    rows = cells(page, "#workers tbody tr[data-worker-id]")
    return [dict(zip(COLUMNS, row, strict=True)) for row in rows]


def audit_rows(page: Any, columns: list[str]) -> list[dict[str, str]]:
    """The audit table's entries (the header row and "Nothing yet." left out)."""
    rows = cells(page, "#audit tr")[1:]
    return [dict(zip(columns, row, strict=True)) for row in rows if len(row) == len(columns)]


WORKER_AUDIT = ["when", "actor", "action", "reason"]
STUDY_AUDIT = ["when", "actor", "action", "worker", "reason", "details"]


def act(page: Any, action: str, reason: str = "", amount: str = "") -> str:
    """Submit the worker page's action form; returns the flash message shown after it."""
    page.select_option("#action", action)
    page.fill("#reason", reason)
    page.fill("#amount", amount)
    with page.expect_navigation():
        page.click("#act button[type=submit]")
    return str(page.inner_text("p.flash"))


def options(page: Any, selector: str) -> list[str]:
    """The values a select offers."""
    values: list[str] = page.eval_on_selector_all(selector, "os => os.map(o => o.value)")
    return values


def attention_failed(row: dict[str, str]) -> int:
    failed, _, _checks = row["Attention failed"].partition("/")
    return int(failed)


def assignment_states(db: Database, study_id: int, worker_id: int) -> set[str]:
    with db.session() as session:
        return set(
            session.scalars(
                select(Assignment.state).where(
                    Assignment.study_id == study_id, Assignment.worker_id == worker_id
                )
            ).all()
        )


def people_audit(db: Database, study_id: int) -> list[AuditEntry]:
    """Audit entries written by people (not rules or the system), oldest first."""
    with db.session() as session:
        entries = session.scalars(
            select(AuditEntry)
            .where(AuditEntry.study_id == study_id, ~AuditEntry.actor.startswith("rule:"))
            .where(AuditEntry.actor != quality.SYSTEM)
            .order_by(AuditEntry.id)
        ).all()
        session.expunge_all()
        return list(entries)


# -- 1. logging in -----------------------------------------------------------------------------
def test_login_is_needed_and_a_wrong_password_gets_nothing(page: Any, reviewed: Reviewed) -> None:
    for path in ("", "/audit", f"/workers/{reviewed.workers['sim-careful-00']}"):
        page.goto(reviewed.url(path))
        assert page.url == f"{reviewed.base}/review/login", path
    assert page.locator("#workers, #audit").count() == 0

    assert login(page, reviewed.base, REVIEWER, "not-the-password") == 401
    assert page.inner_text("p.error") == "wrong user name or password"
    assert page.locator("#who").count() == 0
    # An unknown name gets the very same answer: the form does not tell who has a login.
    assert login(page, reviewed.base, "nobody-at-all", PASSWORD) == 401
    assert page.inner_text("p.error") == "wrong user name or password"
    response = page.goto(reviewed.url())
    assert page.url == f"{reviewed.base}/review/login" and response.ok

    assert login(page, reviewed.base, REVIEWER) == 200
    assert page.url == f"{reviewed.base}/review/"
    assert page.inner_text("#who") == REVIEWER
    assert "(reviewer)" in page.inner_text(".who")
    studies = cells(page, "#studies tr")[1:]
    assert len(studies) == 1
    study_id, name, hit_type, _status, responses, workers, _links = studies[0]
    assert (study_id, name, hit_type) == (str(reviewed.study_id), "test study", "boundary")
    assert int(workers) == len(reviewed.workers) and int(responses) > 0
    with page.expect_navigation():
        page.click("#studies a:text('workers')")
    assert page.url == reviewed.url()
    assert len(worker_rows(page)) == len(reviewed.workers)

    # Logging out ends it: the pages send back to the login form again.
    with page.expect_navigation():
        page.click(".who form[action='/review/logout'] button")
    page.goto(reviewed.url())
    assert page.url == f"{reviewed.base}/review/login"


def test_a_reviewer_of_another_experimenter_sees_none_of_these_studies(
    page: Any, reviewed: Reviewed
) -> None:
    login(page, reviewed.base, OUTSIDER)
    assert page.inner_text("#studies").count("No studies yet.") == 1
    response = page.goto(reviewed.url())
    assert response.status == 404
    assert page.locator("#workers").count() == 0
    response = page.goto(reviewed.worker_url("sim-careful-00"))
    assert response.status == 404


# -- 2. the workers table ----------------------------------------------------------------------
def test_workers_table_shows_evidence_and_sorts_by_column(
    page: Any, reviewed: Reviewed, db: Database
) -> None:
    login(page, reviewed.base, REVIEWER)
    page.goto(reviewed.url())
    header = cells(page, "#workers thead tr")[0]
    assert [h.rstrip(" ▲▼") for h in header] == COLUMNS
    assert header[0] == "Worker ▲"  # sorted by worker unless told
    rows = worker_rows(page)
    with db.session() as session:
        responses = dict(
            session.execute(
                select(Worker.external_id, func.count(Response.id))
                .join(Response, Response.worker_id == Worker.id)
                .group_by(Worker.external_id)
            ).all()
        )
    # Every worker, once, by name; evidence filled in.
    assert [r["Worker"] for r in rows] == sorted(f"sim:{w}" for w in reviewed.workers)
    for row in rows:
        external_id = row["Worker"].removeprefix("sim:")
        assert int(row["Responses"]) == responses[external_id]
        assert re.fullmatch(r"\d+/\d+", row["Attention failed"]), row
        assert re.fullmatch(r"\d+%", row["Too fast"]) and re.fullmatch(r"\d+%", row["Constant"])
        assert row["Longest run"].isdigit()
        if external_id in FAILERS:
            assert attention_failed(row) >= 1
            assert row["Status"] == "excluded (rule:attention_failed)"
            assert "attention_failed" in row["Rules firing"].split(", ")
        else:
            assert attention_failed(row) == 0
            assert not row["Status"].startswith("excluded")
            assert "attention_failed" not in row["Rules firing"]
    # The always-human worker never varies: a long identical run, flagged for a person to see.
    human = next(r for r in rows if r["Worker"] == "sim:sim-always_human-00")
    assert "identical_run" in human["Flags"] and human["Status"] == "flagged"

    # A click on a header sorts by it (ascending), a second click the other way.
    with page.expect_navigation():
        page.click("#workers a.sort[data-key=attention_failed]")
    assert page.url.endswith("?sort=attention_failed")
    ascending = worker_rows(page)
    assert [attention_failed(r) for r in ascending] == sorted(attention_failed(r) for r in rows)
    assert {r["Worker"] for r in ascending[-2:]} == {f"sim:{f}" for f in FAILERS}
    assert "▲" in page.inner_text("#workers a.sort[data-key=attention_failed]")

    with page.expect_navigation():
        page.click("#workers a.sort[data-key=attention_failed]")
    assert page.url.endswith("?sort=-attention_failed")
    descending = worker_rows(page)
    failed = [attention_failed(r) for r in descending]
    assert failed == sorted(failed, reverse=True)
    assert {r["Worker"] for r in descending[:2]} == {f"sim:{f}" for f in FAILERS}
    assert "▼" in page.inner_text("#workers a.sort[data-key=attention_failed]")

    with page.expect_navigation():
        page.click("#workers a.sort[data-key=responses]")
    counts = [int(r["Responses"]) for r in worker_rows(page)]
    assert counts == sorted(counts)

    with page.expect_navigation():
        page.click("#workers a.sort[data-key=status]")
    assert [r["Status"] for r in worker_rows(page)] == sorted(r["Status"] for r in rows)

    # An unknown sort key is refused, not silently ignored.
    response = page.goto(reviewed.url("?sort=password_hash"))
    assert response.status == 422


# -- 3. one worker: soft-reject ----------------------------------------------------------------
def test_reviewer_soft_rejects_a_worker_with_a_reason(
    page: Any, reviewed: Reviewed, db: Database
) -> None:
    target = reviewed.workers["sim-always_human-00"]
    # Markup in a reason is shown as text, never run as HTML.
    reason = "guessed the passage length every time <b>without reading</b>"
    login(page, reviewed.base, REVIEWER)
    page.goto(reviewed.url())
    with page.expect_navigation():
        page.click("#workers a:text('sim:sim-always_human-00')")
    assert page.url == reviewed.worker_url("sim-always_human-00")
    assert page.inner_text("#status") == "flagged"
    assert page.inner_text("#rule-hits") == "identical_run"
    with db.session() as session:
        n_responses = session.scalar(
            select(func.count(Response.id)).where(Response.worker_id == target)
        )
    assert len(cells(page, "#answers tr")) - 1 == n_responses
    assert assignment_states(db, reviewed.study_id, target) == {AssignmentState.SUBMITTED}

    # A soft-reject needs a reason: without one nothing happens.
    message = act(page, "soft_reject")
    assert "say why" in message
    assert page.locator("p.flash.error").count() == 1
    assert page.inner_text("#status") == "flagged"
    assert people_audit(db, reviewed.study_id) == []

    message = act(page, "soft_reject", reason)
    assert page.locator("p.flash.ok").count() == 1
    with db.session() as session:
        n_assignments = session.scalar(
            select(func.count(Assignment.id)).where(Assignment.worker_id == target)
        )
    assert message == f"paid {n_assignments} assignment(s); data excluded"
    assert page.inner_text("#status") == "soft_rejected"
    trail = audit_rows(page, WORKER_AUDIT)
    assert {k: trail[0][k] for k in ("actor", "action", "reason")} == {
        "actor": f"reviewer:{REVIEWER}", "action": "soft_reject", "reason": reason,
    }  # fmt: skip
    # The flash is shown once: a reload does not repeat it.
    page.reload()
    assert page.locator("p.flash").count() == 0

    page.goto(reviewed.url("/audit"))
    mine = [r for r in audit_rows(page, STUDY_AUDIT) if r["actor"].startswith("reviewer:")]
    assert len(mine) == 1
    assert mine[0]["action"] == "soft_reject" and mine[0]["reason"] == reason
    assert mine[0]["worker"] == str(target)
    assert mine[0]["details"] == f'{{"assignments_paid": {n_assignments}}}'

    page.goto(reviewed.url())
    row = next(r for r in worker_rows(page) if r["Worker"] == "sim:sim-always_human-00")
    assert row["Status"] == f"soft_rejected (reviewer:{REVIEWER})"

    with db.session() as session:
        standing = session.scalar(
            select(StudyWorker).where(
                StudyWorker.study_id == reviewed.study_id, StudyWorker.worker_id == target
            )
        )
        assert standing is not None
        assert standing.excluded_by == f"reviewer:{REVIEWER}"
        assert standing.decision == Decision.SOFT_REJECTED
        assert standing.flags == []
    entries = people_audit(db, reviewed.study_id)
    assert [(e.actor, e.action, e.worker_id, e.reason) for e in entries] == [
        (f"reviewer:{REVIEWER}", "soft_reject", target, reason)
    ]
    assert entries[0].details == {"assignments_paid": n_assignments}
    # Soft-rejected work is paid: every submitted assignment is now approved.
    assert assignment_states(db, reviewed.study_id, target) == {AssignmentState.APPROVED}
    # And nobody else's work moved.
    for external_id, worker_id in reviewed.workers.items():
        if worker_id != target:
            assert assignment_states(db, reviewed.study_id, worker_id) == {
                AssignmentState.SUBMITTED
            }, external_id


# -- 4. who may do what ------------------------------------------------------------------------
def test_a_reviewer_may_not_block_or_pay_a_bonus_even_by_forging_the_form(
    page: Any, reviewed: Reviewed, db: Database, db_state: Callable[[], dict[str, Any]]
) -> None:
    login(page, reviewed.base, REVIEWER)
    page.goto(reviewed.worker_url("sim-careful-00"))
    offered = options(page, "#action option")
    assert offered == ["approve", "note", "reject", "soft_reject"]
    page.goto(reviewed.url())
    bulk_offered = options(page, "#bulk select[name=action] option")
    assert "block" not in bulk_offered and "bonus" not in bulk_offered

    before = db_state()
    page.goto(reviewed.worker_url("sim-careful-00"))
    # The page's own form, with its own CSRF token, but an action it does not offer.
    forged = page.evaluate(
        """async () => {
            const form = document.querySelector('#act');
            const data = new URLSearchParams(new FormData(form));
            data.set('action', 'block');
            data.set('reason', 'forged block');
            const response = await fetch(form.getAttribute('action'), {method: 'POST', body: data});
            return {status: response.status, url: response.url, text: await response.text()};
        }"""
    )
    assert forged["url"] == reviewed.worker_url("sim-careful-00")
    assert re.search(r'<p class="flash error"[^>]*>a reviewer may not block', forged["text"])

    token = page.input_value("#act input[name=csrf]")
    bonus = page.request.post(
        f"{reviewed.worker_url('sim-careful-00')}/act",
        form={"csrf": token, "action": "bonus", "amount": "5.00", "reason": "forged bonus"},
    )
    assert bonus.ok and "a reviewer may not bonus: ask the experimenter" in bonus.text()
    bulk = page.request.post(
        reviewed.url("/bulk"),
        form={"csrf": token, "rule": "attention_failed", "action": "block", "reason": "forged"},
    )
    assert bulk.ok and "a reviewer may not block" in bulk.text()

    assert db_state() == before
    with db.session() as session:
        assert session.scalar(select(func.count(Bonus.id))) == 0
        assert session.scalars(select(Worker.status)).all() == [WorkerStatus.ACTIVE] * len(
            reviewed.workers
        )
    assert people_audit(db, reviewed.study_id) == []
    page.goto(reviewed.url("/audit"))
    assert not [r for r in audit_rows(page, STUDY_AUDIT) if not r["actor"].startswith("rule:")]


def test_an_experimenter_blocks_unblocks_and_pays_a_bonus_once(
    page: Any, reviewed: Reviewed, db: Database
) -> None:
    target = reviewed.workers["sim-careful-01"]
    actor = f"experimenter:{EXPERIMENTER}"
    login(page, reviewed.base, EXPERIMENTER)
    assert "(experimenter)" in page.inner_text(".who")
    page.goto(reviewed.worker_url("sim-careful-01"))
    offered = options(page, "#action option")
    assert offered == [
        "approve", "block", "bonus", "note", "notify", "qualify", "reject", "soft_reject",
        "unblock",
    ]

    blocked = act(page, "block", "copied answers from a forum")
    assert blocked == "blocked from every study of this experimenter"
    assert page.inner_text("#status") == "blocked"
    with db.session() as session:
        block = session.scalars(select(WorkerBlock)).one()
        assert (block.worker_id, block.actor) == (target, actor)
    assert act(page, "block", "again") == "the worker was already blocked"

    assert act(page, "unblock", "it was a mix-up") == "unblocked"
    assert page.inner_text("#status") != "blocked"
    with db.session() as session:
        assert session.scalars(select(WorkerBlock)).all() == []
        worker = session.get(Worker, target)
        assert worker is not None and worker.status == WorkerStatus.ACTIVE

    assert act(page, "bonus", "thoughtful explanations", "0.50") == "paid a bonus of 0.50"
    assert act(page, "bonus", "thoughtful explanations", "0.50") == "bonus 0.50 was already paid"
    bonuses = page.locator("h2:text('Bonuses') + ul li")
    assert bonuses.count() == 1
    assert bonuses.first.inner_text().startswith("0.50 — thoughtful explanations")
    # A bad amount is refused with a message, and pays nothing.
    assert "at most 100.00" in act(page, "bonus", "too much", "1000")
    assert page.locator("p.flash.error").count() == 1

    with db.session() as session:
        paid = session.scalars(select(Bonus)).all()
        assert [(b.worker_id, b.amount, b.reason, b.actor) for b in paid] == [
            (target, "0.50", "thoughtful explanations", actor)
        ]
    entries = people_audit(db, reviewed.study_id)
    assert [(e.actor, e.action, e.worker_id) for e in entries] == [
        (actor, "block", target), (actor, "unblock", target), (actor, "bonus", target),
    ]  # fmt: skip
    assert entries[2].details["amount"] == "0.50"
    trail = audit_rows(page, WORKER_AUDIT)
    assert [(r["actor"], r["action"]) for r in trail[:3]] == [
        (actor, "bonus"), (actor, "unblock"), (actor, "block"),
    ]  # fmt: skip


# -- 5. bulk by rule ---------------------------------------------------------------------------
def test_experimenter_rejects_every_worker_a_rule_flags(
    page: Any, reviewed: Reviewed, db: Database
) -> None:
    actor = f"experimenter:{EXPERIMENTER}"
    reason = "failed an attention check"
    failers = {reviewed.workers[f] for f in FAILERS}
    login(page, reviewed.base, EXPERIMENTER)
    page.goto(reviewed.url())
    # The rules that fire on some worker, and only those, are offered.
    firing = {rule for row in worker_rows(page) for rule in row["Rules firing"].split(", ") if rule}
    assert options(page, "#bulk select[name=rule] option") == sorted(firing)
    assert {"attention_failed", "identical_run"} <= firing

    def bulk(rule: str, action: str, reason: str) -> str:
        page.select_option("#bulk select[name=rule]", rule)
        page.select_option("#bulk select[name=action]", action)
        page.fill("#bulk input[name=reason]", reason)
        with page.expect_navigation():
            page.click("#bulk button[type=submit]")
        assert page.url == reviewed.url()
        return str(page.inner_text("p.flash"))

    # A rejection must say why; without a reason no one is touched.
    assert "say why" in bulk("attention_failed", "reject", "")
    assert people_audit(db, reviewed.study_id) == []

    assert bulk("attention_failed", "reject", reason) == (
        "reject on 2 worker(s) flagged by attention_failed"
    )
    assert page.locator("p.flash.ok").count() == 1

    for row in worker_rows(page):
        if row["Worker"].removeprefix("sim:") in FAILERS:
            assert row["Status"] == f"rejected ({actor})"
        else:
            assert not row["Status"].startswith("rejected")

    with db.session() as session:
        standings = session.scalars(
            select(StudyWorker).where(StudyWorker.study_id == reviewed.study_id)
        ).all()
        for standing in standings:
            if standing.worker_id in failers:
                assert (standing.decision, standing.excluded_by) == (Decision.REJECTED, actor)
            else:
                assert standing.decision is None and standing.excluded_by is None
    for external_id, worker_id in reviewed.workers.items():
        expected = AssignmentState.REJECTED if worker_id in failers else AssignmentState.SUBMITTED
        assert assignment_states(db, reviewed.study_id, worker_id) == {expected}, external_id

    entries = people_audit(db, reviewed.study_id)
    assert (entries[0].actor, entries[0].action, entries[0].worker_id) == (
        actor, "bulk_reject", None
    )  # fmt: skip
    assert entries[0].details == {"rule": "attention_failed", "workers": 2}
    assert sorted((e.actor, e.action, e.worker_id, e.reason) for e in entries[1:]) == sorted(
        (actor, "reject", worker_id, reason) for worker_id in failers
    )

    page.goto(reviewed.url("/audit"))
    shown = [r for r in audit_rows(page, STUDY_AUDIT) if r["actor"] == actor]
    assert sorted((r["action"], r["worker"]) for r in shown) == sorted(
        [("bulk_reject", "")] + [("reject", str(w)) for w in failers]
    )


# -- 6. CSRF -----------------------------------------------------------------------------------
def test_posts_without_the_csrf_token_are_refused_and_change_nothing(
    page: Any, reviewed: Reviewed, db_state: Callable[[], dict[str, Any]]
) -> None:
    before = db_state()
    # Not even a login goes through without the token from the login form.
    response = page.request.post(
        f"{reviewed.base}/review/login", form={"name": EXPERIMENTER, "password": PASSWORD}
    )
    assert response.status == 400
    page.goto(reviewed.url())
    assert page.url == f"{reviewed.base}/review/login"

    login(page, reviewed.base, EXPERIMENTER)
    act_url = f"{reviewed.worker_url('sim-careful-00')}/act"
    posts = [
        (act_url, {"action": "block", "reason": "no token"}),
        (act_url, {"action": "block", "reason": "bad token", "csrf": "x" * 43}),
        (act_url, {"action": "block", "reason": "non-ASCII token", "csrf": "ü" * 43}),
        (act_url, {"action": "bonus", "amount": "1.00", "reason": "no token", "csrf": ""}),
        (reviewed.url("/bulk"), {"rule": "attention_failed", "action": "reject", "reason": "x"}),
    ]
    for url, form in posts:
        refused = page.request.post(url, form=form, max_redirects=0)
        assert refused.status == 400, (url, form)
        assert "the form expired" in refused.text()
    assert db_state() == before

    # The same post with the page's token goes through: it was the token that was missing.
    page.goto(reviewed.worker_url("sim-careful-00"))
    token = page.input_value("#act input[name=csrf]")
    done = page.request.post(act_url, form={**posts[0][1], "csrf": token}, max_redirects=0)
    assert done.status == 302
    assert db_state() != before
