"""The Adversarial Taboo judge: perplexity, relevance, thresholds, skips, cache, config."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from crowd.exceptions import InvalidConfig, ValidationError
from models.backbones import build_tiny_causal_lm
from models.judges import (
    FluencyScorer,
    Judge,
    JudgeConfig,
    JudgeRequest,
    MemoryCache,
    RelevanceScorer,
    Verdict,
    cache_key,
)
from models.judges.fluency import start_token

OPENING = "I love eating bananas for breakfast"
RELEVANT = "Yes, fruit is a healthy way to start the day"
UNRELATED = "The stock market fell sharply today"
TEXTS = ["the cat sat on the mat", "hello", "a much longer sentence about the weather in spring"]


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("judges") / "lm")


@pytest.fixture(scope="session")
def fluency(tiny_lm: Path) -> FluencyScorer:
    return FluencyScorer(tiny_lm, device="cpu")


@pytest.fixture(scope="session")
def relevance() -> RelevanceScorer:
    return RelevanceScorer("minilm", device="cpu")


def count_calls(monkeypatch: pytest.MonkeyPatch, scorer: Any, method: str) -> list[int]:
    """Replace scorer.method with a wrapper that records how many inputs each call got."""
    calls: list[int] = []
    original: Callable[[list[Any]], list[float]] = getattr(scorer, method)

    def counted(inputs: list[Any]) -> list[float]:
        calls.append(len(inputs))
        return original(inputs)

    monkeypatch.setattr(scorer, method, counted)
    return calls


def count_forwards(model: Any) -> tuple[list[int], Any]:
    """Batch sizes of the model's forward passes, and the hook's handle to remove."""
    sizes: list[int] = []
    handle = model.register_forward_pre_hook(
        lambda _module, args, kwargs: sizes.append(int(kwargs["input_ids"].shape[0])),
        with_kwargs=True,
    )
    return sizes, handle


def test_perplexity_is_exp_of_the_mean_token_nll(fluency: FluencyScorer, tiny_lm: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_lm))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_lm)).eval()
    ids = torch.tensor([[101, *tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"]]])
    with torch.no_grad():
        loss = model(input_ids=ids, labels=ids).loss
    # The model's config gives BOS 101 ([CLS]); MiniLM's tokenizer has none of its own.
    assert fluency.perplexity([TEXTS[0]]) == pytest.approx([math.exp(loss.item())], rel=1e-5)


def test_padding_does_not_change_a_perplexity(fluency: FluencyScorer) -> None:
    alone = [fluency.perplexity([text])[0] for text in TEXTS]
    together = fluency.perplexity(TEXTS)
    assert together == pytest.approx(alone, rel=1e-5)
    assert fluency.perplexity(TEXTS) == together  # deterministic: eval mode, no sampling
    assert len(set(together)) == 3 and all(1 < p < math.inf for p in together)


def test_texts_without_a_start_token(
    fluency: FluencyScorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert fluency.perplexity(["hello"])[0] < math.inf  # scored after the start token
    monkeypatch.setattr(fluency, "_start", None)
    # Without a start token the first token is context only: one token leaves nothing to score.
    single, longer = fluency.perplexity(["hello", TEXTS[0]])
    assert single == math.inf and 1 < longer < math.inf
    tokens = SimpleNamespace(bos_token_id=None, eos_token_id=None)
    assert start_token(tokens, SimpleNamespace(bos_token_id=None, eos_token_id=7)) == 7
    assert start_token(SimpleNamespace(bos_token_id=1, eos_token_id=2), None) == 1
    assert start_token(tokens, SimpleNamespace()) is None


def test_an_unscorable_text_fails_fluency_without_a_score(
    tiny_lm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = MemoryCache()
    judge = Judge(JudgeConfig(fluency_model=str(tiny_lm), device="cpu"), cache=cache)
    assert judge.fluency is not None
    judge.fluency.load()
    monkeypatch.setattr(judge.fluency, "_start", None)
    (verdict,) = judge.check([JudgeRequest("hello")])
    assert verdict.scores["fluency"]["score"] is None
    assert not verdict.scores["fluency"]["passed"] and not verdict.passed
    assert len(cache) == 0  # infinite perplexities are not cached
    json.dumps(verdict.to_json(), allow_nan=False)


def test_relevance_prefers_a_related_reply(relevance: RelevanceScorer) -> None:
    related, unrelated, same = relevance.score(
        [(OPENING, RELEVANT), (OPENING, UNRELATED), (OPENING, OPENING)]
    )
    assert related > 0.4 > unrelated
    assert same == pytest.approx(1.0, abs=1e-5)  # unit-length embeddings: cosine of itself
    vectors = relevance.embed([OPENING, RELEVANT])
    assert vectors.shape == (2, 384)
    assert torch.linalg.vector_norm(vectors, dim=1) == pytest.approx([1.0, 1.0], abs=1e-5)
    assert relevance.score([]) == []


def test_a_game_is_judged_with_the_papers_thresholds(relevance: RelevanceScorer) -> None:
    judge = Judge(JudgeConfig(device="cpu"))
    first, good, bad = judge.check([
        JudgeRequest(OPENING),
        JudgeRequest(RELEVANT, previous=OPENING),
        JudgeRequest(UNRELATED, previous=RELEVANT),
    ])  # fmt: skip
    skipped_fluency = {"score": None, "threshold": 35.0, "model": None, "passed": True,
                       "skipped": "no fluency model configured"}  # fmt: skip
    assert first.scores == {
        "fluency": skipped_fluency,
        "relevance": {"score": None, "threshold": 0.4, "model": None, "passed": True,
                      "skipped": "first utterance"},
    }  # fmt: skip
    assert first.passed
    assert good.passed and good.scores["fluency"] == skipped_fluency
    assert good.scores["relevance"]["model"] == relevance.model_id
    assert good.scores["relevance"]["score"] == pytest.approx(
        relevance.score([(OPENING, RELEVANT)])[0], abs=1e-6
    )
    assert not bad.passed and not bad.scores["relevance"]["passed"]
    assert bad.scores["relevance"]["skipped"] is None


def test_thresholds_apply_in_the_right_direction(tiny_lm: Path) -> None:
    cache = MemoryCache()  # shared: the scores are computed once, the thresholds vary

    def verdict(fluency_threshold: float, relevance_threshold: float) -> Verdict:
        config = JudgeConfig(
            fluency_model=str(tiny_lm), fluency_threshold=fluency_threshold,
            relevance_threshold=relevance_threshold, device="cpu",
        )  # fmt: skip
        return Judge(config, cache=cache).check([JudgeRequest(RELEVANT, previous=OPENING)])[0]

    measured = verdict(1e9, 0.0).scores
    perplexity, similarity = measured["fluency"]["score"], measured["relevance"]["score"]
    assert perplexity is not None and similarity is not None
    # Perplexity must be under its threshold; relevance at or above its own.
    assert verdict(perplexity * 1.01, similarity).passed
    assert not verdict(perplexity, similarity).scores["fluency"]["passed"]
    low = verdict(perplexity * 0.99, similarity - 0.01)
    assert not low.passed and low.scores["relevance"]["passed"]
    high = verdict(perplexity * 1.01, min(1.0, similarity + 0.01))
    assert not high.passed and high.scores["fluency"]["passed"]
    assert not high.scores["relevance"]["passed"]
    assert high.scores["fluency"]["threshold"] == perplexity * 1.01


def test_requests_are_scored_in_batches(tiny_lm: Path) -> None:
    config = JudgeConfig(fluency_model=str(tiny_lm), batch_size=2, device="cpu")
    judge = Judge(config)
    assert judge.fluency is not None
    requests = [JudgeRequest(f"utterance number {i}", previous=f"utterance number {i - 1}")
                for i in range(1, 6)]  # fmt: skip
    fluency_sizes, first = count_forwards(judge.fluency.model)
    relevance_sizes, second = count_forwards(judge.relevance.model)
    try:
        verdicts = judge.check(requests)
        model = judge.fluency.model
        judge.check(requests[:1])
    finally:
        first.remove()
        second.remove()
    assert len(verdicts) == 5
    assert fluency_sizes == [2, 2, 1, 1]  # 5 texts, then the second check's one
    # Relevance embeds each distinct text once: "utterance number 0" to "5", then two.
    assert relevance_sizes == [2, 2, 2, 2]
    assert judge.fluency.model is model  # loaded once per judge


def test_cached_scores_make_no_model_call(tiny_lm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = MemoryCache()
    config = JudgeConfig(fluency_model=str(tiny_lm), device="cpu")
    judge = Judge(config, cache=cache)
    assert judge.fluency is not None
    perplexity_calls = count_calls(monkeypatch, judge.fluency, "perplexity")
    score_calls = count_calls(monkeypatch, judge.relevance, "score")
    requests = [JudgeRequest(OPENING), JudgeRequest(RELEVANT, previous=OPENING),
                JudgeRequest(OPENING)]  # fmt: skip
    first = judge.check(requests)
    assert perplexity_calls == [2] and score_calls == [1]  # a repeated text is scored once
    assert len(cache) == 3
    assert judge.check(requests) == first
    assert perplexity_calls == [2] and score_calls == [1]
    judge.check([JudgeRequest(UNRELATED, previous=RELEVANT), JudgeRequest(OPENING)])
    assert perplexity_calls == [2, 1] and score_calls == [1, 1]  # only the misses

    # Another judge (a worker restart) with the same cache never loads its models.
    again = Judge(config, cache=cache)
    assert again.check(requests) == first
    assert again.fluency is not None
    assert again.fluency._model is None and again.relevance._model is None

    # max_length changes the scores of long texts, so it keeps its own entries.
    shorter = Judge(JudgeConfig(fluency_model=str(tiny_lm), max_length=4, device="cpu"),
                    cache=cache)  # fmt: skip
    assert shorter.check(requests)[1] != first[1]


def test_cache_keys() -> None:
    assert cache_key("fluency", "hi") == hashlib.sha256(b"hi").hexdigest()
    assert cache_key("relevance", "hi", "yo") == hashlib.sha256(b"yo\x00hi").hexdigest()
    assert cache_key("relevance", "b", "a") != cache_key("relevance", "a", "b")
    for kind, previous in (("relevance", None), ("fluency", "yo"), ("grammar", None)):
        with pytest.raises(ValueError):
            cache_key(kind, "hi", previous)
    cache = MemoryCache()
    cache.put_many("fluency", "m@1", {"k": 2.5})
    assert cache.get_many("fluency", "m@1", ["k", "x"]) == {"k": 2.5}
    assert cache.get_many("fluency", "m@2", ["k"]) == {}
    assert cache.get_many("relevance", "m@1", ["k"]) == {}


def test_model_ids_are_stable_and_follow_the_weights(tiny_lm: Path, tmp_path: Path) -> None:
    scorer = FluencyScorer(tiny_lm)
    assert scorer.model_id == FluencyScorer(str(tiny_lm)).model_id
    assert scorer.model_id.startswith("lm@")
    copy = shutil.copytree(tiny_lm, tmp_path / "elsewhere" / "lm")
    assert FluencyScorer(copy).model_id == scorer.model_id
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4] + b"\x00\x00\x80\x3f")
    assert FluencyScorer(copy).model_id != scorer.model_id
    assert RelevanceScorer().model_id.startswith("minilm@")


def test_verdict_json_round_trip(tiny_lm: Path) -> None:
    judge = Judge(JudgeConfig(fluency_model=str(tiny_lm), device="cpu"))
    verdicts = judge.check([JudgeRequest(OPENING), JudgeRequest(RELEVANT, previous=OPENING)])
    for verdict in verdicts:
        raw = json.loads(json.dumps(verdict.to_json(), allow_nan=False))
        assert set(raw["scores"]) == {"fluency", "relevance"}
        assert Verdict.from_json(raw) == verdict
    for bad in ({}, {"passed": True}, {"passed": True, "scores": {"fluency": {}}}):
        with pytest.raises(ValidationError, match="verdict"):
            Verdict.from_json(bad)


def test_config_defaults_are_the_papers_and_every_setting_has_help() -> None:
    config = JudgeConfig()
    assert (config.fluency_model, config.fluency_threshold) == (None, 35.0)
    assert (config.relevance_model, config.relevance_threshold) == ("minilm", 0.4)
    assert all(f.metadata.get("help") for f in fields(JudgeConfig))
    assert set(JudgeConfig.help()) == {f.name for f in fields(JudgeConfig)}
    assert JudgeConfig.from_json(config.to_json()) == config
    assert JudgeConfig.from_json(None) == config
    assert JudgeConfig.from_json({"fluency_threshold": 50}).fluency_threshold == 50


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"threshold": 3}, "unknown judge settings"),
        ({"fluency_model": ""}, "fluency_model"),
        ({"fluency_model": 3}, "fluency_model"),
        ({"fluency_model": "minilm"}, "not a language model"),
        ({"fluency_threshold": "35"}, "fluency_threshold"),
        ({"fluency_threshold": True}, "fluency_threshold"),
        ({"fluency_threshold": 1}, "above 1"),
        ({"fluency_threshold": math.inf}, "fluency_threshold"),
        ({"relevance_model": None}, "relevance_model"),
        ({"relevance_threshold": 1.5}, "from -1 to 1"),
        ({"relevance_threshold": math.nan}, "relevance_threshold"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.0}, "batch_size"),
        ({"batch_size": True}, "batch_size"),
        ({"max_length": 1}, "max_length"),
        ({"device": "tpu"}, "device"),
    ],
)
def test_bad_settings_say_how_to_fix_them(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidConfig, match=message):
        JudgeConfig.from_json(raw)


def test_bad_models_and_requests_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig, match="not a directory"):
        Judge(JudgeConfig(fluency_model=str(tmp_path / "missing")))
    with pytest.raises(InvalidConfig, match="no config.json"):
        Judge(JudgeConfig(relevance_model=str(tmp_path)))
    with pytest.raises(InvalidConfig, match="object"):
        JudgeConfig.from_json([])  # type: ignore[arg-type]
    for text, previous in (("", None), ("  ", None), ("hi", ""), (None, None)):
        with pytest.raises(ValidationError):
            JudgeRequest(text, previous)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="JudgeRequest"):
        Judge().check(["hi"])  # type: ignore[list-item]
    assert Judge().check([]) == []


def test_importing_the_judges_loads_no_model_library() -> None:
    code = "import sys, models.judges; print('torch' in sys.modules, 'transformers' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=root, check=True)  # fmt: skip
    assert result.stdout.split() == ["False", "False"]
