"""Shared pieces of the reviewer UI tests (test_review_browser.py and
test_review_actions_browser.py).

A small simulated crowd plays a boundary study over HTTP (two attention failers among them),
QC runs on what they did, and the logins the tests use are created. Fixtures, which the test
modules import under their *_fixture names: `played` (the crowd plays once per test module on
SQLite), `database_url` (a copy of that database for each test), `reviewed` and `db_state`.
The rest are helpers that read and drive the pages; screenshots go to $CROWD_SHOTS (default
/tmp/shots/review).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from crowd.accounts import authenticate, create_api_key, create_user
from crowd.demo import BackgroundServer, sample_records
from crowd.platforms.providers.sim import SimulatedCrowd
from crowd.platforms.publishing import open_study
from crowd.quality import standing as quality
from crowd.settings import Settings
from crowd.storage import (
    Assignment,
    AuditEntry,
    Bonus,
    Database,
    Study,
    StudyWorker,
    Worker,
    WorkerBlock,
)
from crowd.studies.lifecycle import create_study, get_study, import_items
from tests.conftest import SECRET
from tests.crowd.quality.test_standing import ROFT_RULES
from tests.crowd.web.conftest import TIMEOUT_MS

PASSWORD = "correct-horse-battery"
REVIEWER = "rita"
EXPERIMENTER = "erin"
OUTSIDER = "oscar"  # a reviewer for another experimenter
# Kind -> how many; the attention failers fail their checks, the others pass them.
MIX = {"careful": 2, "attention_failer": 2, "always_human": 1}
FAILERS = {"sim-attention_failer-00", "sim-attention_failer-01"}
SHOTS = Path(os.environ.get("CROWD_SHOTS", "/tmp/shots/review"))
# What a raw Python value looks like on a page: a repr'd dict or list, None, a long float.
RAW = re.compile(r"\{'|\['|\bNone\b|\bTrue\b|\bFalse\b|\d\.\d{5,}")
COLUMNS = [
    "Worker", "Responses", "Gold accuracy", "Gold posterior", "Against the crowd",
    "Attention failed", "Too fast", "Constant", "Longest run", "Flags", "Status", "Rules firing",
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
    # RoFT's one-failure filter, so that the failers, and only they, are excluded in 7 items.
    config = {"annotations_per_item": 2, "attention_rate": 0.25, "qc": {"rules": ROFT_RULES}}
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


@pytest.fixture(scope="module", name="played")
def played_fixture(
    tmp_path_factory: pytest.TempPathFactory, redis_server: str
) -> Iterator[Path | None]:
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


@pytest.fixture(name="database_url")
def database_url_fixture(database_url: str, played: Path | None) -> str:
    """The conftest's database, filled with a copy of the played one where there is one."""
    if played is not None:
        source = sqlite3.connect(played)
        target = sqlite3.connect(database_url.removeprefix("sqlite:///"))
        with target:
            source.backup(target)
        source.close()
        target.close()
    return database_url


@pytest.fixture(name="reviewed")
def reviewed_fixture(live_server: Any, api_key: str, db: Database, played: Path | None) -> Reviewed:
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


@pytest.fixture(name="db_state")
def db_state_fixture(db: Database) -> Callable[[], dict[str, Any]]:
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
@contextmanager
def sized_page(browser: Any, width: int, scripts: bool = True) -> Iterator[Any]:
    """A page in a window `width` pixels wide (390: a phone), with or without scripts."""
    context = browser.new_context(
        viewport={"width": width, "height": 900}, java_script_enabled=scripts
    )
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def shoot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def fits(page: Any, width: int) -> bool:
    """Whether the page keeps the window's width (wide tables scroll inside it)."""
    scroll: int = page.evaluate("document.documentElement.scrollWidth")
    return scroll <= width


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


WORKER_AUDIT = ["when", "actor", "action", "reason", "details"]
STUDY_AUDIT = ["when", "actor", "action", "worker", "reason", "details"]


def act(page: Any, action: str, reason: str = "", amount: str = "", confirm: bool = True) -> str:
    """Submit the worker page's action form, and confirm on the page that follows for a
    destructive action (unless `confirm` is false); returns the flash message shown after."""
    page.select_option("#action", action)
    page.fill("#reason", reason)
    if amount:
        page.fill("#amount", amount)
    with page.expect_navigation():
        page.click("#act button[type=submit]")
    if confirm and page.locator("form#confirm").count():
        with page.expect_navigation():
            page.click("#confirm button[type=submit]")
    return str(page.inner_text("p.flash"))


def options(page: Any, selector: str) -> list[str]:
    """The values a select offers, its "Choose an action…" placeholder ("") included."""
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
