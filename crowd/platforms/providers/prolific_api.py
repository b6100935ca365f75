"""The client of a Prolific provider: studies, places, submissions, decisions and bonuses
(messages and participant groups are in prolific_participants.py).

A thin client over Prolific's researcher API v1 (https://docs.prolific.com/api-reference),
through `requests`, authenticated with ``Authorization: Token <token>``. Arguments are checked
before any request goes out, so a bad id or amount fails here with a hint; whatever Prolific
refuses or fails comes back as ProlificError with its HTTP status and error detail.

Retries: a call is sent again after a connection error or a 5xx only where repeating it cannot
do the thing twice: reads, PATCHes that set an absolute value, submission transitions (which
Prolific documents as idempotent), and creating a bonus (which pays nothing until it is paid).
A 429, and a connection that was never made, are retried for every call: Prolific did nothing.
Publishing and paying are never blindly repeated; see publish_study and bonus.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import NewConnectionError

from crowd.exceptions import ConfigurationError, ProlificError, ValidationError
from crowd.platforms.providers.prolific_checks import (
    DEVICES,
    MAX_BONUS,
    MAX_DESCRIPTION,
    MAX_ESTIMATED_MINUTES,
    MAX_MESSAGE,
    MAX_NAME,
    MAX_PAGE_SIZE,
    MAX_PLACES,
    MAX_REWARD,
    MIN_REJECTION_MESSAGE,
    REJECTION_CATEGORIES,
    STUDY_CODE,
    SUBMISSION_STATUSES,
    URL_PARAMETERS,
    check_cents,
    check_object_id,
    check_text,
    check_url,
    check_whole,
)
from crowd.platforms.providers.prolific_participants import ParticipantCalls

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.prolific.com"
API_PREFIX = "/api/v1"
TOKEN_PAGE = "https://app.prolific.com/researcher/tokens/"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")

# Bounds a listing whatever the next-page links say (a million submissions at 100 a page).
MAX_PAGES = 10_000
MAX_TOKEN = 200

MAYBE_DONE = "; it may have taken effect, and is not repeated since doing it twice is unsafe"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 30.0


def _describe(detail: Any) -> str:
    if isinstance(detail, dict):
        return "; ".join(
            f"{field}: {', '.join(map(str, messages)) if isinstance(messages, list) else messages}"
            for field, messages in detail.items()
        )
    if isinstance(detail, list):
        return "; ".join(map(str, detail))
    return str(detail)


def _never_sent(error: requests.RequestException) -> bool:
    """Whether the request failed before reaching Prolific, so that it did nothing there."""
    if isinstance(error, requests.ConnectTimeout):
        return True
    reason = error.args[0] if error.args else None
    return isinstance(getattr(reason, "reason", reason), NewConnectionError)


class ProlificClient(ParticipantCalls):
    """Prolific's researcher API for one token; one per thread (a requests.Session is not
    documented as thread-safe)."""

    def __init__(
        self,
        token: str,
        base_url: str = DEFAULT_BASE_URL,
        session: requests.Session | None = None,
        timeout: float = 30.0,
        attempts: int = 4,
        backoff_s: float = 0.5,
    ) -> None:
        if not isinstance(token, str) or not token.strip() or any(c.isspace() for c in token):
            raise ConfigurationError(
                f"the Prolific API token is empty or has spaces: create one at {TOKEN_PAGE}"
            )
        parts = urlsplit(base_url)
        local = parts.scheme == "http" and parts.hostname in LOCAL_HOSTS
        if not (parts.scheme == "https" or local) or not parts.hostname or parts.path.strip("/"):
            raise ConfigurationError(
                f"Prolific base URL {base_url!r} must be an https origin without a path, e.g. "
                f"{DEFAULT_BASE_URL} (the client adds {API_PREFIX}/); plain http is only for "
                "a local stand-in, since the token travels with every request"
            )
        self.token = token
        self.base_url = f"{parts.scheme}://{parts.netloc}"
        self.session = session or requests.Session()
        self.timeout = timeout
        self.attempts = check_whole(attempts, "attempts", 1, 10)
        self.backoff_s = backoff_s

    # -- transport -------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        retry: bool,
        json: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        """One API call, sent up to `attempts` times; the decoded JSON answer, or None."""
        url = path if path.startswith(self.base_url + "/") else self.base_url + API_PREFIX + path
        where = f"{method} {urlsplit(url).path}"
        headers = {"Authorization": f"Token {self.token}", "Accept": "application/json"}
        for attempt in range(1, self.attempts + 1):
            last = attempt == self.attempts
            try:
                response = self.session.request(
                    method, url, json=json, params=params, headers=headers, timeout=self.timeout
                )
            except (requests.ConnectionError, requests.Timeout) as error:
                if not last and (retry or _never_sent(error)):
                    log.warning("no answer to %s (try %d): %s; retrying", where, attempt, error)
                    self._pause(attempt, None)
                    continue
                unsure = "" if retry or _never_sent(error) else MAYBE_DONE
                raise ProlificError(
                    f"no answer from Prolific to {where} after {attempt} tries ({error}){unsure}: "
                    "check the network, or Prolific's status at https://status.prolific.com"
                ) from error
            status = response.status_code
            if status in RETRY_STATUSES and not last and (retry or status == 429):
                log.warning("%s answered HTTP %d (try %d); retrying", where, status, attempt)
                self._pause(attempt, response.headers.get("Retry-After"))
                continue
            if status < 400:
                return response.json() if response.content and _is_json(response) else None
            raise self._error(where, response, attempt, retry)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _pause(self, attempt: int, retry_after: str | None) -> None:
        delay = self.backoff_s * 2 ** (attempt - 1)
        if retry_after and retry_after.strip().isdigit():
            delay = max(delay, min(float(retry_after), MAX_RETRY_AFTER_S))
        time.sleep(delay)

    def _error(
        self, where: str, response: requests.Response, attempts: int, retry: bool
    ) -> ProlificError:
        status = response.status_code
        detail: Any
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            error = body.get("error", body)
            detail = error.get("detail", error) if isinstance(error, dict) else error
        else:
            detail = response.text.strip()[:300] or response.reason
        said = f"HTTP {status}: {_describe(detail)}"
        if status in (401, 403):
            hint = f"check the API token (create a new one at {TOKEN_PAGE})"
            message = f"Prolific refused the token for {where} ({said}): {hint}"
        elif status == 404:
            message = (
                f"Prolific found nothing at {where} ({said}): check the id, and that it belongs "
                "to the workspace of this token"
            )
        elif status == 429:
            message = f"Prolific is rate-limiting {where} ({said}): wait a minute and try again"
        elif status >= 500:
            unsure = "" if retry else MAYBE_DONE
            message = (
                f"Prolific failed {where} ({said}) after {attempts} tries{unsure}: try again "
                "later, or see https://status.prolific.com"
            )
        else:
            message = f"Prolific refused {where} ({said}): fix the request as the detail says"
        return ProlificError(message, http_status=status, detail=detail)

    # -- account ---------------------------------------------------------------------------

    def me(self) -> dict[str, Any]:
        """The account of the token (GET /users/me/): checks the token and shows the id."""
        return self._call("GET", "/users/me/", retry=True)

    def balance(self, workspace_id: str) -> dict[str, Any]:
        """A workspace's funds, in cents/pence: total_balance, available_balance, breakdowns."""
        path = f"/workspaces/{check_object_id(workspace_id, 'workspace_id')}/balance/"
        return self._call("GET", path, retry=True)

    # -- studies ---------------------------------------------------------------------------

    def create_study(
        self,
        *,
        name: str,
        description: str,
        external_study_url: str,
        completion_code: str,
        total_available_places: int,
        estimated_completion_time: int,
        reward: int,
        internal_name: str | None = None,
        device_compatibility: Sequence[str] = DEVICES,
        maximum_allowed_time: int | None = None,
        filters: Sequence[Mapping[str, Any]] | None = None,
        project: str | None = None,
        allow_http: bool = False,
    ) -> dict[str, Any]:
        """A draft (UNPUBLISHED) study; `reward` in cents/pence, times in minutes.

        `external_study_url` comes from external_url(). `completion_code` is the study's one
        COMPLETED code, with MANUALLY_REVIEW: every submission waits for our review, where the
        per-submission code (completion_code()) is checked. Not retried after a lost answer,
        which would leave a second draft: look among the drafts before creating it again.
        """
        check_url(external_study_url, allow_http, "external_study_url")
        missing = [p for _, p in URL_PARAMETERS if p not in external_study_url]
        if missing:
            raise ValidationError(
                f"lacks {', '.join(missing)}: build it with external_url(task_url) so that "
                "our pages learn who the participant is",
                "external_study_url",
            )
        if not isinstance(completion_code, str) or not STUDY_CODE.match(completion_code):
            raise ValidationError(
                f"{completion_code!r} is not 4 to 32 capital letters and digits, e.g. 'C1A2B3C4'",
                "completion_code",
            )
        estimate = check_whole(
            estimated_completion_time,
            "estimated_completion_time",
            1,
            MAX_ESTIMATED_MINUTES,
            " of minutes",
        )
        devices = list(device_compatibility)
        if (
            not devices
            or any(d not in DEVICES for d in devices)
            or len(set(devices)) < len(devices)
        ):
            raise ValidationError(
                f"{devices!r} must name some of {', '.join(DEVICES)}, each once",
                "device_compatibility",
            )
        body: dict[str, Any] = {
            "name": check_text(name, "name", MAX_NAME),
            "internal_name": check_text(internal_name or name, "internal_name", MAX_NAME),
            "description": check_text(description, "description", MAX_DESCRIPTION),
            "external_study_url": external_study_url,
            "prolific_id_option": "url_parameters",
            "completion_codes": [
                {
                    "code": completion_code,
                    "code_type": "COMPLETED",
                    "actions": [{"action": "MANUALLY_REVIEW"}],
                }
            ],
            "total_available_places": check_whole(
                total_available_places, "total_available_places", 1, MAX_PLACES
            ),
            "estimated_completion_time": estimate,
            "reward": check_cents(reward, "reward", MAX_REWARD),
            "device_compatibility": devices,
        }
        if maximum_allowed_time is not None:
            # Documented minimum: 2 minutes + twice the estimate + twice its square root.
            least = math.ceil(2 + 2 * estimate + 2 * math.sqrt(estimate))
            body["maximum_allowed_time"] = check_whole(
                maximum_allowed_time, "maximum_allowed_time", least, 24 * 60, " of minutes"
            )
        if filters is not None:
            for index, item in enumerate(filters):
                if not isinstance(item, Mapping) or not isinstance(item.get("filter_id"), str):
                    raise ValidationError(
                        f"{item!r} is not a Prolific filter ({{'filter_id': ..., "
                        "'selected_values' or 'selected_range': ...}}): see GET /api/v1/filters/",
                        f"filters[{index}]",
                    )
            body["filters"] = [dict(item) for item in filters]
        if project is not None:
            body["project"] = check_object_id(project, "project")
        return self._call("POST", "/studies/", json=body, retry=False)

    def get_study(self, study_id: str) -> dict[str, Any]:
        """The study as Prolific has it now: status, places, reward and the rest."""
        path = f"/studies/{check_object_id(study_id, 'study_id')}/"
        return self._call("GET", path, retry=True)

    def _transition_study(
        self, study_id: str, action: str, done: tuple[str, ...]
    ) -> dict[str, Any]:
        path = f"/studies/{check_object_id(study_id, 'study_id')}/transition/"
        for attempt in range(2):
            try:
                return self._call("POST", path, json={"action": action}, retry=False)
            except ProlificError as error:
                if attempt or (error.http_status is not None and error.http_status < 500):
                    raise
            # The answer was lost: the study's status tells whether the action took place
            # (sending it again would be refused, since the study is no longer where it was).
            study = self.get_study(study_id)
            if study.get("status") in done:
                return study
        raise AssertionError("unreachable: the second try returns or raises")

    def publish_study(self, study_id: str) -> dict[str, Any]:
        """UNPUBLISHED -> ACTIVE: Prolific checks the balance, then recruits."""
        return self._transition_study(study_id, "PUBLISH", ("PUBLISHING", "ACTIVE"))

    def pause_study(self, study_id: str) -> dict[str, Any]:
        """ACTIVE -> PAUSED: no new participants; those taking part can finish."""
        return self._transition_study(study_id, "PAUSE", ("PAUSED",))

    def resume_study(self, study_id: str) -> dict[str, Any]:
        """PAUSED -> ACTIVE (Prolific's START)."""
        return self._transition_study(study_id, "START", ("ACTIVE",))

    def stop_study(self, study_id: str) -> dict[str, Any]:
        """ACTIVE or PAUSED -> COMPLETED; increase_places opens it again."""
        return self._transition_study(study_id, "STOP", ("COMPLETED",))

    def increase_places(self, study_id: str, total: int) -> dict[str, Any]:
        """Set the study's total_available_places to `total`, more than it has now.

        Prolific gives the place of a RETURNED or REJECTED submission to another participant
        by itself (API docs, "Submission object"), so do not add places for those on an active
        study. Add places for work our own checks threw away, or to reopen a COMPLETED study.
        """
        check_whole(total, "total", 1, MAX_PLACES)
        study = self.get_study(study_id)
        current = int(study.get("total_available_places") or 0)
        if total < current:
            raise ValidationError(
                f"the study has {current} places and Prolific only lets them grow: pass more "
                f"than {current}",
                "total",
            )
        if total == current:
            return study  # already done, e.g. by an earlier try whose answer was lost
        return self._call(
            "PATCH", f"/studies/{study_id}/", json={"total_available_places": total}, retry=True
        )

    # -- submissions -----------------------------------------------------------------------

    def list_submissions(
        self,
        study_id: str,
        statuses: Iterable[str] | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> list[dict[str, Any]]:
        """Every submission of the study (or those in `statuses`), across all pages."""
        wanted = None if statuses is None else set(statuses)
        for status in wanted or ():
            if status not in SUBMISSION_STATUSES:
                raise ValidationError(
                    f"{status!r} is not a submission status: use one of "
                    f"{', '.join(SUBMISSION_STATUSES)}",
                    "statuses",
                )
        size = check_whole(page_size, "page_size", 1, MAX_PAGE_SIZE)
        query = {"study": check_object_id(study_id, "study_id"), "page_size": size}
        found: list[dict[str, Any]] = []
        url, page = "/submissions/", 1
        for _ in range(MAX_PAGES):
            params = None if url.startswith("http") else {**query, "page": page}
            try:
                body = self._call("GET", url, params=params, retry=True)
            except ProlificError as error:
                # Counting pages ourselves, a page past a full last one is "Invalid page".
                if error.http_status == 404 and page > 1 and params is not None:
                    break
                raise
            results = body.get("results", [])
            found.extend(results)
            if "_links" in body:
                href = str((body["_links"].get("next") or {}).get("href") or "")
                if not href:
                    break
                if not href.startswith(self.base_url + API_PREFIX + "/"):
                    raise ProlificError(
                        f"Prolific's next-page link {href!r} leaves {self.base_url}: not "
                        "following it with the token; report this to Prolific support"
                    )
                url = href
            elif len(results) < size:
                break  # the documented answer holds only results: count pages ourselves
            else:
                page += 1
        return [s for s in found if wanted is None or s.get("status") in wanted]

    def returned_or_timed_out(
        self, study_id: str, include_rejected: bool = False
    ) -> list[dict[str, Any]]:
        """Submissions that ended without work for us: their items can go to someone else."""
        statuses = ["RETURNED", "TIMED-OUT"] + (["REJECTED"] if include_rejected else [])
        return self.list_submissions(study_id, statuses)

    def get_submission(self, submission_id: str) -> dict[str, Any]:
        """One submission, with `bonus_payments` (cents/pence) and `entered_code`."""
        path = f"/submissions/{check_object_id(submission_id, 'submission_id')}/"
        return self._call("GET", path, retry=True)

    def _transition_submission(self, submission_id: str, body: dict[str, Any]) -> dict[str, Any]:
        path = f"/submissions/{check_object_id(submission_id, 'submission_id')}/transition/"
        # Prolific documents this call as idempotent: a repeat of a done transition is ignored.
        return self._call("POST", path, json=body, retry=True)

    def approve(self, submission_id: str) -> dict[str, Any]:
        """AWAITING REVIEW -> APPROVED: the participant is paid the reward."""
        return self._transition_submission(submission_id, {"action": "APPROVE"})

    def reject(self, submission_id: str, message: str, category: str) -> dict[str, Any]:
        """AWAITING REVIEW -> REJECTED; the participant reads `message` (100+ characters)."""
        if category not in REJECTION_CATEGORIES:
            raise ValidationError(
                f"{category!r} is not a rejection category: use one of "
                f"{', '.join(REJECTION_CATEGORIES)}",
                "category",
            )
        body = {
            "action": "REJECT",
            "message": check_text(message, "message", MAX_MESSAGE, MIN_REJECTION_MESSAGE),
            "rejection_category": category,
        }
        return self._transition_submission(submission_id, body)

    # -- bonuses ---------------------------------------------------------------------------

    def create_bonus(self, study_id: str, participant_id: str, amount: int) -> dict[str, Any]:
        """Set up (not pay) a bonus of `amount` cents/pence; the answer's `id` is what to pay.

        Prolific reads the CSV amount in whole currency units ("30" pays 30.00), so the cents
        are written as a decimal here. Retried after a lost answer: an unpaid set-up costs
        nothing, and only the id we got back is ever paid.
        """
        cents = check_cents(amount, "amount", MAX_BONUS)
        participant = check_object_id(participant_id, "participant_id")
        row = f"{participant},{cents // 100}.{cents % 100:02d}\n"
        body = {"study_id": check_object_id(study_id, "study_id"), "csv_bonuses": row}
        return self._call("POST", "/submissions/bonus-payments/", json=body, retry=True)

    def pay_bonus(self, bonus_id: str) -> None:
        """Pay a bonus set up by create_bonus. Sent once only: Prolific pays every request."""
        path = f"/bulk-bonus-payments/{check_object_id(bonus_id, 'bonus_id')}/pay/"
        self._call("POST", path, retry=False)

    def bonus(
        self,
        study_id: str,
        participant_id: str,
        amount: int,
        token: str,
        ledger: MutableMapping[str, str],
    ) -> str:
        """Pay a bonus at most once per `token`, however often this is called; its bonus id.

        Prolific's pay call is not idempotent and takes no request token, so the caller keeps
        the idempotency: `ledger` is their durable store (e.g. a table keyed by token), and
        each step is written to it before the next goes out: "created <id>", "paying <id>",
        "paid <id>". A pay request whose answer was lost leaves "paying": that bonus is not
        paid again here; check the participant's bonus_payments (get_submission) once
        Prolific has processed it, then set the entry to "paid <id>", or to "created <id>" to
        pay it here.
        """
        if not isinstance(token, str) or not 1 <= len(token) <= MAX_TOKEN:
            raise ValidationError(
                f"must be 1 to {MAX_TOKEN} characters naming this one bonus, derived from our "
                "own ids (e.g. 'study-7/worker-3/streak')",
                "token",
            )
        state, _, bonus_id = ledger.get(token, "").partition(" ")
        if state == "paid":
            return bonus_id
        if state == "paying":
            raise ProlificError(
                f"bonus {token!r} (Prolific bonus {bonus_id}) was sent to be paid and no answer "
                "came back; paying again could pay twice: check the participant's "
                "bonus_payments, then set the ledger entry to 'paid <id>' or 'created <id>'"
            )
        if state not in ("", "created"):
            raise ValidationError(
                f"ledger entry {ledger[token]!r} is not 'created|paying|paid <bonus id>'", "ledger"
            )
        if not state:
            bonus_id = str(self.create_bonus(study_id, participant_id, amount)["id"])
            ledger[token] = f"created {bonus_id}"
        ledger[token] = f"paying {bonus_id}"
        try:
            self.pay_bonus(bonus_id)
        except ProlificError as error:
            if error.http_status is not None and error.http_status < 500:
                ledger[token] = f"created {bonus_id}"  # refused: nothing was paid
            raise
        ledger[token] = f"paid {bonus_id}"
        return bonus_id


def _is_json(response: requests.Response) -> bool:
    return "json" in response.headers.get("Content-Type", "")
