"""The boundary analysis of `tasks.boundary.analysis`, on columns: the same report from numpy
arrays, for studies of a million answers (`analysis.analyze` makes a dict per answer).

`analyze_columns(BoundaryColumns.from_frame(frame), excluded)` equals `analysis.analyze(rows,
excluded)` for the rows of the same responses (tests/tasks/test_boundary_columnar.py holds
the two together); each figure is computed as there, over the same values in the same order,
so means round alike.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

import numpy as np

from qc.coded import present
from tasks.base import LIVE_RATER_GROUP
from tasks.boundary.analysis import MAX_POINTS, N_POSITIONS, _histogram, _num, skill_range_of
from tasks.boundary.reasons import REASON_TAGS

KIND_CODES = {"real": 0, "gold": 1, "attention": 2}


class Frame(Protocol):
    """What the columns are made of (crowd.studies.frame.StudyFrame)."""

    worker: np.ndarray
    workers: list[str]
    item: np.ndarray
    answer: dict[str, np.ndarray]
    explanation: np.ndarray
    reasons: np.ndarray
    reason_lists: list[tuple[str, ...]]
    attention_passed: np.ndarray
    rater_group: np.ndarray
    rater_groups: list[str]
    position: np.ndarray
    item_ids: list[str]
    item_kind: list[str]
    item_category: list[str | None]
    item_expected: list[dict[str, Any]]
    item_meta: list[dict[str, Any]]


def _codes(values: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """Codes into the distinct values (in first-seen order); -1 for None."""
    index: dict[Any, int] = {}
    codes = np.fromiter(
        (-1 if v is None else index.setdefault(v, len(index)) for v in values),
        dtype=np.int32,
        count=len(values),
    )
    return codes, list(index)


@dataclass
class BoundaryColumns:
    """One entry per response; codes index the lists named after them."""

    worker: np.ndarray
    workers: list[str]
    item: np.ndarray
    kind: np.ndarray  # KIND_CODES
    guess: np.ndarray
    boundary: np.ndarray
    points: np.ndarray
    category: np.ndarray
    categories: list[str]
    generator: np.ndarray
    generators: list[str]
    decoding: np.ndarray  # NaN: none
    explanation: np.ndarray  # uint64 hash, 0: none
    reasons: np.ndarray
    reason_lists: list[tuple[str, ...]]
    position: np.ndarray  # -1: none
    attention_passed: np.ndarray  # 1, 0, -1: not recorded
    rater_group: np.ndarray
    rater_groups: list[str]

    def take(self, mask: np.ndarray) -> BoundaryColumns:
        """The responses where `mask` holds (lists shared)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value[mask] if isinstance(value, np.ndarray) else value
        return BoundaryColumns(**out)

    def __len__(self) -> int:
        return int(self.worker.size)

    @classmethod
    def from_frame(cls, frame: Frame) -> BoundaryColumns:
        n_items = len(frame.item_ids)
        kind_of = np.asarray([KIND_CODES.get(k, -1) for k in frame.item_kind], dtype=np.int8)
        if n_items and (kind_of < 0).any():
            bad = frame.item_kind[int(np.flatnonzero(kind_of < 0)[0])]
            raise ValueError(f"boundary items are real, gold or attention, not {bad!r}")
        boundary_of = np.asarray(
            [int(e.get("boundary", 0)) for e in frame.item_expected], dtype=np.int64
        )
        category_of, categories = _codes(frame.item_category)
        generator_of, generators = _codes([m.get("generator") for m in frame.item_meta])
        decoding_of = np.asarray(
            [_decoding_value(m) for m in frame.item_meta], dtype=float
        ).reshape(n_items)
        item = frame.item
        guess = frame.answer["guess"]
        if guess.size and int(guess.min()) < 1:
            missing = int((guess < 1).sum())
            raise ValueError(f"{missing} boundary answers have no guess of sentence 1 or later")
        boundary = boundary_of[item]
        return cls(
            worker=frame.worker,
            workers=frame.workers,
            item=item,
            kind=kind_of[item],
            guess=guess,
            boundary=boundary,
            points=points_of(guess, boundary),
            category=category_of[item],
            categories=categories,
            generator=generator_of[item],
            generators=generators,
            decoding=decoding_of[item],
            explanation=frame.explanation,
            reasons=frame.reasons,
            reason_lists=frame.reason_lists,
            position=frame.position,
            attention_passed=frame.attention_passed,
            rater_group=frame.rater_group,
            rater_groups=[g or LIVE_RATER_GROUP for g in frame.rater_groups],
        )


