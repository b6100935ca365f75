"""The reviewer UI (/review) in headless Chromium: logging in and what the pages show.

A small simulated crowd plays a boundary study over HTTP (two attention failers among them),
QC runs on what they did, and people log in to look at the workers: who may see the study,
the workers table with its evidence and sorting, a reviewer's soft-reject of one worker,
which must show in the page, in the audit log and in the database, and the evidence, answers
and audit log in words (at a desktop's and a phone's width). The set-up and the page
helpers are in review_pages.py; who may do what, bulk actions and CSRF are tested in
test_review_actions_browser.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import func, select

from crowd.storage import (
    Assignment,
    AssignmentState,
    Database,
    Decision,
    Item,
    Response,
    StudyWorker,
    Worker,
)
from tests.crowd.web.conftest import BROWSER_MARKS
from tests.crowd.web.review_pages import (
    COLUMNS,
    FAILERS,
    OUTSIDER,
    PASSWORD,
    RAW,
    REVIEWER,
    STUDY_AUDIT,
    WORKER_AUDIT,
    Reviewed,
    act,
    assignment_states,
    attention_failed,
    audit_rows,
    cells,
    database_url_fixture,  # noqa: F401 (a fixture)
    db_state_fixture,  # noqa: F401 (a fixture)
    fits,
    login,
    people_audit,
    played_fixture,  # noqa: F401 (a fixture)
    reviewed_fixture,  # noqa: F401 (a fixture)
    shoot,
    sized_page,
    worker_rows,
)

pytestmark = BROWSER_MARKS


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
        # The accuracy against the crowd, and the threshold when below it.
        assert re.fullmatch(r"(–|\d+%( \(below \d+%\))?(; shares answers with \d+)?)",
                            row["Against the crowd"]), row  # fmt: skip
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
        page.click("#workers a.sort[data-key=agreement]")
    # (Two answers an item: nobody's item has the two other answers a comparison needs, so
    # every accuracy is unknown here; tests/crowd/quality/test_crowd_rules.py sorts known ones.)
    assert page.url.endswith("?sort=agreement")
    shares = [r["Against the crowd"] for r in worker_rows(page)]
    known = [int(s.split("%")[0]) for s in shares if s != "–"]
    assert known == sorted(known) and len(shares) == len(rows)
    assert shares[len(known) :] == ["–"] * (len(shares) - len(known))  # unknown ones last

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
    assert message == f"approved {n_assignments} assignment(s); data excluded"
    assert page.inner_text("#status") == "soft-rejected"
    trail = audit_rows(page, WORKER_AUDIT)
    assert {k: trail[0][k] for k in ("actor", "action", "reason", "details")} == {
        "actor": f"reviewer:{REVIEWER}", "action": "soft-reject", "reason": reason,
        "details": f"assignments paid: {n_assignments}",
    }  # fmt: skip
    # The flash is shown once: a reload does not repeat it.
    page.reload()
    assert page.locator("p.flash").count() == 0

    page.goto(reviewed.url("/audit"))
    mine = [r for r in audit_rows(page, STUDY_AUDIT) if r["actor"].startswith("reviewer:")]
    assert len(mine) == 1
    assert mine[0]["action"] == "soft-reject" and mine[0]["reason"] == reason
    assert mine[0]["worker"] == "sim:sim-always_human-00"
    assert mine[0]["details"] == f"assignments paid: {n_assignments}"

    page.goto(reviewed.url())
    row = next(r for r in worker_rows(page) if r["Worker"] == "sim:sim-always_human-00")
    assert row["Status"] == f"soft-rejected (reviewer:{REVIEWER})"

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


# -- 4. the pages read as words ----------------------------------------------------------------
def boundary_answers(db: Database, worker_id: int) -> dict[int, tuple[str, int, int]]:
    """Response id -> (item kind, guess, number of sentences) of the worker's answers."""
    with db.session() as session:
        found = session.execute(
            select(Response.id, Item.kind, Response.answer, Item.content)
            .join(Item, Item.id == Response.item_id)
            .where(Response.worker_id == worker_id)
        ).all()
    return {
        response_id: (str(kind), int(answer["guess"]), len(content["sentences"]))
        for response_id, kind, answer, content in found
    }


