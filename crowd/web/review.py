"""The reviewer UI: log in (experimenter or reviewer), see workers with their QC evidence,
act on them one by one or in bulk by rule, read the audit log.

The pages show the evidence in words (crowd.review.text). No action is chosen for the
reviewer: the menus start on a placeholder, a form without an action is refused (422), and a
destructive action (reject, soft-reject, block) or a bulk one first shows what it would do
and takes effect only once confirmed on that page, which works without scripts.

Forms post with a per-session CSRF token (crowd.web.csrf); the session cookie is HttpOnly and
SameSite=Lax.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import (
    Blueprint,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd import review
from crowd.accounts import check_login
from crowd.context import platform
from crowd.exceptions import AuthenticationError, CrowdError, NotFound, ValidationError
from crowd.review import text
from crowd.storage import Experimenter, Role, Study, User
from crowd.studies import lifecycle as studies
from crowd.web import csrf
from tasks import get_hit_type

bp = Blueprint("review", __name__, url_prefix="/review")
# Every post, the login and logout included, carries its form's token (crowd.web.csrf).
csrf.protect_forms(bp)

# The action menu's groups, in the order a reviewer weighs them.
ACTION_GROUPS = (
    ("Their work", ("approve", "soft_reject", "reject")),
    ("Their access", ("block", "unblock")),
    ("Other", ("bonus", "note", "notify", "qualify")),
)
# The form fields an action may carry (what the confirmation page passes on).
PARAMS = ("reason", "amount", "subject", "qualification", "value")
CONFIRMED = "yes"


@bp.context_processor
def formatting() -> dict[str, Any]:
    """What the review templates use to show values in words, and the action menus."""
    return {
        "fmt": text,
        "action_names": text.ACTION_NAMES,
        "destructive": review.DESTRUCTIVE,
        "action_groups": ACTION_GROUPS,
    }


def _who(db: Session) -> tuple[review.Reviewer, int] | None:
    """The logged-in person and the experimenter whose studies they see."""
    user_id = session.get("user_id")
    if isinstance(user_id, int):
        user = db.get(User, user_id)
        if user is not None:
            return review.Reviewer(user.name, Role(user.role)), user.experimenter_id
    # An experimenter logged in to the dashboard with an API key reviews their own studies.
    experimenter_id = session.get("experimenter_id")
    if isinstance(experimenter_id, int):
        experimenter = db.get(Experimenter, experimenter_id)
        if experimenter is not None:
            return review.Reviewer(experimenter.name, Role.EXPERIMENTER), experimenter.id
    return None


class _LoginNeeded(Exception):
    """The page needs a reviewer's (or the experimenter's) session: the login page."""


@bp.errorhandler(_LoginNeeded)
def _to_login(_error: _LoginNeeded) -> Any:
    return redirect(url_for("review.login"))


def _signed_in(db: Session) -> tuple[review.Reviewer, int]:
    """Who is logged in and whose studies they see, or the login page."""
    who = _who(db)
    if who is None:
        raise _LoginNeeded
    return who


def _study(db: Session, study_id: int, experimenter_id: int) -> Study:
    experimenter = db.get(Experimenter, experimenter_id)
    if experimenter is None:  # get_study(…, None) would skip the ownership check
        raise NotFound(f"no study {study_id}")
    return studies.get_study(db, study_id, experimenter)


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    error = None
    if request.method == "POST":
        try:
            with platform().db.session() as db:
                user = check_login(
                    db, request.form.get("name", ""), request.form.get("password", "")
                )
                session.clear()
                session["user_id"] = user.id
            return redirect(url_for("review.index"))
        except AuthenticationError as failure:
            error = str(failure)
    return render_template("review_login.html", error=error), 401 if error else 200


@bp.post("/logout")
def logout() -> Any:
    session.clear()
    return redirect(url_for("review.login"))


@bp.get("/")
def index() -> Any:
    with platform().db.read_session() as db:
        reviewer, experimenter_id = _signed_in(db)
        rows = [
            studies.progress(db, study)
            for study in db.scalars(
                select(Study).where(Study.experimenter_id == experimenter_id).order_by(Study.id)
            )
        ]
    return render_template("review_index.html", reviewer=reviewer, rows=rows)


def _allowed(reviewer: review.Reviewer, among: tuple[str, ...] = review.ACTIONS) -> list[str]:
    return [action for action in among if action in review.ALLOWED[reviewer.role]]


@bp.get("/studies/<int:study_id>")
def study_page(study_id: int) -> Any:
    sort = request.args.get("sort", "worker")
    with platform().db.read_session() as db:
        reviewer, experimenter_id = _signed_in(db)
        study = _study(db, study_id, experimenter_id)
        table = review.worker_table(db, study, sort)
        rules = sorted({rule for row in table for rule in row["rule_hits"]})
        name = study.name
    return render_template(
        "review_study.html",
        reviewer=reviewer,
        study_id=study_id,
        study_name=name,
        table=table,
        sort=sort,
        sort_keys=review.SORT_KEYS,
        rules=rules,
        actions=_allowed(reviewer, review.BULK_ACTIONS),
    )


@bp.get("/studies/<int:study_id>/workers/<int:worker_id>")
def worker_page(study_id: int, worker_id: int) -> Any:
    with platform().db.read_session() as db:
        reviewer, experimenter_id = _signed_in(db)
        study = _study(db, study_id, experimenter_id)
        history = review.worker_history(db, study, worker_id)
        items = review.answered_items(db, study, worker_id)
        view = text.worker_view(history, items, get_hit_type(study.hit_type), study.config)
    return render_template(
        "review_worker.html",
        reviewer=reviewer,
        study_id=study_id,
        history=history,
        view=view,
        actions=_allowed(reviewer),
    )


# -- acting ------------------------------------------------------------------------------------
def _post_action(study_id: int, do: Callable[[Session, Study, review.Reviewer], str]) -> None:
    """Run one form action as the logged-in person (the login page when nobody is)."""
    try:
        with platform().db.session() as db:
            reviewer, experimenter_id = _signed_in(db)
            flash(do(db, _study(db, study_id, experimenter_id), reviewer), "ok")
    except CrowdError as error:
        flash(str(error), "error")


def _form_params() -> dict[str, Any]:
    return {key: request.form[key] for key in PARAMS if request.form.get(key)}


def _chosen_action() -> str:
    """The form's action, which the person must have picked: the menus have no default."""
    action = request.form.get("action", "").strip()
    if not action:
        raise ValidationError(
            "choose an action in the menu; the form was sent without one", "action"
        )
    return action


