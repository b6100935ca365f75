"""Attention checks: items whose text tells the worker what to answer.

The RoFT pilot served 10% of a paid worker's items as passages asking for "human" at every
step; about a quarter of paid workers failed one, and their annotations were dropped from
the "filtered set". `AttentionCheck` applies that rule to (worker, passed) results.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class AttentionCheck:
    """Flag workers who failed more than `max_failures` attention checks.

    Example:
        >>> check = AttentionCheck().fit([("a", True), ("b", False), ("b", True)])
        >>> sorted(check.failed_workers_)
        ['b']
    """

    max_failures: int = 0
    seen_: dict[str, int] = field(default_factory=dict, init=False)
    failed_: dict[str, int] = field(default_factory=dict, init=False)
    failed_workers_: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        if self.max_failures < 0:
            raise ValueError("max_failures must be 0 or more")

    def fit(self, results: Iterable[tuple[str, bool]]) -> AttentionCheck:
        seen: dict[str, int] = {}
        failed: dict[str, int] = {}
        for worker, passed in results:
            seen[worker] = seen.get(worker, 0) + 1
            if not passed:
                failed[worker] = failed.get(worker, 0) + 1
        self.seen_, self.failed_ = seen, failed
        self.failed_workers_ = {w for w, n in failed.items() if n > self.max_failures}
        return self

    def fit_predict(self, results: Iterable[tuple[str, bool]]) -> set[str]:
        return self.fit(results).failed_workers_
