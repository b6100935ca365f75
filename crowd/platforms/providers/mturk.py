"""Amazon Mechanical Turk: a study as a HIT type plus HITs whose ExternalQuestion is our page.

Each HIT is a slot of work, not a fixed item: a worker who accepts it does up to
`items_per_session` items that our server picks (with QC's attention checks and gold), then
the page posts to MTurk's externalSubmit. The calls themselves are in mturk_api.py, what MTurk
accepts in mturk_checks.py; MTurk closed to new requesters on 2026-07-30, existing accounts
keep working.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from collections.abc import Mapping, MutableMapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from crowd.exceptions import ValidationError
from crowd.platforms.providers import mturk_api, mturk_checks
from crowd.platforms.providers.base import (
    ActionTarget,
    Binding,
    Provider,
    Publication,
    RemoteSubmission,
    RemoteTaskSpec,
    StudyRef,
    with_defaults,
)

if TYPE_CHECKING:
    from crowd.settings import Settings

PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"
# Where MTurk's frame may send the finished work (turkSubmitTo), production and sandbox.
SUBMIT_ORIGINS = ("https://www.mturk.com", "https://workersandbox.mturk.com")
WORKER_SITES = {True: "https://workersandbox.mturk.com", False: "https://worker.mturk.com"}
# Below 10 assignments per HIT MTurk's fee is 20% instead of 40%.
DEFAULT_MAX_ASSIGNMENTS = 9
ID = re.compile(r"^[A-Z0-9]{1,64}$")
# Hex digits of the salt in our HITs' request tokens (40 bits).
SALT_LENGTH = 10
# The bonus ledger's note that a try stopped before sending anything.
NOT_SENT = "not_sent"

OPTION_HELP: dict[str, str] = {
    "reward": "dollars per HIT (per session of items), e.g. '0.50' (required)",
    "sandbox": "true (default) for the requester sandbox, false for production",
    "title": "HIT title (default: the title workers see, worker_page.title)",
    "description": "HIT description",
    "keywords": "list of search keywords",
    "items_per_session": "items a worker does per HIT (default 10)",
    "assignments_per_hit": "workers per HIT (default: annotations per item, at most 9)",
    "hits": "number of HITs (default: enough for every item's annotations)",
    "lifetime_s": "seconds the HITs stay listed (default 7 days)",
    "duration_s": "seconds a worker has for one HIT (default 3600)",
    "auto_approval_delay_s": "seconds before MTurk approves on its own (default 3 days)",
    "frame_height": "pixels of MTurk's frame around our page (default 800; 0 = window)",
    "approval_rate": "minimum approval percent (default 95; null for none)",
    "locales": "list of country codes (default ['US']; [] for any)",
    "qualifications": "custom requirements: list of [qualification_id, comparator, value]",
    "block_qualification_id": "a qualification type given to blocked workers; HITs require "
    "that workers do not have it",
}
DEFAULTS: dict[str, Any] = {
    "sandbox": True,
    "title": None,
    "description": "Read short texts and answer questions about them.",
    "keywords": ["text", "reading", "language"],
    "items_per_session": 10,
    "assignments_per_hit": None,
    "hits": None,
    "lifetime_s": 7 * 24 * 3600,
    "duration_s": 3600,
    "auto_approval_delay_s": 3 * 24 * 3600,
    "frame_height": 800,
    "approval_rate": 95,
    "locales": ["US"],
    "qualifications": [],
    "block_qualification_id": None,
}


def _salt(secret_key: str, study: StudyRef) -> str:
    """What tells this database's study apart from another's with the same id: a short keyed
    hash of its id and the time it was made (studies of a reset database reuse ids)."""
    made = study.created_at.astimezone(UTC).isoformat() if study.created_at else ""
    message = f"{study.id}|{made}".encode()
    return hmac.new(secret_key.encode(), message, hashlib.sha256).hexdigest()[:SALT_LENGTH]


def _whole(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{value!r} is not a whole number in {low}..{high}", name)
    return value


class MTurkProvider(Provider):
    name: ClassVar[str] = "mturk"
    remote: ClassVar[bool] = True
    external_page: ClassVar[bool] = True

    def validate_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        checked = with_defaults("MTurk", options, OPTION_HELP, DEFAULTS, "0.50")
        checked["reward"] = mturk_checks.format_reward(checked["reward"])
        if not isinstance(checked["sandbox"], bool):
            raise ValidationError("must be true or false", "sandbox")
        for name, low, high in (
            ("items_per_session", 1, 1000),
            ("lifetime_s", mturk_checks.MIN_DURATION_S, mturk_checks.MAX_DURATION_S),
            ("duration_s", mturk_checks.MIN_DURATION_S, mturk_checks.MAX_DURATION_S),
            ("auto_approval_delay_s", 0, mturk_checks.MAX_AUTO_APPROVAL_DELAY_S),
            ("frame_height", 0, mturk_checks.MAX_FRAME_HEIGHT),
        ):
            _whole(checked[name], name, low, high)
        for name in ("assignments_per_hit", "hits"):
            if checked[name] is not None:
                _whole(checked[name], name, 1, mturk_checks.MAX_ASSIGNMENTS)
        for name in ("title", "description"):
            if checked[name] is not None and not isinstance(checked[name], str):
                raise ValidationError("must be text", name)
        keywords = checked["keywords"]
        if isinstance(keywords, str):
            keywords = [word.strip() for word in keywords.split(",") if word.strip()]
        if not isinstance(keywords, list) or not all(isinstance(w, str) for w in keywords):
            raise ValidationError("must be a list of words", "keywords")
        checked["keywords"] = keywords
        qualifications = checked["qualifications"]
        if not isinstance(qualifications, list):
            raise ValidationError("must be a list of [id, comparator, value]", "qualifications")
        checked["qualifications"] = [list(q) if isinstance(q, tuple) else q for q in qualifications]
        # Build the requirements once now, so every mistake shows before anything is sent.
        self._requirements(checked)
        return checked

    def _requirements(self, options: Mapping[str, Any]) -> list[dict[str, Any]]:
        return mturk_checks.qualification_requirements(
            approval_rate=options["approval_rate"],
            locales=options["locales"] or None,
            custom=[tuple(q) for q in options["qualifications"]],
            block_qualification_id=options["block_qualification_id"],
        )

    def _client(self, settings: Settings, sandbox: bool) -> Any:
        return mturk_api.make_client(sandbox=sandbox, endpoint_url=settings.mturk_endpoint_url)

    def _plan(self, study: StudyRef, options: Mapping[str, Any]) -> tuple[int, int]:
        """Assignments per HIT and HITs: enough for every open place of the study's items."""
        per_item = int(study.config.get("annotations_per_item", 1))
        assignments = options["assignments_per_hit"] or max(
            1, min(per_item, DEFAULT_MAX_ASSIGNMENTS)
        )
        per_hit = options["items_per_session"] * assignments
        return assignments, options["hits"] or max(1, math.ceil(study.work_slots / per_hit))

    def estimate(self, study: StudyRef, options: Mapping[str, Any]) -> dict[str, Any]:
        assignments, hits = self._plan(study, options)
        reward = Decimal(options["reward"])
        total = mturk_checks.cost(reward, assignments, hits)
        fee = mturk_checks.fee(reward, assignments)
        where = "the sandbox (no money changes hands)" if options["sandbox"] else "MTurk"
        return {
            "cost": str(total),
            "currency": "USD",
            "lines": [
                f"{hits} HIT(s) x {assignments} assignment(s), {options['items_per_session']} "
                f"item(s) each, on {where}",
                f"${reward} reward + ${fee} MTurk fee per assignment",
                f"${total} in all (checked against the account's balance when publishing)",
            ],
        }

    def publish(
        self,
        settings: Settings,
        study: StudyRef,
        base_url: str,
        options: Mapping[str, Any],
        token: str,
    ) -> Publication:
        assignments, hits = self._plan(study, options)
        url = f"{base_url}/ext/mturk/{study.id}"
        # http is for a development endpoint only: MTurk itself frames https pages alone.
        question = mturk_checks.external_question(
            url, options["frame_height"], allow_http=settings.mturk_endpoint_url is not None
        )
        client = self._client(settings, options["sandbox"])
        reward = Decimal(options["reward"])
        needed = mturk_checks.cost(reward, assignments, hits)
        balance = mturk_api.check_balance(client, needed)
        title = options["title"] or study.title or study.hit_type
        hit_type_id = mturk_api.create_hit_type(
            client,
            title=title[: mturk_checks.MAX_TITLE],
            description=options["description"],
            reward=reward,
            duration_s=options["duration_s"],
            auto_approval_delay_s=options["auto_approval_delay_s"],
            keywords=options["keywords"],
            qualification_requirements=self._requirements(options),
        )
        expires = datetime.now(UTC) + timedelta(seconds=options["lifetime_s"])
        # One token per HIT, derived from the publication's and salted with what only this
        # database's study has: a publish that failed after CreateHIT (before our commit) is
        # retried with the same tokens, while another deployment on the same account (a
        # staging copy, a reset demo, tests on the sandbox) never shares them. The HITs carry
        # the token as their annotation, so a retry finds and adopts them rather than making
        # them again, even after MTurk has forgotten the token (24 hours).
        salt = _salt(settings.secret_key, study)
        hit_tokens = [f"{token}-{salt}-{index}" for index in range(hits)]
        for hit_token in hit_tokens:
            mturk_checks.check_token(hit_token)
        # Listing the account's HITs only where an earlier try may have made some.
        orphans = mturk_api.find_hits(client, hit_type_id, hit_tokens, url) if study.retried else {}
        tasks = []
        for hit_token in hit_tokens:
            orphan = orphans.get(hit_token)
            if orphan is not None:
                hit_id, ends = str(orphan["HITId"]), orphan["Expiration"]
            else:
                ends = expires
                hit_id = mturk_api.create_hit(
                    client,
                    hit_type_id,
                    question,
                    lifetime_s=options["lifetime_s"],
                    max_assignments=assignments,
                    unique_request_token=hit_token,
                )
            tasks.append(RemoteTaskSpec(remote_id=hit_id, places=assignments, expires_at=ends))
        adopted = [str(hit["HITId"]) for hit in orphans.values()]
        site = WORKER_SITES[bool(options["sandbox"])]
        return Publication(
            provider=self.name,
            urls={"page": url, "workers": f"{site}/projects/{hit_type_id}/tasks"},
            remote={
                "hit_type_id": hit_type_id,
                "sandbox": options["sandbox"],
                "cost": str(needed),
                "balance_before": str(balance),
                **({"adopted_hits": sorted(adopted)} if adopted else {}),
            },
            tasks=tuple(tasks),
        )

    def bind(self, args: Mapping[str, str], settings: Settings) -> Binding | None:
        assignment_id = args.get("assignmentId", "")
        if not assignment_id or assignment_id == PREVIEW_ASSIGNMENT:
            return None
        values = {}
        for name in ("assignmentId", "hitId", "workerId"):
            value = args.get(name, "")
            if not ID.match(value):
                raise ValidationError(f"MTurk's {name} is missing or malformed", name)
            values[name] = value
        submit_to = args.get("turkSubmitTo", "").rstrip("/")
        allowed = (*SUBMIT_ORIGINS, *settings.mturk_submit_origins)
        if submit_to not in allowed:
            raise ValidationError(
                f"turkSubmitTo {submit_to!r} is not MTurk (expected one of {list(allowed)})",
                "turkSubmitTo",
            )
        return Binding(
            worker_external_id=values["workerId"],
            session_remote_id=values["assignmentId"],
            task_remote_id=values["hitId"],
            submit_to=submit_to,
        )

    def completion(self, settings: Settings, binding: Binding, code: str) -> dict[str, Any]:
        return {
            "kind": "form",
            "action": f"{binding.submit_to}/mturk/externalSubmit",
            "fields": {"assignmentId": binding.session_remote_id},
        }

    def perform(
        self,
        settings: Settings,
        action: str,
        target: ActionTarget,
        params: Mapping[str, Any],
        ledger: MutableMapping[str, str] | None = None,
    ) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        client = self._client(settings, bool(target.publication.get("sandbox", True)))
        worker = target.worker_external_id
        if action in ("approve", "reject"):
            assignment = target.session_remote_id or ""
            # A reason longer than MTurk shows (one the review kept before the work reached
            # MTurk: it takes 2,000 characters) is cut to fit: refused, the call would fail
            # on every try and leave the worker unpaid.
            feedback = mturk_checks.shorten(
                str(params.get("feedback") or ""), mturk_checks.MAX_FEEDBACK
            )
            try:
                if action == "approve":
                    mturk_api.approve(
                        client,
                        assignment,
                        feedback or None,
                        override_rejection=bool(params.get("override_rejection")),
                    )
                else:
                    mturk_api.reject(client, assignment, feedback)
            except ClientError:
                # A retry after a lost answer: MTurk refuses to decide twice. If the
                # assignment already has the status we wanted, the call did happen.
                status = client.get_assignment(AssignmentId=assignment)["Assignment"]
                if status.get("AssignmentStatus") != (
                    "Approved" if action == "approve" else "Rejected"
                ):
                    raise
                return {"already": True}
            return {}
        if action == "bonus":
            assignment = target.session_remote_id or ""
            return self._bonus(client, worker, assignment, params, ledger, target.attempts)
        qualification = target.publication.get("block_qualification_id")
        if action == "block":
            mturk_api.block(client, worker, str(params.get("reason") or "blocked"))
            if qualification:
                mturk_api.grant_qualification(client, worker, qualification, 1)
            return {}
        if action == "unblock":
            mturk_api.unblock(client, worker, str(params.get("reason") or ""))
            if qualification:
                mturk_api.revoke_qualification(client, worker, qualification)
            return {}
        if action == "notify":
            failures = mturk_api.notify(client, [worker], params["subject"], params["message"])
            return {"failures": failures}
        if action == "grant_qualification":
            mturk_api.grant_qualification(
                client, worker, params["qualification_id"], int(params.get("value", 1))
            )
            return {}
        raise ValidationError(f"MTurk has no action {action!r}", "action")

    def _bonus(
        self,
        client: Any,
        worker: str,
        assignment: str,
        params: Mapping[str, Any],
        ledger: MutableMapping[str, str] | None,
        attempts: int,
    ) -> dict[str, Any]:
        """SendBonus, paid once whatever fails: before the first send the ledger keeps how
        many bonuses like it MTurk listed; a later try first asks MTurk's records whether an
        earlier one paid (its answer may have been lost, and MTurk forgets a token after 24
        hours, when sending it again would pay twice).

        A try made before the ledger kept that count (by an earlier version) left nothing to
        compare with: any bonus like this one in MTurk's records is taken for it, rather than
        risk paying twice. Where the records cannot be read after a try that may have paid,
        the payment is unknown (PaymentUnknown), not failed.
        """
        amount, reason, token = params["amount"], params["reason"], params["token"]
        notes: MutableMapping[str, str] = ledger if ledger is not None else {}
        if "alike_before" in notes or (attempts and NOT_SENT not in notes):
            before = int(notes.get("alike_before", "0"))
            if mturk_api.paid_since(client, worker, assignment, amount, reason, token, before):
                return {"paid": True, "seen_in": "ListBonusPayments"}
            notes.setdefault("alike_before", str(before))
        else:
            try:
                before = mturk_api.bonuses_alike(client, worker, assignment, amount, reason)
            except Exception:
                # Nothing was sent: the next try counts afresh.
                notes[NOT_SENT] = "ListBonusPayments failed before the first SendBonus"
                raise
            notes["alike_before"] = str(before)
        sent = mturk_api.send_bonus(client, worker, assignment, amount, reason, token, before)
        return {"paid": True, "seen_in": "SendBonus" if sent else "ListBonusPayments"}

    def check_action(self, action: str, params: Mapping[str, Any]) -> None:
        if action in ("approve", "reject") and len(str(params.get("feedback") or "")) > (
            mturk_checks.MAX_FEEDBACK
        ):
            raise ValidationError(
                f"MTurk shows at most {mturk_checks.MAX_FEEDBACK} characters of feedback: "
                "shorten the reason",
                "reason",
            )

    def sync(
        self, settings: Settings, publication: Mapping[str, Any], task_ids: Sequence[str]
    ) -> list[RemoteSubmission]:
        client = self._client(settings, bool(publication.get("sandbox", True)))
        found = []
        for hit_id in task_ids:
            for assignment in mturk_api.list_assignments(client, hit_id):
                status = str(assignment["AssignmentStatus"])
                found.append(
                    RemoteSubmission(
                        remote_id=str(assignment["AssignmentId"]),
                        task_remote_id=str(assignment.get("HITId", hit_id)),
                        worker_external_id=str(assignment["WorkerId"]),
                        state=status.lower(),
                        raw_state=status,
                        submission_id=str(assignment["AssignmentId"]),
                        answers=mturk_checks.answer_fields(str(assignment.get("Answer", ""))),
                    )
                )
        return found

    def expire(self, settings: Settings, publication: Mapping[str, Any], task_id: str) -> None:
        client = self._client(settings, bool(publication.get("sandbox", True)))
        mturk_api.expire_hit(client, task_id)

    def extend(
        self,
        settings: Settings,
        publication: Mapping[str, Any],
        task_id: str,
        seconds: int,
        more_places: int,
        token: str,
    ) -> datetime | None:
        client = self._client(settings, bool(publication.get("sandbox", True)))
        return mturk_api.extend_hit(client, task_id, seconds, more_places, token)

    def balance(self, settings: Settings, options: Mapping[str, Any]) -> dict[str, Any]:
        sandbox = bool(options.get("sandbox", True))
        client = self._client(settings, sandbox)
        answer = client.get_account_balance()
        return {"sandbox": sandbox, "available": str(answer["AvailableBalance"])}