def _decoding_value(meta: Mapping[str, Any]) -> float:
    value = (meta.get("decoding") or {}).get("value")
    return math.nan if value is None else float(value)


def points_of(guess: np.ndarray, boundary: np.ndarray) -> np.ndarray:
    """`analysis.points` for arrays: 5 if exact, 5 - d if d sentences late, 0 if early."""
    distance = guess - boundary
    return np.where(distance < 0, 0, np.maximum(MAX_POINTS - distance, 0)).astype(float)


def _stats(values: np.ndarray) -> dict[str, Any]:
    n = int(values.size)
    return {
        "n": n,
        "mean": _num(values.mean()) if n else None,
        "sem": _num(values.std(ddof=1) / math.sqrt(n)) if n >= 2 else None,
    }


def _groups(codes: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct codes and the indices of each (in row order within a code)."""
    if not codes.size:
        return codes, []
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return ordered[starts], np.split(order, starts[1:])


def _by_position(c: BoundaryColumns) -> list[dict[str, Any]]:
    out = []
    for pos in range(N_POSITIONS):
        out.append({"position": pos, **_stats(c.points[c.position == pos])})
    return out


def _by_decoding(c: BoundaryColumns) -> list[dict[str, Any]]:
    known = ~np.isnan(c.decoding)
    values, members = _groups(c.decoding[known])
    points = c.points[known]
    return [
        {"value": float(value), **_stats(points[rows])}
        for value, rows in zip(values, members, strict=True)
    ]


def _skill_range(c: BoundaryColumns) -> dict[str, Any]:
    codes, members = _groups(c.worker)
    return skill_range_of([
        (float(np.mean(c.points[rows])), c.workers[int(code)])
        for code, rows in zip(codes, members, strict=True)
    ])  # fmt: skip


def _agreement(c: BoundaryColumns) -> dict[str, Any]:
    if not len(c):
        return {"n_items": 0, "n_pairs": 0, "same_sentence": None, "within_one": None}
    span = int(c.guess.max()) + 2  # guesses 1..max, and room for the next guess up
    per_item = np.zeros((int(c.item.max()) + 1, span), dtype=np.int64)
    np.add.at(per_item, (c.item, c.guess), 1)
    total = per_item.sum(axis=1)
    answered = total >= 2
    counts = per_item[answered]
    n_items = int(answered.sum())
    n_pairs = int((total[answered] * (total[answered] - 1) // 2).sum())
    same = int((counts * (counts - 1) // 2).sum())
    within_one = same + int((counts[:, :-1] * counts[:, 1:]).sum())
    return {
        "n_items": n_items,
        "n_pairs": n_pairs,
        "same_sentence": _num(same / n_pairs) if n_pairs else None,
        "within_one": _num(within_one / n_pairs) if n_pairs else None,
    }


def _explanations(c: BoundaryColumns) -> dict[str, int]:
    given = c.explanation[c.explanation != 0]
    ordered = np.sort(given)
    n_unique = int(ordered.size and 1 + (ordered[1:] != ordered[:-1]).sum())
    return {"n_explanations": int(given.size), "n_unique": n_unique,
            "n_copies": int(given.size) - n_unique}  # fmt: skip


def _reason_counts(c: BoundaryColumns) -> dict[str, int]:
    """`analysis._reasons`: every known tag (0 if unused), then the others in order."""
    counts = np.bincount(c.reasons, minlength=len(c.reason_lists))
    tags: Counter[str] = Counter()
    for code in np.flatnonzero(counts):
        for tag in c.reason_lists[int(code)]:
            tags[tag] += int(counts[code])
    result = {tag: tags.get(tag, 0) for tag in REASON_TAGS}
    result.update({tag: tags[tag] for tag in sorted(set(tags) - set(REASON_TAGS))})
    return result


def _split(c: BoundaryColumns, codes: np.ndarray, names: list[str]) -> dict[str, Any]:
    groups: dict[str, np.ndarray] = {}
    for code, name in enumerate(names):
        mask = codes == code
        if mask.any():
            key = str(name)
            groups[key] = mask if key not in groups else groups[key] | mask
    return {key: summarize_columns(c.take(groups[key]), split=False) for key in sorted(groups)}


def summarize_columns(c: BoundaryColumns, *, split: bool = True) -> dict[str, Any]:
    """`analysis.summarize` on columns."""
    scored = c.take(c.kind != KIND_CODES["attention"])
    distances = scored.guess - scored.boundary
    n = len(scored)
    summary: dict[str, Any] = {
        "n_annotations": n,
        "rater_groups": sorted({scored.rater_groups[int(g)] for g in present(scored.rater_group)}),
        "n_workers": len({scored.workers[int(w)] for w in present(scored.worker)}),
        "n_items": int(present(scored.item).size),
        "exact_accuracy": _num(np.mean(distances == 0)) if n else None,
        "mean_distance": _num(distances.mean()) if n else None,
        "distance_histogram": _histogram(distances.astype(int)),
        "mean_points": _num(scored.points.mean()) if n else None,
        "points_by_position": _by_position(scored),
        "points_by_decoding": _by_decoding(scored),
        "skill_range": _skill_range(scored),
        "agreement": _agreement(scored),
        "explanations": _explanations(scored),
        "reasons": _reason_counts(scored),
    }
    if split:
        summary["by_category"] = _split(scored, scored.category, scored.categories)
        summary["by_generator"] = _split(scored, scored.generator, scored.generators)
        summary["by_rater_group"] = _split(scored, scored.rater_group, scored.rater_groups)
    return summary


def _full_and_filtered(c: BoundaryColumns, excluded: set[str]) -> dict[str, Any]:
    """`qc.filtering.full_and_filtered` on columns."""
    left_out = np.zeros(len(c), dtype=bool)
    excluded_codes = [i for i, key in enumerate(c.workers) if key in excluded]
    if excluded_codes:
        left_out = np.isin(c.worker, excluded_codes)
    seen = {c.workers[int(w)] for w in present(c.worker)}
    out: dict[str, Any] = {
        "full": summarize_columns(c),
        "filtered": summarize_columns(c.take(~left_out)),
        "excluded": {
            "n_workers": len(excluded & seen),
            "n_responses": int(left_out.sum()),
        },
    }
    by_group: dict[str, dict[str, int]] = {}
    for code, name in enumerate(c.rater_groups):
        mask = c.rater_group == code
        if not mask.any():
            continue
        gone = mask & left_out
        entry = by_group.setdefault(str(name), {"n_workers": 0, "n_responses": 0})
        entry["n_workers"] += int(present(c.worker[gone]).size)
        entry["n_responses"] += int(gone.sum())
    if by_group:
        out["excluded"]["by_rater_group"] = dict(sorted(by_group.items()))
    return out


def _attention(c: BoundaryColumns) -> dict[str, Any]:
    """`qc.attention.attention_summary` on columns, with `analysis._passed`'s verdict."""
    checks = c.take(c.kind == KIND_CODES["attention"])
    recorded = checks.attention_passed >= 0
    passed = np.where(recorded, checks.attention_passed == 1, checks.guess == checks.boundary)
    checked = {checks.workers[int(w)] for w in present(checks.worker)}
    failed = sorted({checks.workers[int(w)] for w in present(checks.worker[~passed])})
    return {
        "n_checks": len(checks),
        "n_failed_checks": int((~passed).sum()),
        "workers_checked": len(checked),
        "workers_failed": len(failed),
        "worker_failure_rate": round(len(failed) / len(checked), 4) if checked else None,
        "failed_workers": failed,
    }


def analyze_columns(c: BoundaryColumns, excluded_workers: set[str]) -> dict[str, Any]:
    """`analysis.analyze` on columns: full and filtered summaries, attention, exclusions."""
    excluded = {str(worker) for worker in excluded_workers}
    return {**_full_and_filtered(c, excluded), "attention": _attention(c)}
