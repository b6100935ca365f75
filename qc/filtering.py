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

    Live workers and the raters of imported answers are left out alike. Where rows carry a
    "rater_group", `excluded` also says what was left out of each group.

    >>> rows = [{"worker": "a", "x": 1}, {"worker": "b", "x": 3}]
    >>> out = full_and_filtered(rows, {"b"}, lambda rs: {"n": len(rs)})
    >>> out["full"], out["filtered"], out["excluded"]
    ({'n': 2}, {'n': 1}, {'n_workers': 1, 'n_responses': 1})
    >>> grouped = [{**rows[0], "rater_group": "crowd"}, {**rows[1], "rater_group": "roft"}]
    >>> full_and_filtered(grouped, {"b"}, len)["excluded"]["by_rater_group"]
    {'crowd': {'n_workers': 0, 'n_responses': 0}, 'roft': {'n_workers': 1, 'n_responses': 1}}
    """
    excluded = {str(worker) for worker in excluded_workers}
    kept = [row for row in rows if str(row["worker"]) not in excluded]
    present = {str(row["worker"]) for row in rows}
    out: dict[str, Any] = {
        "full": summarize(rows),
        "filtered": summarize(kept),
        "excluded": {"n_workers": len(excluded & present), "n_responses": len(rows) - len(kept)},
    }
    groups: dict[str, tuple[set[str], int]] = {}
    for row in rows:
        if row.get("rater_group") is None:
            continue
        worker = str(row["worker"])
        left_out, n = groups.get(str(row["rater_group"]), (set(), 0))
        if worker in excluded:
            left_out.add(worker)
            n += 1
        groups[str(row["rater_group"])] = (left_out, n)
    if groups:
        out["excluded"]["by_rater_group"] = {
            group: {"n_workers": len(left_out), "n_responses": n}
            for group, (left_out, n) in sorted(groups.items())
        }
    return out
