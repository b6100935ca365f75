"""The online label schedule of Ziegler et al. (2019), section 2.2.

While the policy trains, labels are wanted before step n at the rate

    l(n) = N0 + (N - N0) * (1 - (1 - n / N_pi)^2)

with N0 labels up front, N labels in all and N_pi policy steps (after which all N are
wanted), and at least 1000 label requests should be outstanding at any time so labelers
never wait for work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from crowd.exceptions import InvalidConfig

MIN_OUTSTANDING = 1000


@dataclass(frozen=True)
class LabelSchedule:
    """How many labels an online run wants by each policy step."""

    initial: int  # N0
    total: int  # N
    policy_steps: int  # N_pi
    min_outstanding: int = MIN_OUTSTANDING

    def __post_init__(self) -> None:
        if self.initial < 0 or self.total < self.initial:
            raise InvalidConfig("the label schedule needs 0 <= initial (N0) <= total (N)")
        if self.policy_steps < 1:
            raise InvalidConfig("the label schedule needs policy_steps (N_pi) of 1 or more")
        if self.min_outstanding < 0:
            raise InvalidConfig("min_outstanding cannot be negative")

    def labels_wanted(self, step: float) -> int:
        """l(n): labels that should be in hand before policy step `step` (rounded up)."""
        if step < 0:
            raise InvalidConfig("the policy step cannot be negative")
        fraction = min(step / self.policy_steps, 1.0)
        value = self.initial + (self.total - self.initial) * (1 - (1 - fraction) ** 2)
        # Rounded up so that l(N_pi) == N exactly, despite floating point.
        return min(self.total, math.ceil(value - 1e-9))

    def requests_to_send(self, step: float, labelled: int, outstanding: int) -> int:
        """How many new label requests to send now.

        Enough that labels in hand plus requests outstanding cover l(step), and that at least
        `min_outstanding` requests are open, but never more than the N labels in all.
        """
        if labelled < 0 or outstanding < 0:
            raise InvalidConfig("labelled and outstanding counts cannot be negative")
        wanted = self.labels_wanted(step)
        cover = wanted - labelled - outstanding
        keep_open = self.min_outstanding - outstanding
        room = self.total - labelled - outstanding
        return max(0, min(max(cover, keep_open), room))

    def to_json(self, step: float, labelled: int, outstanding: int) -> dict[str, int | float]:
        return {
            "step": step,
            "initial": self.initial,
            "total": self.total,
            "policy_steps": self.policy_steps,
            "min_outstanding": self.min_outstanding,
            "labels_wanted": self.labels_wanted(step),
            "labelled": labelled,
            "outstanding": outstanding,
            "requests_to_send": self.requests_to_send(step, labelled, outstanding),
        }
