"""A rating out of a language model's free-text answer, as Chiang & Lee (2023) parsed them.

"Can Large Language Models Be an Alternative to Human Evaluations?" (ACL 2023), section 3.2:
models often restate the scale ("on a scale of 1-5", "4/5") or name the texts ("title 1"), so
those phrases are removed first and the first number left is the rating. An answer without
a usable number is missing (None), never 0: a 0 would pull every mean down and read as the
worst possible rating.

Example:
    >>> parse_rating("On a scale of 1-5, I would give it a 4/5.", 1, 5)
    4.0
    >>> parse_rating("I cannot rate this text.", 1, 5) is None
    True
"""

from __future__ import annotations

import re

WORD_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}  # fmt: skip
_WORDS = "|".join(WORD_NUMBERS)
_NUMBER = r"\d+(?:\.\d+)?"
_ANY_NUMBER = rf"(?:{_NUMBER}|{_WORDS})"
# "1 (not at all)": an endpoint label after a scale end, as our prompts write the scale.
_LABEL = r"(?:\s*\([^()]{0,80}\))?"
# A range such as "1-5", "1 to 5" or "1 (not at all) to 5 (perfectly)"; only ranges that
# span the scale are phrases about the scale ("I'd say 3-4" is an answer).
_RANGE = re.compile(
    rf"(?<![\w.])(?P<start>{_ANY_NUMBER}){_LABEL}\s*(?:-|to|through)\s*"
    rf"(?P<end>{_ANY_NUMBER})(?!\w){_LABEL}"
)
_SCALE_PHRASES = [
    # "out of 5", "/5", "/ 10"
    re.compile(rf"(?:\bout\s+of|/)\s*{_ANY_NUMBER}\b"),
    # "a 5-point scale", "five point Likert scale", "scale of 5"
    re.compile(rf"\b{_ANY_NUMBER}\s*-?\s*points?\s+(?:likert\s+)?scale\b"),
    re.compile(rf"\bscale\s+of\s+{_ANY_NUMBER}\b"),
    # "title 1", "titles 1 and 2", "news title #2", "title one"; after a comma only another
    # "title N" continues the phrase ("in title 2, 5" ends with the rating).
    re.compile(
        rf"\btitles?\s*#?\s*{_ANY_NUMBER}\b(?:\s*(?:and|&|or|vs\.?)\s*(?:titles?\s*)?#?\s*"
        rf"{_ANY_NUMBER}\b|\s*,\s*titles?\s*#?\s*{_ANY_NUMBER}\b)*"
    ),
    # "(5 being the highest)", "where 1 is the lowest", "1 = worst", "and 5 the best"
    re.compile(rf"\b{_ANY_NUMBER}\s+being\b"),
    re.compile(rf"\bwhere\s+{_ANY_NUMBER}\s+(?:is|means|=)"),
    # Only with a verb, "=" or "the" between: "4 best describes it" and "a 5 most
    # definitely" are answers.
    re.compile(
        rf"\b{_ANY_NUMBER}\s*(?:(?:=|is|means)\s*(?:the\s+)?|the\s+)"
        r"(?:lowest|highest|worst|best|least|most|minimum|maximum)\b"
    ),
]
# "one" is a number only where it is not a pronoun ("this one", "one of them").
_PRONOUN_BEFORE = ("this", "that", "the", "no", "any", "each", "every", "which", "another")
_FIRST_NUMBER = re.compile(
    rf"(?<![\w.])(?P<value>{_NUMBER}|(?:{_WORDS})(?![\w-]))(?![\w])"
    r"(?P<half>\s+and\s+a\s+half\b)?"
)
_PRONOUN_AFTER = re.compile(r"\s+(?:of|another|more|hand|day|way|thing)\b")


def _is_scale_range(match: re.Match[str], low: int, high: int) -> bool:
    start, end = _value(match["start"]), _value(match["end"])
    return start in (0, 1, low) and end >= high


def _value(token: str) -> float:
    return float(WORD_NUMBERS[token]) if token in WORD_NUMBERS else float(token)


def strip_scale_phrases(text: str, low: int, high: int) -> str:
    """The lowercased answer without the phrases that restate the scale or name the texts."""
    cleaned = text.lower().replace("½", ".5").replace("–", "-").replace("—", "-")
    cleaned = re.sub(r"(?<![\w.])\.5", "0.5", cleaned)
    cleaned = _RANGE.sub(lambda m: " " if _is_scale_range(m, low, high) else m.group(0), cleaned)
    for pattern in _SCALE_PHRASES:
        cleaned = pattern.sub(" ", cleaned)
    return cleaned


def first_number(text: str) -> float | None:
    """The first number in already-cleaned text: digits, halves, or a number word up to ten."""
    for match in _FIRST_NUMBER.finditer(text):
        token = match["value"]
        if token == "one":
            before = text[: match.start()].split()
            if (before and before[-1] in _PRONOUN_BEFORE) or _PRONOUN_AFTER.match(
                text, match.end()
            ):
                continue
        return _value(token) + (0.5 if match["half"] else 0.0)
    return None


def parse_rating(text: str, low: int, high: int) -> float | None:
    """The rating in `text` on the scale [low, high], or None when the answer has none.

    The first number left after strip_scale_phrases decides: outside the scale, or neither
    whole nor half, the answer is missing rather than moved to the nearest valid rating.
    """
    value = first_number(strip_scale_phrases(text, low, high))
    if value is None or not low <= value <= high or 2 * value != int(2 * value):
        return None
    return value
