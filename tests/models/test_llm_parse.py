"""Ratings parsed out of language models' free-text answers (Chiang & Lee 2023, sec. 3.2)."""

from __future__ import annotations

import pytest

from models.llm_eval.parse import parse_rating, strip_scale_phrases

ANSWERS = [
    # (answer, expected rating on the 1-5 scale)
    ("I would rate it a 4.", 4),
    ("4/5", 4),
    ("On a scale of 1-5, I give 3", 3),
    ("no rating", None),
    ("3.5 out of 5", 3.5),
    ("Title 1 and title 2 mean the same: 5", 5),
    ("0", None),  # below the scale: missing, not moved to 1
    ("7", None),  # above the scale
    ("Rating: 2.7", None),  # neither whole nor half
    ("4.5/5 - nearly perfect.", 4.5),
    ("On a scale from 1 (not at all) to 5 (perfectly), I would give it a 2.", 2),
    ("The meaning of title 1 is preserved in title 2, 5.", 5),
    ("Titles 1 and 2 say the same thing, so 5", 5),
    ("1-5: 3", 3),
    ("On a 5-point scale: 2", 2),
    ("The text is fluent (5 being the highest), so I give it a 4.", 4),
    ("Where 1 is the lowest and 5 the highest: 2", 2),
    ("I give it a 4 out of 5 because the second sentence has 2 errors.", 4),
    ("I'd rate it 3-4.", 3),  # a range inside the scale is an answer: its first number
    ("Score: 9/10", None),  # another scale's rating is out of ours
    ("As an AI language model, I cannot rate the text.", None),
    ("", None),
    ("Rating: 1", 1),
    ("I'd give it four out of five.", 4),
    ("Three and a half stars.", 3.5),
    ("3½", 3.5),
    ("This one is well written: 4", 4),  # "this one" is not a rating of 1
]


@pytest.mark.parametrize(("answer", "expected"), ANSWERS)
def test_the_first_number_left_after_the_scale_phrases_is_the_rating(
    answer: str, expected: float | None
) -> None:
    assert parse_rating(answer, 1, 5) == expected


def test_a_missing_rating_is_none_never_zero() -> None:
    assert parse_rating("The story is fine.", 1, 5) is None
    assert parse_rating("0 out of 5", 0, 10) == 0  # where 0 is on the scale, it is a rating


def test_other_scales_bound_the_rating() -> None:
    assert parse_rating("On a 0-10 scale: 8", 0, 10) == 8
    assert parse_rating("On a scale of 0 to 10, 7.5", 0, 10) == 7.5
    assert parse_rating("8", 1, 5) is None
    assert parse_rating("1-7: 6", 1, 7) == 6


def test_ratings_are_floats_so_halves_and_wholes_compare_alike() -> None:
    rating = parse_rating("4", 1, 5)
    assert isinstance(rating, float) and rating == 4.0


def test_scale_phrases_are_removed_and_the_rest_is_kept() -> None:
    cleaned = strip_scale_phrases("On a scale of 1-5, title 2 gets 4/5.", 1, 5)
    assert "1-5" not in cleaned and "title" not in cleaned and "/5" not in cleaned
    assert "4" in cleaned


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I think 4 best describes its fluency.", 4),
        ("A 5 most definitely.", 5),
        ("The characters are one-dimensional, so 2.", 2),
        ("5 is the best and I give it 3", 3),
    ],
)
def test_superlatives_and_hyphenated_words_are_not_scale_phrases(
    text: str, expected: float
) -> None:
    assert parse_rating(text, 1, 5) == expected
