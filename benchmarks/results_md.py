"""benchmarks/RESULTS.md: each benchmark rewrites its own block, between its two markers,
and keeps every other line (the other benchmarks' blocks and the notes written by hand)."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_block(start: str, end: str, block: str, intro: str) -> None:
    """Put `block` (which begins with `start` and ends with `end`) where the file has those
    markers; the first time, at the end of the file after `intro`."""
    text = RESULTS.read_text() if RESULTS.exists() else ""
    if start in text and end in text:
        head, rest = text.split(start, 1)
        RESULTS.write_text(head + block + rest.split(end, 1)[1])
    else:
        kept = text.rstrip("\n") + "\n" if text.strip() else ""
        RESULTS.write_text(kept + intro + block + "\n")
