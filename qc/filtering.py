"""The filtered set: an analysis runs on every response and again without excluded workers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]


def full_and_filtered(
    rows: Sequence[Row],
    excluded_workers: set[str],
    summarize: Callable[[Sequence[Row]], dict[str, Any]],
) -> dict[str, Any]:
    """`summarize` on all rows and on the rows of workers QC kept, with what was left out.

    >>> rows = [{"worker": "a", "x": 1}, {"worker": "b", "x": 3}]
    >>> out = full_and_filtered(rows, {"b"}, lambda rs: {"n": len(rs)})
    >>> out["full"], out["filtered"], out["excluded"]
    ({'n': 2}, {'n': 1}, {'n_workers': 1, 'n_responses': 1})
    """
    excluded = {str(worker) for worker in excluded_workers}
    kept = [row for row in rows if str(row["worker"]) not in excluded]
    present = {str(row["worker"]) for row in rows}
    return {
        "full": summarize(rows),
        "filtered": summarize(kept),
        "excluded": {"n_workers": len(excluded & present), "n_responses": len(rows) - len(kept)},
    }
