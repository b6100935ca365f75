"""The provider interface: where a study's workers come from, and what we can do to them there.

A provider is the platform side only: it publishes, binds the platform's query parameters
to a worker, makes platform calls and reads the platform's view of the work. What we keep
about it (publications, sessions, the calls we owe) lives in crowd/platforms/, which
calls these methods. Platform calls (approve, reject, bonus, block, ...) are made by a job
after the decision is committed; crowds without money or accounts (the open web, a
simulation) have nothing to call and keep the defaults.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from crowd.exceptions import InvalidAction, ValidationError

if TYPE_CHECKING:
    from crowd.settings import Settings

# The platform calls a reviewer's decisions turn into.
ACTIONS = ("approve", "reject", "bonus", "block", "unblock", "notify", "grant_qualification")


@dataclass(frozen=True)
class StudyRef:
    """The plain facts a provider needs about a study."""

    id: int
    name: str
    hit_type: str
    config: dict[str, Any]
    # Answers the study still needs: real items times annotations per item.
    work_slots: int = 0
    title: str = ""
    # When the study was made: with its id, what tells it apart from another database's
    # study of the same id on one platform account (MTurk: its HITs' request tokens).
    created_at: datetime | None = None
    # Whether an earlier try of this publication may have made tasks on the platform (it
    # began, and none was recorded): the provider then looks for them before making more.
    retried: bool = False
    # What we keep of the experimenter's account in the platform's workspace published to
    # (Prolific: the participant group of the workers they blocked), set up by
    # Provider.prepare_account.
    account: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RemoteTaskSpec:
    """A unit of work the platform made for us: an MTurk HIT, a Prolific study."""

    remote_id: str
    places: int
    expires_at: datetime | None = None


@dataclass(frozen=True)
class Publication:
    """What publishing a study to a provider produced: links to give workers, remote ids."""

    provider: str
    urls: dict[str, str] = field(default_factory=dict)
    remote: dict[str, Any] = field(default_factory=dict)
    tasks: tuple[RemoteTaskSpec, ...] = ()


@dataclass(frozen=True)
class Binding:
    """Who is on our page, according to the platform's query parameters."""

    worker_external_id: str
    session_remote_id: str
    task_remote_id: str
    submit_to: str | None = None


@dataclass(frozen=True)
class RemoteSubmission:
    """The platform's view of one session (an MTurk assignment, a Prolific submission).

    `state` is one of: active, submitted, approved, rejected, returned, timed_out.
    """

    remote_id: str
    task_remote_id: str
    worker_external_id: str
    state: str
    raw_state: str
    submission_id: str | None = None
    # Fields the page posted to the platform with the work (MTurk's Answer XML).
    answers: dict[str, str] = field(default_factory=dict)
    # The completion code the worker entered (Prolific).
    code: str | None = None


@dataclass(frozen=True)
class ActionTarget:
    """Whom and what a platform call is about."""

    worker_external_id: str
    session_remote_id: str | None = None
    submission_id: str | None = None
    task_remote_id: str | None = None
    # How many times the call was made before: one that failed may still have happened on
    # the platform (its answer was lost).
    attempts: int = 0
    publication: Mapping[str, Any] = field(default_factory=dict)
    # What we keep of the experimenter's account on the platform, by workspace (see
    # StudyRef.account): a block or unblock reaches every one.
    accounts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def with_defaults(
    label: str,
    options: Mapping[str, Any],
    described: Mapping[str, str],
    defaults: Mapping[str, Any],
    reward_example: str,
) -> dict[str, Any]:
    """A platform's publish options over its defaults: unknown names and a missing reward
    are refused with the list of known options."""
    unknown = sorted(set(options) - set(described))
    if unknown:
        raise ValidationError(
            f"unknown {label} options {unknown}; known: {', '.join(described)}", "options"
        )
    if "reward" not in options:
        raise ValidationError(f"{label} needs a reward, e.g. reward='{reward_example}'", "reward")
    return {**defaults, **options}