def _confirmed() -> bool:
    return request.form.get("confirmed") == CONFIRMED


def _refused(error: CrowdError, back: str) -> Any:
    """A form the server refuses outright, shown in the reviewer's frame with the way back."""
    return render_template("review_refused.html", message=str(error), back=back), error.status


@bp.post("/studies/<int:study_id>/workers/<int:worker_id>/act")
def act(study_id: int, worker_id: int) -> Any:
    back = url_for("review.worker_page", study_id=study_id, worker_id=worker_id)
    try:
        action = _chosen_action()
    except ValidationError as error:
        return _refused(error, back)
    params = _form_params()
    if action in review.DESTRUCTIVE and not _confirmed():
        return _confirm(study_id, action, params, back, worker_id=worker_id)

    def do(db: Session, study: Study, reviewer: review.Reviewer) -> str:
        return review.act(db, study, worker_id, action, reviewer, params).message

    _post_action(study_id, do)
    return redirect(back)


@bp.post("/studies/<int:study_id>/bulk")
def bulk(study_id: int) -> Any:
    back = url_for("review.study_page", study_id=study_id)
    try:
        action = _chosen_action()
    except ValidationError as error:
        return _refused(error, back)
    rule, params = request.form.get("rule", ""), _form_params()
    # A note changes nothing for anyone; every other bulk action is shown before it is taken.
    if action != "note" and not _confirmed():
        return _confirm(study_id, action, params, back, rule=rule)

    def do(db: Session, study: Study, reviewer: review.Reviewer) -> str:
        outcomes = review.bulk(db, study, rule, action, reviewer, params)
        return f"{action.replace('_', '-')} on {len(outcomes)} worker(s) flagged by {rule}"

    _post_action(study_id, do)
    return redirect(back)


def _confirm(
    study_id: int,
    action: str,
    params: dict[str, Any],
    back: str,
    worker_id: int | None = None,
    rule: str | None = None,
) -> Any:
    """The page that says what the action would do, to one worker or to every worker the
    rule flags, and takes it when confirmed. An action that would be refused anyway is
    refused now, with its message, instead of being confirmed first."""
    with platform().db.read_session() as db:
        reviewer, experimenter_id = _signed_in(db)
        study = _study(db, study_id, experimenter_id)
        try:
            review.check_decision(reviewer, action, params)
            if rule is not None and action not in review.BULK_ACTIONS:
                raise ValidationError(
                    f"bulk actions are {', '.join(review.BULK_ACTIONS)}", "action"
                )
            if worker_id is not None:
                targets = [review.worker_in_study(db, study, worker_id).id]
            else:
                targets = review.rule_targets(db, study, rule or "")
        except CrowdError as error:
            flash(str(error), "error")
            return redirect(back)
        names = review.worker_names(db, targets)
        submitted = review.submitted_assignments(db, study, targets)
        study_name = study.name
    fields = {"action": action, **params, **({"rule": rule} if rule is not None else {})}
    return render_template(
        "review_confirm.html",
        reviewer=reviewer,
        study_id=study_id,
        study_name=study_name,
        action=action,
        rule=rule,
        reason=params.get("reason", ""),
        workers=sorted(names[worker] for worker in targets if worker in names),
        submitted=submitted,
        fields=fields,
        post_to=request.path,
        back=back,
    )


@bp.get("/studies/<int:study_id>/audit")
def audit_page(study_id: int) -> Any:
    with platform().db.read_session() as db:
        reviewer, experimenter_id = _signed_in(db)
        _study(db, study_id, experimenter_id)
        entries = text.audit_lines(
            review.audit_row(entry) for entry in review.audit_log(db, study_id)
        )
        names = review.worker_names(db, [e.worker_id for e in entries if e.worker_id])
    return render_template(
        "review_audit.html", reviewer=reviewer, study_id=study_id, entries=entries, names=names
    )
