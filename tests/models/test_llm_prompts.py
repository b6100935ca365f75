"""Prompts give the model what the Likert page gives a person, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from crowd.exceptions import InvalidConfig
from models.llm_eval.prompts import EXPLAIN_LINE, build_prompt, rating_prompts
from tasks.likert.config import validate_study_config
from tasks.likert.templates_builtin import ATTACK_INSTRUCTIONS, STORY_INSTRUCTIONS

STORY: dict[str, Any] = {
    "text": "The dragon slept under the old bridge.",
    "prompt": "Write about a sleepy dragon.",
}
TITLES: dict[str, Any] = {"text": "Stocks fall sharply", "reference": "Stocks drop sharply"}


def _story() -> dict[str, Any]:
    return validate_study_config({"template": "story"})


def test_the_prompt_has_the_instructions_text_question_and_scale_in_page_order() -> None:
    prompt = build_prompt(STORY, _story(), "grammaticality").text
    question = "How grammatically correct is the text of the story fragment?"
    parts = [STORY_INSTRUCTIONS, f"Text: {STORY['text']}", question,
             "Answer on a scale from 1 (not at all) to 5 (perfectly)."]  # fmt: skip
    positions = [prompt.index(part) for part in parts]
    assert positions == sorted(positions)


def test_the_story_prompt_is_shown_only_with_the_question_that_shows_it() -> None:
    config = _story()
    assert STORY["prompt"] not in build_prompt(STORY, config, "likability").text
    relevance = build_prompt(STORY, config, "relevance").text
    assert f"Prompt: {STORY['prompt']}" in relevance
    assert relevance.index("Prompt:") < relevance.index("Text:")


def test_the_reference_is_title_1_and_the_text_title_2_only_where_shown() -> None:
    config = validate_study_config({"template": "attack"})
    fluency = build_prompt(TITLES, config, "fluency").text
    assert TITLES["reference"] not in fluency and f"Text: {TITLES['text']}" in fluency
    meaning = build_prompt(TITLES, config, "meaning_preservation").text
    assert ATTACK_INSTRUCTIONS in meaning
    assert meaning.index(f"Title 1: {TITLES['reference']}") < meaning.index(
        f"Title 2: {TITLES['text']}"
    )
    assert "Text:" not in meaning
    assert "1 (strongly disagree) to 5 (strongly agree)" in meaning


def test_the_persona_comes_first_and_the_explain_line_after_the_question() -> None:
    persona = "You are an English teacher."
    prompt = build_prompt(STORY, _story(), "cohesiveness", persona=persona, explain=True).text
    assert prompt.startswith(persona)
    question = "How well do the sentences in the story fragment fit together?"
    assert prompt.index(STORY_INSTRUCTIONS) > prompt.index(persona)
    assert prompt.index(EXPLAIN_LINE) > prompt.index(question)
    plain = build_prompt(STORY, _story(), "cohesiveness").text
    assert persona not in plain and EXPLAIN_LINE not in plain


def test_only_what_the_page_shows_reaches_the_prompt() -> None:
    # A reference the story attributes do not show, and anything else in the content.
    content = {**STORY, "reference": "UNSHOWN-REFERENCE", "group": "gpt2"}
    for name in ("grammaticality", "relevance"):
        prompt = build_prompt(content, _story(), name).text
        assert "UNSHOWN-REFERENCE" not in prompt and "gpt2" not in prompt


def test_custom_scales_and_missing_labels() -> None:
    config = validate_study_config(
        {"instructions": "Rate it.", "attributes": [
            {"name": "quality", "question": "How good is it?", "scale": [0, 10]}]}
    )  # fmt: skip
    prompt = build_prompt({"text": "Hi."}, config, "quality")
    assert (prompt.low, prompt.high) == (0, 10)
    assert prompt.text.endswith("How good is it?\nAnswer on a scale from 0 to 10.")


def test_one_prompt_per_item_and_attribute_in_the_study_order() -> None:
    prompts = rating_prompts(_story(), [("a", STORY), ("b", STORY)])
    assert [(p.item, p.attribute) for p in prompts] == [
        (item, name)
        for item in "ab"
        for name in ("grammaticality", "cohesiveness", "likability", "relevance")
    ]
    with pytest.raises(InvalidConfig, match="not 'fluency'"):
        build_prompt(STORY, _story(), "fluency")
