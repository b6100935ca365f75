"""The LLM evaluator on tiny local models: a random GPT-2 and scripted ones that always say
the same thing, so sampling, parsing and the chat template are checked end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from crowd.exceptions import InvalidConfig  # noqa: E402
from models.backbones import build_tiny_causal_lm  # noqa: E402
from models.llm_eval.config import LLMEvalConfig  # noqa: E402
from models.llm_eval.evaluator import SANITY_TITLE, LLMEvaluator, sanity_check  # noqa: E402
from models.llm_eval.prompts import RatingPrompt, rating_prompts  # noqa: E402
from tasks.likert.config import validate_study_config  # noqa: E402
from tests.models.scripted_lm import build_scripted_causal_lm  # noqa: E402

ATTACK = validate_study_config({"template": "attack"})
ITEMS = [
    ("a", {"text": "Stocks fall sharply", "reference": "Stocks drop sharply"}),
    ("b", {"text": "Rain expected in Paris on the weekend", "reference": "Paris rain soon"}),
]


@pytest.fixture(scope="module")
def random_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("random") / "lm")


@pytest.fixture(scope="module")
def says_four(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_scripted_causal_lm(tmp_path_factory.mktemp("four") / "lm", "I would rate it a 4.")


def _prompts() -> list[RatingPrompt]:
    return rating_prompts(ATTACK, ITEMS)


def _evaluator(model: Path, **options: Any) -> LLMEvaluator:
    return LLMEvaluator(LLMEvalConfig(model=str(model), max_new_tokens=8, **options))


def test_every_prompt_gets_its_samples_with_the_raw_text_and_a_rating_in_scale_or_none(
    random_lm: Path,
) -> None:
    prompts = _prompts()
    seen: list[float] = []
    answers = _evaluator(random_lm, samples=3, batch_size=3).rate(prompts, progress=seen.append)
    assert [(a.item, a.attribute, a.sample) for a in answers] == [
        (p.item, p.attribute, k) for p in prompts for k in (1, 2, 3)
    ]
    assert [a.prompt for a in answers[::3]] == [p.text for p in prompts]
    assert all(isinstance(a.text, str) for a in answers) and any(a.text for a in answers)
    assert all(a.rating is None or 1 <= a.rating <= 5 for a in answers)
    assert all((a.temperature, a.top_p) == (1.0, 0.9) for a in answers)
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) == 2  # 4 prompts, batches of 3


def test_the_same_seed_gives_the_same_answers_and_another_seed_others(random_lm: Path) -> None:
    first = [a.text for a in _evaluator(random_lm, seed=1).rate(_prompts())]
    again = [a.text for a in _evaluator(random_lm, seed=1).rate(_prompts())]
    other = [a.text for a in _evaluator(random_lm, seed=2).rate(_prompts())]
    assert first == again
    assert first != other


def test_samples_are_drawn_with_the_given_top_p(random_lm: Path) -> None:
    prompts = _prompts()[:2]
    wide = _evaluator(random_lm, samples=3, top_p=1.0).rate(prompts)
    # A nucleus this small holds only the likeliest token: every sample is the greedy answer.
    narrow = _evaluator(random_lm, samples=3, top_p=1e-9).rate(prompts)
    for start in (0, 3):
        assert len({a.text for a in wide[start : start + 3]}) > 1
        assert len({a.text for a in narrow[start : start + 3]}) == 1


def test_a_temperature_sweep_samples_at_each_temperature(random_lm: Path) -> None:
    results = _evaluator(random_lm, seed=3).sweep(_prompts(), [0.5, 2.0])
    assert sorted(results) == [0.5, 2.0]
    assert {a.temperature for a in results[0.5]} == {0.5}
    assert {a.temperature for a in results[2.0]} == {2.0}
    # Same seed, so only the temperature can make the answers differ.
    assert [a.text for a in results[0.5]] != [a.text for a in results[2.0]]
    with pytest.raises(InvalidConfig, match="different temperatures"):
        _evaluator(random_lm).sweep(_prompts(), [0.5, 0.5])


def test_a_scripted_model_answer_is_parsed_end_to_end(says_four: Path) -> None:
    answers = _evaluator(says_four, samples=2, temperature=2.0).rate(_prompts())
    assert len(answers) == 8
    assert {a.text for a in answers} == {"i would rate it a 4."}
    assert {a.rating for a in answers} == {4.0}


def test_an_answer_without_a_number_is_missing_not_zero(tmp_path: Path) -> None:
    model = build_scripted_causal_lm(tmp_path / "lm", "I cannot say.")
    answers = _evaluator(model, samples=2).rate(_prompts()[:1])
    assert [a.text for a in answers] == ["i cannot say."] * 2
    assert [a.rating for a in answers] == [None, None]


def test_the_chat_template_is_used_when_the_tokenizer_has_one(
    says_four: Path, tmp_path: Path
) -> None:
    import shutil

    from transformers import AutoTokenizer

    model = Path(shutil.copytree(says_four, tmp_path / "chat"))
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    tokenizer.chat_template = (
        "{% for m in messages %}<user> {{ m['content'] }} </user>{% endfor %}"
        "{% if add_generation_prompt %} <assistant>{% endif %}"
    )
    tokenizer.save_pretrained(str(model))
    chat = _evaluator(model)
    assert chat.uses_chat_template
    assert chat.format("Rate it.") == "<user> Rate it. </user> <assistant>"
    assert {a.rating for a in chat.rate(_prompts()[:1])} == {4.0}
    plain = _evaluator(says_four)
    assert not plain.uses_chat_template and plain.format("Rate it.") == "Rate it.\nAnswer:"


def test_the_sanity_check_wants_the_top_score_for_identical_titles(
    says_four: Path, tmp_path: Path
) -> None:
    failed = sanity_check(_evaluator(says_four))
    assert not failed.passed and failed.top == 5 and failed.top_share == 0.0
    says_five = build_scripted_causal_lm(tmp_path / "five", "5")
    check = sanity_check(_evaluator(says_five))
    assert check.passed and len(check.answers) == 3
    prompt = check.answers[0].prompt
    assert f"Title 1: {SANITY_TITLE}\nTitle 2: {SANITY_TITLE}\n" in prompt


def test_a_prompt_longer_than_the_context_is_refused_with_the_fix(random_lm: Path) -> None:
    with pytest.raises(InvalidConfig, match="context of 256: lower max_new_tokens"):
        LLMEvaluator(LLMEvalConfig(model=str(random_lm), max_new_tokens=250)).rate(_prompts())


def test_the_config_is_checked_with_messages_that_say_the_fix(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig, match="samples: must be a whole number from 1 to 20"):
        LLMEvalConfig(model="m", samples=0)
    with pytest.raises(InvalidConfig, match=r"top_p: must be in \(0, 1\]"):
        LLMEvalConfig(model="m", top_p=1.5)
    with pytest.raises(InvalidConfig, match="temperature: .*near-greedy"):
        LLMEvalConfig(model="m", temperature=0)
    with pytest.raises(InvalidConfig, match="unknown LLM evaluation options"):
        LLMEvalConfig.from_options({"model": "m", "top_k": 5})
    config = LLMEvalConfig.from_options({"model": "m", "samples": 5})
    assert LLMEvalConfig.from_options(config.to_options()) == config
    for name in config.to_options():
        assert LLMEvalConfig.help(name)
    with pytest.raises(InvalidConfig, match="is not a directory"):
        _evaluator(tmp_path / "nowhere").load()
