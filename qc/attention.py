"""Attention checks: items whose text tells the worker what to answer.

The RoFT pilot served 10% of a paid worker's items as passages asking for "human" at every
step; about a quarter of paid workers failed one, and their annotations were dropped from
the "filtered set". `AttentionCheck` applies that rule to (worker, passed) results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scipy import stats

from qc.drift import GUESSER_FAILS, READER_FAILS

_DIGITS = 4  # rounding of the failure rate, as in the task analyses' JSON
# A failure rate above this is more than careful people's slips: they miss a check now and
# then (one in 30 in the QC benchmark's crowd); a worker who does not read fails most.
SLIP_RATE = 0.2
# Below this posterior of "not reading now" a worker is more probably reading than not, and
# meets checks at the study's own rate only.
DOUBT_FLOOR = 0.5


def fail_prob(failed: int, checks: int, rate: float = SLIP_RATE) -> float | None:
    """P(the worker fails checks more often than `rate`) under the Beta(1, 1) posterior of
    their failure rate; None without checks. A count of failures alone would catch careful
    workers in the end (three slips come to one careful worker in 36 over 20 checks); the
    rate does not.

    >>> round(fail_prob(3, 3), 4), round(fail_prob(3, 4), 4), round(fail_prob(3, 20), 2)
    (0.9984, 0.9933, 0.37)
    """
    if checks <= 0:
        return None
    return float(stats.beta.sf(rate, 1 + failed, 1 + checks - failed))


def doubt_check_rate(
    not_reading: float | None, doubt_checks: float, checks_since: tuple[int, int] = (0, 0)
) -> float:
    """The chance that a worker's next item is an extra attention check, given `not_reading`,
    the posterior that they are not reading now (qc.drift), qc.crowd.doubt_checks and
    `checks_since`, the checks (passed, failed) since the posterior's most probable switch.

    A check is the sharpest test there is of whether someone reads: a reader fails about one
    in ten at most, a worker who does not fails most. So while QC doubts a worker (posterior
    at least DOUBT_FLOOR) they meet checks at doubt_checks x the posterior, each one moving
    the posterior a long way: a reader's pass clears most of the doubt (odds / 2.25), a
    guesser's failure adds to it (odds x 6). Without doubt, the study's rate alone.

    But a worker whose answers stay at chance while they pass the checks obeys instructions
    and answers the content at random (a ring copying one answer, a paster): more checks
    will not decide them, gold will. So the extra rate is scaled by the checks' own odds of
    "not reading" since the switch, capped at 1: each pass multiplies it by
    (1 - GUESSER_FAILS) / (1 - READER_FAILS) = 0.44, each failure by 6, and the items go to
    gold (served at the rate the same doubt sets) instead.

    >>> doubt_check_rate(0.9, 0.8), doubt_check_rate(0.3, 0.8), doubt_check_rate(None, 0.8)
    (0.72, 0.0, 0.0)
    >>> doubt_check_rate(0.9, 0.8, (2, 0)), doubt_check_rate(0.9, 0.8, (2, 1))
    (0.1422, 0.72)
    """
    if not_reading is None or not_reading < DOUBT_FLOOR:
        return 0.0
    passed, failed = checks_since
    odds = ((1 - GUESSER_FAILS) / (1 - READER_FAILS)) ** passed * (
        GUESSER_FAILS / READER_FAILS
    ) ** failed
    return round(doubt_checks * not_reading * min(1.0, odds), 4)


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


def attention_summary(
    rows: Sequence[Mapping[str, Any]], passed: Callable[[Mapping[str, Any]], bool]
) -> dict[str, Any]:
    """How many attention checks were answered and failed, and by which workers.

    `rows` are a task's response rows; those of kind "attention" are the checks, and
    `passed(row)` decides each one.

    Example:
        >>> rows = [{"kind": "attention", "worker": "a", "ok": True},
        ...         {"kind": "attention", "worker": "b", "ok": False},
        ...         {"kind": "real", "worker": "c", "ok": False}]
        >>> summary = attention_summary(rows, lambda row: row["ok"])
        >>> summary["n_checks"], summary["failed_workers"], summary["worker_failure_rate"]
        (2, ['b'], 0.5)
    """
    checks = [row for row in rows if row["kind"] == "attention"]
    checked = {str(row["worker"]) for row in checks}
    failed_rows = [row for row in checks if not passed(row)]
    failed = sorted({str(row["worker"]) for row in failed_rows})
    return {
        "n_checks": len(checks),
        "n_failed_checks": len(failed_rows),
        "workers_checked": len(checked),
        "workers_failed": len(failed),
        "worker_failure_rate": round(len(failed) / len(checked), _DIGITS) if checked else None,
        "failed_workers": failed,
    }
