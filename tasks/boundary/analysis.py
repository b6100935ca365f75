"""Pure analysis of boundary-detection (RoFT) responses: accuracy, points, agreement and QC.

Every figure counts every rater group (live crowd, an imported RoFT release, experts...):
each summary names the groups it pools (`rater_groups`), and `by_rater_group` gives the
same figures for each group alone.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from qc.attention import attention_summary
from qc.filtering import full_and_filtered
from tasks.base import rater_group
from tasks.boundary.reasons import REASON_TAGS

Row = Mapping[str, Any]

# Attention checks only tell us whether a worker reads; they carry no information about detection
# skill, so every metric is computed over these kinds alone.
SCORED_KINDS = frozenset({"real", "gold"})
KINDS = SCORED_KINDS | {"attention"}
N_POSITIONS = 10
MAX_POINTS = 5
_REQUIRED = ("response_id", "worker", "item", "kind", "guess", "boundary", "points")
_DIGITS = 4


def points(guess: int, boundary: int) -> int:
    """Points for a guess: 5 if exact, 5 - d if d sentences late (at least 0), 0 if early."""
    for name, value in (("guess", guess), ("boundary", boundary)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int sentence index (1-based), got {value!r}")
        if value < 1:
            raise ValueError(f"{name} must be a 1-based sentence index >= 1, got {value}")
    distance = int(guess) - int(boundary)
    if distance < 0:
        return 0
    return max(MAX_POINTS - distance, 0)


def _num(value: float | np.floating[Any] | None) -> float | None:
    """Round for JSON; NaN and infinities become None so the output never carries NaN."""
    if value is None:
        return None
    number = float(value)
    return round(number, _DIGITS) if math.isfinite(number) else None


def _stats(values: Sequence[float]) -> dict[str, Any]:
    """n, mean and standard error of the mean (ddof=1; None below two values)."""
    arr = np.asarray(values, dtype=float)
    n = int(arr.size)
    return {
        "n": n,
        "mean": _num(arr.mean()) if n else None,
        "sem": _num(arr.std(ddof=1) / math.sqrt(n)) if n >= 2 else None,
    }


def _row_points(row: Row) -> float:
    # The stored points are what the worker was shown and paid; recompute only when absent.
    stored = row.get("points")
    return float(stored) if stored is not None else float(points(row["guess"], row["boundary"]))


def _check_rows(rows: Iterable[Row]) -> None:
    for index, row in enumerate(rows):
        missing = [key for key in _REQUIRED if key not in row]
        if missing:
            raise ValueError(
                f"row {index} (response {row.get('response_id')!r}) lacks {', '.join(missing)}; "
                f"every row needs {', '.join(_REQUIRED)}"
            )
        if row["kind"] not in KINDS:
            raise ValueError(
                f"row {index} (response {row['response_id']!r}) has kind {row['kind']!r}; "
                f"use one of {', '.join(sorted(KINDS))}"
            )


def _histogram(distances: np.ndarray) -> dict[str, int]:
    if distances.size == 0:
        return {}
    low = int(distances.min())
    counts = np.bincount(distances - low)
    # Every distance between the extremes gets a key, zeros included, so plots have no gaps.
    return {str(low + offset): int(count) for offset, count in enumerate(counts)}


def _by_position(scored: Sequence[Row]) -> list[dict[str, Any]]:
    groups: dict[int, list[float]] = defaultdict(list)
    for row in scored:
        position = row.get("position")
        if position is not None and 0 <= position < N_POSITIONS:
            groups[int(position)].append(_row_points(row))
    return [{"position": pos, **_stats(groups[pos])} for pos in range(N_POSITIONS)]


def _by_decoding(scored: Sequence[Row]) -> list[dict[str, Any]]:
    groups: dict[float, list[float]] = defaultdict(list)
    for row in scored:
        if row.get("decoding_value") is not None:
            groups[float(row["decoding_value"])].append(_row_points(row))
    return [{"value": value, **_stats(groups[value])} for value in sorted(groups)]


def _skill_range(scored: Sequence[Row]) -> dict[str, Any]:
    per_worker: dict[str, list[float]] = defaultdict(list)
    for row in scored:
        per_worker[str(row["worker"])].append(_row_points(row))
    return skill_range_of([(float(np.mean(v)), worker) for worker, v in per_worker.items()])


def skill_range_of(means: list[tuple[float, str]]) -> dict[str, Any]:
    """Mean points of the top and bottom 5% of workers, of (mean points, worker) pairs."""
    means = sorted(means)  # on (mean, worker): ties are deterministic
    if not means:
        return {"top_5pct_mean": None, "bottom_5pct_mean": None, "n_workers_each": 0}
    k = max(1, round(0.05 * len(means)))
    return {
        "top_5pct_mean": _num(np.mean([mean for mean, _ in means[-k:]])),
        "bottom_5pct_mean": _num(np.mean([mean for mean, _ in means[:k]])),
        "n_workers_each": k,
    }


def _agreement(scored: Sequence[Row]) -> dict[str, Any]:
    guesses_by_item: dict[str, Counter[int]] = defaultdict(Counter)
    for row in scored:
        guesses_by_item[str(row["item"])][int(row["guess"])] += 1
    n_items = n_pairs = same = within_one = 0
    for counts in guesses_by_item.values():
        total = sum(counts.values())
        if total < 2:
            continue
        # Count pairs from the guess tallies instead of enumerating them: O(n) per item.
        n_items += 1
        n_pairs += total * (total - 1) // 2
        equal = sum(c * (c - 1) // 2 for c in counts.values())
        same += equal
        within_one += equal + sum(c * counts.get(g + 1, 0) for g, c in counts.items())
    return {
        "n_items": n_items,
        "n_pairs": n_pairs,
        "same_sentence": _num(same / n_pairs) if n_pairs else None,
        "within_one": _num(within_one / n_pairs) if n_pairs else None,
    }


def _explanations(scored: Sequence[Row]) -> dict[str, int]:
    texts = [" ".join(str(row.get("explanation") or "").split()) for row in scored]
    texts = [text for text in texts if text]
    # Copy-pasted explanations are a sign of low effort; case and spacing changes do not hide it.
    n_unique = len({text.lower() for text in texts})
    return {"n_explanations": len(texts), "n_unique": n_unique, "n_copies": len(texts) - n_unique}


def _reasons(scored: Sequence[Row]) -> dict[str, int]:
    counts = Counter(str(tag) for row in scored for tag in row.get("reasons") or [])
    result = {tag: counts.get(tag, 0) for tag in REASON_TAGS}
    result.update({tag: counts[tag] for tag in sorted(set(counts) - set(REASON_TAGS))})
    return result


def _split(scored: Sequence[Row], key: str) -> dict[str, dict[str, Any]]:
    # Rows without a value for the key have no group to go in; they still count in the totals.
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in scored:
        value = rater_group(row) if key == "rater_group" else row.get(key)
        if value is not None:
            groups[str(value)].append(row)
    return {value: summarize(groups[value], split=False) for value in sorted(groups)}


def summarize(rows: Sequence[Row], *, split: bool = True) -> dict[str, Any]:
    """Headline metrics over the real and gold rows of every rater group (named in
    `rater_groups`); attention checks are left out."""
    scored = [row for row in rows if row["kind"] in SCORED_KINDS]
    distances = np.array([int(r["guess"]) - int(r["boundary"]) for r in scored], dtype=int)
    earned = np.array([_row_points(r) for r in scored], dtype=float)
    n = len(scored)
    summary: dict[str, Any] = {
        "n_annotations": n,
        "rater_groups": sorted({rater_group(r) for r in scored}),
        "n_workers": len({str(r["worker"]) for r in scored}),
        "n_items": len({str(r["item"]) for r in scored}),
        "exact_accuracy": _num(np.mean(distances == 0)) if n else None,
        "mean_distance": _num(distances.mean()) if n else None,
        "distance_histogram": _histogram(distances),
        "mean_points": _num(earned.mean()) if n else None,
        "points_by_position": _by_position(scored),
        "points_by_decoding": _by_decoding(scored),
        "skill_range": _skill_range(scored),
        "agreement": _agreement(scored),
        "explanations": _explanations(scored),
        "reasons": _reasons(scored),
    }
    if split:
        summary["by_category"] = _split(scored, "category")
        summary["by_generator"] = _split(scored, "generator")
        summary["by_rater_group"] = _split(scored, "rater_group")
    return summary


def _passed(row: Row) -> bool:
    # Older rows may lack the stored verdict; the rule is that an attention item is all human.
    verdict = row.get("attention_passed")
    if verdict is not None:
        return bool(verdict)
    return int(row["guess"]) == int(row.get("n_sentences") or row["boundary"])


def analyze(rows: Sequence[Row], excluded_workers: set[str]) -> dict[str, Any]:
    """Full-set and filtered-set summaries plus the attention-check and exclusion counts."""
    _check_rows(rows)
    return {
        **full_and_filtered(rows, excluded_workers, summarize),
        "attention": attention_summary(rows, _passed),
    }
