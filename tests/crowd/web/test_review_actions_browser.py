"""The reviewer UI (/review) in headless Chromium: who may act, bulk actions and CSRF.

On the same played and QC-checked study as test_review_browser.py (set up by review_pages.py):
a reviewer judges work, an experimenter may also block and pay bonuses, and may act on every
worker a rule flags. Every action must show in the page, in the audit log and in the
database; forged and token-less posts must not. No action is ever chosen for the reviewer:
a form without one is refused, and reject, soft-reject, block and bulk actions say what they
would do and wait for a confirmation (with or without scripts).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from crowd.storage import (
    Assignment,
    AssignmentState,
    Bonus,
    Database,
    Decision,
    StudyWorker,
    Worker,
    WorkerBlock,
    WorkerStatus,
)
from tests.crowd.web.conftest import BROWSER_MARKS
from tests.crowd.web.review_pages import (
    EXPERIMENTER,
    FAILERS,
    PASSWORD,
    REVIEWER,
    STUDY_AUDIT,
    WORKER_AUDIT,
    Reviewed,
    act,
    assignment_states,
    audit_rows,
    database_url_fixture,  # noqa: F401 (a fixture)
    db_state_fixture,  # noqa: F401 (a fixture)
    fits,
    login,
    options,
    people_audit,
    played_fixture,  # noqa: F401 (a fixture)
    reviewed_fixture,  # noqa: F401 (a fixture)
    shoot,
    sized_page,
    worker_rows,
)

pytestmark = BROWSER_MARKS


# -- 4. who may do what ------------------------------------------------------------------------
def test_a_reviewer_may_not_block_or_pay_a_bonus_even_by_forging_the_form(
    page: Any, reviewed: Reviewed, db: Database, db_state: Callable[[], dict[str, Any]]
) -> None:
    login(page, reviewed.base, REVIEWER)
    page.goto(reviewed.worker_url("sim-careful-00"))
    offered = options(page, "#action option")
    assert offered == ["", "approve", "soft_reject", "reject", "note"]
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
        "",
        "approve",
        "soft_reject",
        "reject",
        "block",
        "unblock",
        "bonus",
        "note",
        "notify",
        "qualify",
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

    # A simulated worker has no platform: the bonus is recorded, and nothing says it was paid.
    recorded = "bonus of 0.50 recorded; sim workers are not paid through crowd"
    assert act(page, "bonus", "thoughtful explanations", "0.50") == recorded
    again = act(page, "bonus", "thoughtful explanations", "0.50")
    assert again == "bonus 0.50 was already recorded"
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
    assert trail[0]["details"].splitlines()[0] == "amount: 0.50"


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
        if page.locator("form#confirm").count():  # a refused action comes straight back
            with page.expect_navigation():
                page.click("#confirm button[type=submit]")
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
        [("bulk-reject", "")] + [("reject", f"sim:{f}") for f in FAILERS]
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
    assert response.status == 403 and "reload the page" in response.text()
    page.goto(reviewed.url())
    assert page.url == f"{reviewed.base}/review/login"

    login(page, reviewed.base, EXPERIMENTER)
    act_url = f"{reviewed.worker_url('sim-careful-00')}/act"
    posts = [
        (act_url, {"action": "block", "reason": "no token", "confirmed": "yes"}),
        (act_url, {"action": "block", "reason": "bad token", "csrf": "x" * 43}),
        (act_url, {"action": "block", "reason": "non-ASCII token", "csrf": "ü" * 43}),
        (act_url, {"action": "bonus", "amount": "1.00", "reason": "no token", "csrf": ""}),
        (reviewed.url("/bulk"), {"rule": "attention_failed", "action": "reject", "reason": "x"}),
    ]
    for url, form in posts:
        refused = page.request.post(url, form=form, max_redirects=0)
        assert refused.status == 403, (url, form)
        assert "refused: the form" in refused.text() and "reload the page" in refused.text()
    assert db_state() == before

    # The same post with the page's token goes through: it was the token that was missing.
    page.goto(reviewed.worker_url("sim-careful-00"))
    token = page.input_value("#act input[name=csrf]")
    done = page.request.post(act_url, form={**posts[0][1], "csrf": token}, max_redirects=0)
    assert done.status == 302
    assert db_state() != before


# -- 7. no action chosen for the reviewer; destructive ones confirmed first --------------------
@pytest.mark.parametrize("width", [1280, 390])
def test_no_action_is_chosen_for_the_reviewer_and_a_reject_is_confirmed_first(
    browser: Any,
    reviewed: Reviewed,
    db: Database,
    db_state: Callable[[], dict[str, Any]],
    width: int,
) -> None:
    target = reviewed.workers["sim-careful-00"]
    url = reviewed.worker_url("sim-careful-00")
    with sized_page(browser, width) as page:
        login(page, reviewed.base, REVIEWER)
        page.goto(url)
        assert fits(page, width)
        # The menu starts on its placeholder; the button waits for a choice and says what comes.
        assert page.input_value("#action") == ""
        button = page.locator("#act button[type=submit]")
        assert button.is_disabled() and button.inner_text() == "Choose an action first"
        shoot(page, f"act-none-{width}")
        page.select_option("#action", "approve")
        assert button.is_enabled() and button.inner_text() == "Apply"
        page.select_option("#action", "reject")
        assert button.inner_text() == "Review and confirm…"
        assert "nothing happens until you confirm" in page.inner_text("#act .next")
        page.select_option("#action", "")
        assert button.is_disabled()

        # A form sent without an action is refused, naming the field, and changes nothing.
        before = db_state()
        token = page.input_value("#act input[name=csrf]")
        for form in (
            {"csrf": token, "reason": "no action at all"},
            {"csrf": token, "action": "", "reason": "the placeholder"},
            {"csrf": token, "action": "   ", "confirmed": "yes"},
        ):
            refused = page.request.post(f"{url}/act", form=form, max_redirects=0)
            assert refused.status == 422, form
            assert "action: choose an action in the menu" in refused.text()
        bulk = page.request.post(
            reviewed.url("/bulk"),
            form={"csrf": token, "rule": "attention_failed", "reason": "x", "confirmed": "yes"},
            max_redirects=0,
        )
        assert bulk.status == 422 and "action: choose an action" in bulk.text()
        assert db_state() == before

        # A reject shows what it would do, and does nothing until confirmed.
        with db.session() as session:
            submitted = session.scalar(
                select(func.count(Assignment.id)).where(
                    Assignment.worker_id == target, Assignment.state == AssignmentState.SUBMITTED
                )
            )
        reason = "rushed <i>every</i> passage"
        page.select_option("#action", "reject")
        page.fill("#reason", reason)
        with page.expect_navigation():
            button.click()
        assert page.inner_text("#confirm-title") == "Reject sim:sim-careful-00?"
        consequences = page.inner_text("#consequences").splitlines()
        assert (
            consequences[0] == f"Their {submitted} submitted assignment(s) are rejected: not paid."
        )
        assert page.inner_text("#confirm-reason") == reason  # shown as text, not markup
        assert fits(page, width)
        shoot(page, f"confirm-reject-{width}")
        assert db_state() == before

        # Cancel goes back with nothing done; confirming does it.
        with page.expect_navigation():
            page.click("#cancel")
        assert page.url == url and page.inner_text("#status") == "active"
        assert db_state() == before
        message = act(page, "reject", reason)
        assert message == f"rejected {submitted} assignment(s); worker excluded"
        assert page.inner_text("#status") == "rejected"
    assert assignment_states(db, reviewed.study_id, target) == {AssignmentState.REJECTED}
    entries = people_audit(db, reviewed.study_id)
    assert [(e.action, e.worker_id, e.reason) for e in entries] == [("reject", target, reason)]


def test_the_forms_and_confirmations_work_without_scripts(
    browser: Any, reviewed: Reviewed, db: Database, db_state: Callable[[], dict[str, Any]]
) -> None:
    target = reviewed.workers["sim-careful-01"]
    url = reviewed.worker_url("sim-careful-01")
    with sized_page(browser, 390, scripts=False) as page:
        login(page, reviewed.base, EXPERIMENTER)
        page.goto(url)
        # Without the script the button is live, but the browser will not send the placeholder.
        before = db_state()
        page.click("#act button[type=submit]")
        assert page.url == url
        assert page.eval_on_selector("#action", "menu => menu.validity.valueMissing") is True
        assert db_state() == before

        # A block is confirmed on its own page, which needs no script either.
        page.select_option("#action", "block")
        page.fill("#reason", "shared an account")
        with page.expect_navigation():
            page.click("#act button[type=submit]")
        assert "no more work in any of your studies" in page.inner_text("#consequences")
        shoot(page, "confirm-block-noscript-390")
        assert db_state() == before
        with page.expect_navigation():
            page.click("#confirm button[type=submit]")
        assert page.inner_text("p.flash") == "blocked from every study of this experimenter"
        assert page.inner_text("#status") == "blocked"
    with db.session() as session:
        assert [b.worker_id for b in session.scalars(select(WorkerBlock))] == [target]


def test_a_bulk_action_lists_the_workers_before_it_is_taken(
    page: Any, reviewed: Reviewed, db_state: Callable[[], dict[str, Any]]
) -> None:
    login(page, reviewed.base, EXPERIMENTER)
    page.goto(reviewed.url())
    before = db_state()
    page.select_option("#bulk select[name=rule]", "attention_failed")
    page.select_option("#bulk select[name=action]", "soft_reject")
    page.fill("#bulk input[name=reason]", "failed the checks")
    with page.expect_navigation():
        page.click("#bulk button[type=submit]")
    assert page.inner_text("#confirm-title") == (
        "Soft-reject every worker the rule attention_failed flags?"
    )
    assert page.inner_text("#targets").splitlines() == sorted(f"sim:{f}" for f in FAILERS)
    assert "left out of the analyses" in page.inner_text("#consequences")
    shoot(page, "confirm-bulk-1280")
    assert db_state() == before
    with page.expect_navigation():
        page.click("#confirm button[type=submit]")
    assert page.inner_text("p.flash") == "soft-reject on 2 worker(s) flagged by attention_failed"
    assert db_state() != before
