"""Prolific: a study whose external URL is our page, with PROLIFIC_PID, STUDY_ID, SESSION_ID.

A participant does up to `items_per_session` items; our server issues a completion code per
submission only once the answers are stored, and the sync checks that the code a submission
was entered with is the one we issued. A block puts the participant in the experimenter's
participant groups of blocked participants, one per workspace they publish in (a group
belongs to a workspace, as a study does), which every study we publish for them excludes
(a participant_group_blocklist filter), so they cannot take part in any study published with
it. Studies published before the group existed (before this version, or before the
experimenter's first study in that workspace) keep no such filter: Prolific lets a published
study change only its internal name, places and submissions config. notify sends Prolific
messages (one bulk message for several participants of a study). The calls are in
prolific_api.py and prolific_participants.py, what Prolific accepts (ids, amounts, the study
URL, completion codes) in prolific_checks.py.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from collections.abc import Mapping, MutableMapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, ClassVar

from crowd.exceptions import ConfigurationError, ProlificError, ValidationError
from crowd.platforms.providers import prolific_api, prolific_checks
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

ID = re.compile(r"^[0-9a-f]{24}$")
STATES = {
    "ACTIVE": "active",
    "RESERVED": "active",
    "AWAITING REVIEW": "submitted",
    "APPROVED": "approved",
    "REJECTED": "rejected",
    "RETURNED": "returned",
    "TIMED-OUT": "timed_out",
}
# Prolific wants a rejection explained in at least 100 characters; a reviewer's short reason
# is followed by this.
REJECTION_NOTE = (
    " (The researcher reviewed this submission and found that it did not meet the study's "
    "instructions or quality checks.)"
)
OPTION_HELP: dict[str, str] = {
    "reward": "pay per place in the account's currency, e.g. '1.50' (required)",
    "items_per_session": "items a participant does (default 10)",
    "places": "number of places (default: enough for every item's annotations)",
    "estimated_minutes": "estimated completion time in minutes (default 10)",
    "maximum_minutes": "time limit in minutes (default: Prolific's)",
    "name": "study name shown to participants (default: the title workers see, worker_page.title)",
    "description": "study description",
    "devices": "list of desktop, tablet, mobile (default all)",
    "filters": "Prolific eligibility filters, passed through (the group of participants the "
    "experimenter blocked in the study's workspace is added as a participant_group_blocklist "
    "filter)",
    "project": "Prolific project id: the study goes there, and its workspace is the one "
    "whose group of blocked participants the study excludes",
    "workspace_id": "workspace id, when no project is given: where the group of blocked "
    "participants is made and looked for (default: the token's only workspace; needed when "
    "it has several), and for `crowd prolific balance`",
}
DEFAULTS: dict[str, Any] = {
    "items_per_session": 10,
    "places": None,
    "estimated_minutes": 10,
    "maximum_minutes": None,
    "name": None,
    "description": "Read short texts and answer questions about them.",
    "devices": list(prolific_checks.DEVICES),
    "filters": None,
    "project": None,
    "workspace_id": None,
}


def to_cents(value: Any, where: str = "reward") -> int:
    """'1.50' (currency units) as 150 cents; at most two decimals."""
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValidationError(f"{value!r} is not an amount like '1.50'", where) from None
    if not amount.is_finite() or amount <= 0 or amount != amount.quantize(Decimal("0.01")):
        raise ValidationError(f"{value!r} must be more than 0, in whole cents", where)
    return int(amount * 100)


def study_code(secret: str, token: str) -> str:
    """The study-wide completion code Prolific requires: derived from our secret, never shown
    (participants get per-submission codes; a submission entered with this one is flagged)."""
    digest = hmac.new(secret.encode(), f"study:{token}".encode(), hashlib.sha256).hexdigest()
    return "S" + digest[:11].upper()


class ProlificProvider(Provider):
    name: ClassVar[str] = "prolific"
    remote: ClassVar[bool] = True
    external_page: ClassVar[bool] = True
    # The experimenter's participant group of blocked workers, which their studies exclude.
    keeps_account: ClassVar[bool] = True
    batched: ClassVar[Mapping[str, int]] = {"notify": prolific_checks.MAX_MESSAGE_RECIPIENTS}

    def validate_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        checked = with_defaults("Prolific", options, OPTION_HELP, DEFAULTS, "1.50")
        checked["reward_cents"] = to_cents(checked.pop("reward"))
        for name, high in (("items_per_session", 1000), ("estimated_minutes", 600)):
            value = checked[name]
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ValidationError(f"{value!r} is not a whole number in 1..{high}", name)
        for name in ("places", "maximum_minutes"):
            value = checked[name]
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValidationError(f"{value!r} is not a whole number of at least 1", name)
        return checked

    def _client(self, settings: Settings) -> prolific_api.ProlificClient:
        if not settings.prolific_token:
            raise ConfigurationError(
                "set CROWD_PROLIFIC_TOKEN to a Prolific API token (Prolific: Settings > "
                "API tokens) to publish to Prolific"
            )
        return prolific_api.ProlificClient(settings.prolific_token, settings.prolific_api_url)

    def _places(self, study: StudyRef, options: Mapping[str, Any]) -> int:
        """Places enough for every open place of the study's items, unless the options say."""
        return int(
            options["places"] or max(1, math.ceil(study.work_slots / options["items_per_session"]))
        )

    def estimate(self, study: StudyRef, options: Mapping[str, Any]) -> dict[str, Any]:
        places = self._places(study, options)
        cents = places * options["reward_cents"]
        return {
            "cost": f"{cents // 100}.{cents % 100:02d}",
            "currency": "the account's currency",
            "lines": [
                f"{places} place(s) of {options['items_per_session']} item(s), about "
                f"{options['estimated_minutes']} minute(s) each",
                f"{options['reward_cents'] / 100:.2f} per place, {cents / 100:.2f} in rewards",
                "plus Prolific's service fee, which Prolific shows before you pay",
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
        places = self._places(study, options)
        page = f"{base_url}/ext/prolific/{study.id}"
        # http only against a stand-in of Prolific (development): Prolific wants https.
        development = settings.prolific_api_url != prolific_api.DEFAULT_BASE_URL
        client = self._client(settings)
        group = study.account.get("exclusion_group_id")
        workspace = study.account.get("workspace_id")
        filters = options["filters"]
        if group:
            # The experimenter's blocked workers, then and later, never see the study.
            filters = prolific_checks.excluding_group(filters, str(group))
        created = client.create_study(
            name=options["name"] or study.title or study.hit_type,
            internal_name=token,
            description=options["description"],
            external_study_url=prolific_checks.external_url(page, allow_http=development),
            # The study-wide code is never shown: our server hands out one per submission.
            completion_code=study_code(settings.secret_key, token),
            total_available_places=places,
            estimated_completion_time=options["estimated_minutes"],
            maximum_allowed_time=options["maximum_minutes"],
            reward=options["reward_cents"],
            device_compatibility=options["devices"],
            filters=filters,
            project=options["project"],
            allow_http=development,
        )
        study_id = str(created["id"])
        client.publish_study(study_id)
        return Publication(
            provider=self.name,
            urls={"page": page, "study": f"https://app.prolific.com/researcher/studies/{study_id}"},
            remote={
                "study_id": study_id,
                "places": places,
                "exclusion_group_id": group,
                "workspace_id": workspace,
            },
            tasks=(RemoteTaskSpec(remote_id=study_id, places=places),),
        )

    def bind(self, args: Mapping[str, str], settings: Settings) -> Binding | None:
        if not args.get("PROLIFIC_PID") and not args.get("SESSION_ID"):
            return None  # the researcher's preview of the study
        values = {}
        for name in ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID"):
            value = args.get(name, "")
            if not ID.match(value):
                raise ValidationError(f"Prolific's {name} is missing or malformed", name)
            values[name] = value
        return Binding(
            worker_external_id=values["PROLIFIC_PID"],
            session_remote_id=values["SESSION_ID"],
            task_remote_id=values["STUDY_ID"],
        )

    def completion(self, settings: Settings, binding: Binding, code: str) -> dict[str, Any]:
        return {"kind": "code", "code": code, "url": prolific_checks.completion_url(code)}

    def perform(
        self,
        settings: Settings,
        action: str,
        target: ActionTarget,
        params: Mapping[str, Any],
        ledger: MutableMapping[str, str] | None = None,
    ) -> dict[str, Any]:
        client = self._client(settings)
        submission = target.submission_id or target.session_remote_id or ""
        if action == "approve":
            client.approve(submission)
            return {}
        if action == "reject":
            message = str(params.get("feedback") or "").strip()
            if len(message) < prolific_checks.MIN_REJECTION_MESSAGE:
                message += REJECTION_NOTE
            client.reject(submission, message, str(params.get("category") or "LOW_EFFORT"))
            return {}
        if action == "bonus":
            if ledger is None:
                raise ValidationError("a Prolific bonus needs a ledger to be paid once", "ledger")
            bonus_id = client.bonus(
                target.task_remote_id or "",
                target.worker_external_id,
                to_cents(params["amount"], "amount"),
                str(params["token"]),
                ledger,
            )
            return {"bonus_id": bonus_id}
        if action == "notify":
            # An empty ledger is falsy (it has a length) but still the one to note sends in.
            return self.perform_many(
                settings, action, [target], params, ledger if ledger is not None else {}
            )
        if action in ("block", "unblock"):
            return self._exclude(client, action, target)
        if action == "grant_qualification":
            # Prolific has no qualifications: a follow-up study admits a participant group
            # (participant_group_allowlist) instead.
            return {"platform": "Prolific has no qualification call: kept on our side only"}
        raise ValidationError(f"Prolific has no action {action!r}", "action")

    def _exclude(
        self, client: prolific_api.ProlificClient, action: str, target: ActionTarget
    ) -> dict[str, Any]:
        """Put a blocked participant in each of the experimenter's exclusion groups, one per
        workspace (every study we publish for them leaves its workspace's group out), or take
        them out of every one on unblock. Both are safe to repeat after a partial failure."""
        groups = {
            workspace: str(account["exclusion_group_id"])
            for workspace, account in target.accounts.items()
            if account.get("exclusion_group_id")
        }
        if not groups:
            if action == "unblock":
                return {"platform": "no exclusion group on Prolific yet: nothing to undo there"}
            raise ConfigurationError(
                "the experimenter has no Prolific exclusion group to block the participant in: "
                "it is made on their next Prolific publish or block"
            )
        who = [target.worker_external_id]
        for group in groups.values():
            if action == "block":
                client.add_to_group(group, who)
            else:
                client.remove_from_group(group, who)
        return {"exclusion_groups": groups}

    def perform_many(
        self,
        settings: Settings,
        action: str,
        targets: Sequence[ActionTarget],
        params: Mapping[str, Any],
        ledger: MutableMapping[str, str],
    ) -> dict[str, Any]:
        """A message to participants: one message, or a bulk one, per Prolific study they took
        part in (a message is about a study). The ledger notes who got it, per study."""
        if action != "notify":
            return super().perform_many(settings, action, targets, params, ledger)
        subject = str(params.get("subject") or "").strip()
        message = str(params.get("message") or "").strip()
        # Prolific's messages have no subject line: it heads the text.
        body = f"{subject}\n\n{message}" if subject else message
        by_study: dict[str, list[str]] = {}
        for target in targets:
            study_id = target.task_remote_id or str(target.publication.get("study_id") or "")
            if not study_id:
                raise ValidationError(
                    f"participant {target.worker_external_id} has no Prolific study to be "
                    "messaged about: publish the study to Prolific first",
                    "study_id",
                )
            by_study.setdefault(study_id, []).append(target.worker_external_id)
        client = self._client(settings)
        for study_id, participants in by_study.items():
            key = f"message {study_id}"
            sent = ledger.get(key, "").split()
            todo = [p for p in dict.fromkeys(participants) if p not in sent]
            if todo:
                client.send_message(todo, body, study_id)
                ledger[key] = " ".join([*sent, *todo])
        return {"messaged": {study: sorted(set(ids)) for study, ids in by_study.items()}}

    def account_workspace(self, settings: Settings, options: Mapping[str, Any]) -> str:
        """The workspace of a study published with these options: its project's (Prolific's
        GET /projects/{id}/ names it), else the workspace_id option, else the token's only
        workspace. A block passes its publication, which names the workspace it found."""
        named = str(options.get("workspace_id") or "")
        project = str(options.get("project") or "")
        if not project:
            return named or _only_workspace(self._client(settings))
        try:
            found = str(self._client(settings).get_project(project).get("workspace") or "")
        except ProlificError as error:
            if error.http_status != 404:
                raise
            raise ValidationError(
                f"Prolific has no project {project} that this token may see: copy the id "
                "from the address of the project's page in Prolific",
                "project",
            ) from None
        if named and found and named != found:
            raise ValidationError(
                f"project {project} is in workspace {found}, not {named}: leave workspace_id "
                "out (the project's workspace is used) or name the project's",
                "workspace_id",
            )
        return found or named or _only_workspace(self._client(settings))

    def prepare_account(
        self,
        settings: Settings,
        account: Mapping[str, Any],
        workspace: str,
        owner: str,
        blocked: Sequence[str],
    ) -> dict[str, Any]:
        """The experimenter's exclusion group in a workspace, made once there with the
        participants they had blocked already."""
        if account.get("exclusion_group_id"):
            return dict(account)
        client = self._client(settings)
        group = client.create_group(
            name=f"crowd: blocked by {owner}"[: prolific_checks.MAX_NAME],
            workspace_id=workspace,
            description=(
                f"Participants that {owner} blocked in crowd; every study crowd publishes for "
                f"{owner} excludes this group. Unblock them with `crowd review unblock`."
            ),
            participant_ids=[p for p in dict.fromkeys(blocked) if ID.match(p)],
        )
        return {**account, "exclusion_group_id": str(group["id"]), "workspace_id": workspace}

    def sync(
        self, settings: Settings, publication: Mapping[str, Any], task_ids: Sequence[str]
    ) -> list[RemoteSubmission]:
        client = self._client(settings)
        found = []
        for study_id in task_ids:
            for submission in client.list_submissions(study_id):
                raw = str(submission.get("status", ""))
                found.append(
                    RemoteSubmission(
                        remote_id=str(submission["id"]),
                        task_remote_id=study_id,
                        worker_external_id=str(submission.get("participant_id", "")),
                        state=STATES.get(raw, "active"),
                        raw_state=raw,
                        submission_id=str(submission["id"]),
                        code=submission.get("study_code") or None,
                    )
                )
        return found

    def reclaim(
        self, settings: Settings, publication: Mapping[str, Any], task_id: str, count: int
    ) -> int:
        """Reopen `count` places of returned or timed-out submissions where Prolific did not
        (a study that already filled its places); returns how many were added."""
        client = self._client(settings)
        study = client.get_study(task_id)
        if study.get("status") not in ("COMPLETED", "AWAITING REVIEW"):
            return 0  # an active study gets such places back from Prolific itself
        client.increase_places(task_id, int(study["total_available_places"]) + count)
        return count

    def expire(self, settings: Settings, publication: Mapping[str, Any], task_id: str) -> None:
        self._client(settings).pause_study(task_id)

    def extend(
        self,
        settings: Settings,
        publication: Mapping[str, Any],
        task_id: str,
        seconds: int,
        more_places: int,
        token: str,
    ) -> None:
        client = self._client(settings)
        study = client.get_study(task_id)
        if more_places:
            client.increase_places(task_id, int(study["total_available_places"]) + more_places)
        if study.get("status") == "PAUSED":
            client.resume_study(task_id)
        return None

    def balance(self, settings: Settings, options: Mapping[str, Any]) -> dict[str, Any]:
        workspace = options.get("workspace_id")
        if not workspace:
            return {"user": self._client(settings).me().get("id")}
        return self._client(settings).balance(str(workspace))


def _only_workspace(client: prolific_api.ProlificClient) -> str:
    found = [str(w.get("id")) for w in client.workspaces() if w.get("id")]
    if len(found) != 1:
        raise ValidationError(
            f"the Prolific token's researcher is in {len(found)} workspaces: publish with the "
            "option project (the study goes to its workspace) or workspace_id, so that the "
            "study excludes the participants blocked in that workspace",
            "workspace_id",
        )
    return found[0]
