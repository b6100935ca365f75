"""The provider interface: where a study's workers come from, and what we can do to them there.

Platform actions (approve, reject, bonus, block) go through the provider so that they reach
the crowd platform once there is one behind it (MTurk, Prolific); for crowds without money or
accounts (the open web, a simulation) they are recorded by us alone.
"""

from __future__ import annotations

from abc import ABC
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Publication:
    """What publishing a study to a provider produced: links to give workers, remote ids."""

    provider: str
    urls: dict[str, str] = field(default_factory=dict)
    remote: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StudyRef:
    """The plain facts a provider needs about a study."""

    id: int
    name: str
    hit_type: str
    config: dict[str, Any]


class Provider(ABC):
    """One crowd. The defaults fit crowds where we are the only record (no payments)."""

    name: ClassVar[str]
    # Whether the provider has its own accounts and payments that actions must reach.
    remote: ClassVar[bool] = False
    # Whether anyone may join as a worker (True) or only the experimenter's tools (False).
    open_signup: ClassVar[bool] = False

    def publish(self, study: StudyRef, base_url: str) -> Publication:
        return Publication(provider=self.name, urls={"task": f"{base_url}/work/{study.id}"})

    def approve(self, worker_external_id: str, assignment_id: int) -> None:
        """Approve (pay) an assignment on the platform."""

    def reject(self, worker_external_id: str, assignment_id: int, feedback: str) -> None:
        """Reject an assignment on the platform, telling the worker why."""

    def bonus(self, worker_external_id: str, amount: str, reason: str, token: str) -> None:
        """Pay a bonus; `token` makes a retried call pay once."""

    def block(self, worker_external_id: str, reason: str) -> None:
        """Stop the worker from taking our work on the platform."""

    def unblock(self, worker_external_id: str) -> None:
        """Undo block()."""