class Provider(ABC):
    """One crowd. The defaults fit crowds where we are the only record (no payments)."""

    name: ClassVar[str]
    # Whether the provider has its own accounts and payments that actions must reach.
    remote: ClassVar[bool] = False
    # Whether anyone may join as a worker (True) or only the experimenter's tools (False).
    open_signup: ClassVar[bool] = False
    # Whether workers arrive on our external page with the platform's query parameters.
    external_page: ClassVar[bool] = False
    # Whether we keep something of each experimenter's account on the platform, per workspace
    # (Prolific: the group of the workers they blocked), set up by prepare_account before
    # publishing and before a block.
    keeps_account: ClassVar[bool] = False
    # Actions one call makes for several workers, with the most per call (Prolific's bulk
    # message): queued ones of a study with the same params go out together (perform_many).
    batched: ClassVar[Mapping[str, int]] = {}

    def validate_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Publish options with defaults filled in; this crowd takes none."""
        if options:
            raise ValidationError(
                f"the {self.name} provider takes no publish options (got {sorted(options)})",
                "options",
            )
        return {}

    def estimate(self, study: StudyRef, options: Mapping[str, Any]) -> dict[str, Any]:
        """What publishing with these (validated) options would ask for and cost, before
        anything is sent: {"cost": str or None, "currency": ..., "lines": [text, ...]}."""
        return {"cost": None, "currency": None, "lines": ["free: no platform is paid"]}

    def publish(
        self,
        settings: Settings,
        study: StudyRef,
        base_url: str,
        options: Mapping[str, Any],
        token: str,
    ) -> Publication:
        """Open the study on the platform; `token` makes a retried publish create nothing new."""
        return Publication(provider=self.name, urls={"task": f"{base_url}/work/{study.id}"})

    def bind(self, args: Mapping[str, str], settings: Settings) -> Binding | None:
        """The worker on our external page from the platform's query parameters; None for a
        preview (the platform shows the task before the worker accepts it)."""
        raise InvalidAction(f"{self.name} workers do not arrive through an external page")

    def completion(self, settings: Settings, binding: Binding, code: str) -> dict[str, Any]:
        """How the page hands finished work back to the platform."""
        return {"kind": "none"}

    def perform(
        self,
        settings: Settings,
        action: str,
        target: ActionTarget,
        params: Mapping[str, Any],
        ledger: MutableMapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Make one platform call (see ACTIONS); returns facts worth keeping about it.

        `ledger` is a durable store for platforms whose calls carry no request token (a
        Prolific bonus records each step in it before the next call).
        """
        return {}

    def perform_many(
        self,
        settings: Settings,
        action: str,
        targets: Sequence[ActionTarget],
        params: Mapping[str, Any],
        ledger: MutableMapping[str, str],
    ) -> dict[str, Any]:
        """Make one of the `batched` actions for several workers at once; `ledger` notes what
        went out, so that a retry after a partial failure sends only the rest."""
        raise InvalidAction(f"{self.name} makes {action} for one worker at a time")

    def account_workspace(self, settings: Settings, options: Mapping[str, Any]) -> str:
        """The platform's workspace a publication with these options is in (see
        keeps_account); "" for a platform without workspaces."""
        return ""

    def prepare_account(
        self,
        settings: Settings,
        account: Mapping[str, Any],
        workspace: str,
        owner: str,
        blocked: Sequence[str],
    ) -> dict[str, Any]:
        """What the experimenter's account in a workspace of the platform needs before
        publishing or blocking, made once (see keeps_account): `account` is what we keep of
        it, `owner` the experimenter's name, `blocked` the external ids of the workers they
        blocked. Returns `account` with whatever was made."""
        return dict(account)

    def check_action(self, action: str, params: Mapping[str, Any]) -> None:
        """Refuse, when it is decided, a call the platform would refuse when it is made."""

    def reclaim(
        self, settings: Settings, publication: Mapping[str, Any], task_id: str, count: int
    ) -> int:
        """Reopen places of sessions that ended without work, where the platform does not."""
        return 0

    def sync(
        self, settings: Settings, publication: Mapping[str, Any], task_ids: Sequence[str]
    ) -> list[RemoteSubmission]:
        """The platform's sessions of these tasks, every page of them."""
        return []

    def expire(self, settings: Settings, publication: Mapping[str, Any], task_id: str) -> None:
        """Stop the task from taking new workers."""
        raise InvalidAction(f"{self.name} has no tasks to expire")

    def extend(
        self,
        settings: Settings,
        publication: Mapping[str, Any],
        task_id: str,
        seconds: int,
        more_places: int,
        token: str,
    ) -> datetime | None:
        """Keep the task open `seconds` longer and/or add places; the new expiry."""
        raise InvalidAction(f"{self.name} has no tasks to extend")

    def balance(self, settings: Settings, options: Mapping[str, Any]) -> dict[str, Any]:
        """The account's money, where the platform has an account."""
        raise InvalidAction(f"{self.name} has no account balance")
