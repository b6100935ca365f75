"""Best-of-K labels as a reward model reads them, and the held-out split."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crowd.exceptions import ValidationError


@dataclass(frozen=True)
class Comparison:
    """One label: a query, its K candidates in canonical order and the index chosen."""

    query: str
    candidates: tuple[str, ...]
    best: int
    item: str | None = None
    worker: str | None = None
    policies: tuple[str | None, ...] = ()

    def __post_init__(self) -> None:
        if len(self.candidates) < 2:
            raise ValidationError("a comparison needs at least 2 candidates")
        if not 0 <= self.best < len(self.candidates):
            raise ValidationError(
                f"best is {self.best}, but there are {len(self.candidates)} candidates"
            )

    @property
    def k(self) -> int:
        return len(self.candidates)

    @classmethod
    def from_kway(cls, row: Mapping[str, Any]) -> Comparison:
        """From a K-way export row: {"prompt", "completions", "label", "policies"?, ...}."""
        try:
            return cls(
                query=str(row["prompt"]),
                candidates=tuple(str(text) for text in row["completions"]),
                best=int(row["label"]),
                item=row.get("item"),
                worker=row.get("worker"),
                policies=tuple(row.get("policies") or ()),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValidationError(
                f"not a K-way row ({error}): give prompt, completions and label"
            ) from None


def split_held_out(
    comparisons: Sequence[Comparison], share: float, seed: int = 0
) -> tuple[list[Comparison], list[Comparison]]:
    """(train, held out), split by item so no item's labels land on both sides."""
    if not 0 <= share < 1:
        raise ValidationError("the held-out share must be in [0, 1)")
    keys = sorted({c.item if c.item is not None else f"#{i}" for i, c in enumerate(comparisons)})
    random.Random(seed).shuffle(keys)
    n_out = round(len(keys) * share)
    if share > 0 and n_out == 0 and len(keys) > 1:
        n_out = 1
    out = set(keys[:n_out])
    train: list[Comparison] = []
    held: list[Comparison] = []
    for i, comparison in enumerate(comparisons):
        key = comparison.item if comparison.item is not None else f"#{i}"
        (held if key in out else train).append(comparison)
    return train, held


def base_samples(
    comparisons: Iterable[Comparison], policy: str | None = None
) -> list[tuple[str, str]]:
    """(query, candidate) pairs from the base policy (every candidate when policy is None)."""
    seen: set[tuple[str, str]] = set()
    samples = []
    for comparison in comparisons:
        for index, text in enumerate(comparison.candidates):
            source = comparison.policies[index] if index < len(comparison.policies) else None
            if policy is not None and source != policy:
                continue
            if (comparison.query, text) not in seen:
                seen.add((comparison.query, text))
                samples.append((comparison.query, text))
    return samples