@pytest.mark.parametrize("width", [1280, 390])
def test_a_workers_evidence_and_answers_read_as_words(
    browser: Any, reviewed: Reviewed, db: Database, width: int
) -> None:
    failer = sorted(FAILERS)[0]
    with sized_page(browser, width) as page:
        login(page, reviewed.base, REVIEWER)
        page.goto(reviewed.worker_url(failer))
        shoot(page, f"worker-{width}")
        assert fits(page, width)
        assert not RAW.search(page.inner_text("main")), page.inner_text("main")

        figures = {row[0]: row[1] for row in cells(page, "#evidence tr")}
        assert figures["Responses"].isdigit()
        failed, checks = map(
            int, re.fullmatch(r"failed (\d+) of (\d+)", figures["Attention checks"]).groups()
        )
        assert 1 <= failed <= checks
        assert re.fullmatch(r"\d+ of \d+ \(\d+%\)", figures["Too fast to read"])
        assert figures["Gold items"] == "none answered yet"
        assert figures["Estimated accuracy"] == "50% (the prior alone)"

        # Every answer in the boundary's terms, sentences counted from 1 as the worker saw them.
        stored = boundary_answers(db, reviewed.workers[failer])
        shown = page.eval_on_selector_all(
            "#answers tr[id^=response-]",
            "rows => rows.map(r => [r.id, r.querySelector('td.answer').firstChild.textContent,"
            " r.cells[4].innerText])",
        )
        assert len(shown) == len(stored) == int(figures["Responses"])
        for row_id, answer, seconds in shown:
            kind, guess, n = stored[int(row_id.removeprefix("response-"))]
            human = f"all {n} sentences human"
            assert answer == (human if guess == n else f"machine from sentence {guess + 1} of {n}")
            assert re.fullmatch(r"\d+\.\d s|\d+ min( \d+ s)?", seconds), seconds

        # Each failed check is a line saying what was answered and what the check asked for,
        # linked to its answer in the table.
        said = r"(machine from sentence \d+ of \d+|all \d+ sentences human)"
        lines = page.locator("section[data-signal=attention_failed] li")
        assert lines.count() == failed
        for i in range(failed):
            line = lines.nth(i)
            assert re.fullmatch(rf"item [\w-]+: answered {said}; the check asked for {said}",
                                line.inner_text()), line.inner_text()  # fmt: skip
            target = line.locator("a").get_attribute("href")
            assert target.startswith("#response-")
            row = cells(page, f"#answers tr{target}")[0]
            assert (row[2], row[6]) == ("attention", "failed")
            assert row[3].splitlines()[1].startswith("expected: ")
        with page.expect_navigation():
            lines.first.locator("a").click()
        assert page.url.endswith(lines.first.locator("a").get_attribute("href"))

        # The audit trail: the rule's numbers as lines, the time in words.
        trail = audit_rows(page, WORKER_AUDIT)
        rule = next(r for r in trail if r["actor"] == "rule:attention_failed")
        assert rule["action"] == "soft-block"
        *numbers, read = rule["details"].splitlines()
        # In the order stored: PostgreSQL's JSONB keeps keys in an order of its own.
        assert sorted(numbers) == [f"attention checks: {checks}", f"attention failed: {failed}"]
        # How many of the worker's answers the rule's evidence rested on: some of those shown.
        found = re.fullmatch(r"answers read: (\d+)", read)
        assert found is not None, read
        assert checks <= int(found[1]) <= len(cells(page, "#answers tr")) - 1
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", rule["when"])


@pytest.mark.parametrize("width", [1280, 390])
def test_the_workers_table_and_audit_log_read_as_words(
    browser: Any, reviewed: Reviewed, width: int
) -> None:
    with sized_page(browser, width) as page:
        login(page, reviewed.base, REVIEWER)
        page.goto(reviewed.url())
        shoot(page, f"workers-{width}")
        assert fits(page, width)
        assert not RAW.search(page.inner_text("main"))
        for row in worker_rows(page):
            # No gold in this study: no accuracy, and no posterior that is only the prior.
            assert row["Gold accuracy"] == row["Gold posterior"] == "–", row
            assert row["Longest run"].isdigit()

        page.goto(reviewed.url("/audit"))
        shoot(page, f"audit-{width}")
        assert fits(page, width)
        assert not RAW.search(page.inner_text("main"))
        entries = audit_rows(page, STUDY_AUDIT)
        assert entries and all(re.fullmatch(r"[\d-]+ [\d:]+ UTC", e["when"]) for e in entries)
        # Workers by name, linked to their page; actions as words.
        names = {f"sim:{external}" for external in reviewed.workers}
        assert {e["worker"] for e in entries} <= names
        assert {e["action"] for e in entries} <= {"soft-block", "flag", "stop"}
