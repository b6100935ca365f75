"""Reason tags a worker can pick for a boundary guess, as in the public RoFT dataset."""

from __future__ import annotations

REASON_TAGS: tuple[str, ...] = (
    "grammar",
    "repetition",
    "irrelevant",
    "contradicts_sentence",
    "contradicts_knowledge",
    "common_sense",
    "coreference",
    "generic",
    "other",
)

REASON_LABELS: dict[str, str] = {
    "grammar": "Grammar error",
    "repetition": "Repetition",
    "irrelevant": "Irrelevant",
    "contradicts_sentence": "Contradicts an earlier sentence",
    "contradicts_knowledge": "Contradicts world knowledge",
    "common_sense": "Common-sense error",
    "coreference": "Coreference error",
    "generic": "Generic",
    "other": "Other",
}
