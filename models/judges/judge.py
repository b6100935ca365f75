"""The judge of Adversarial Taboo: is an utterance fluent, and relevant to the one before?

Yao et al. (AAAI 2021), "Adversarial Language Games for Advanced Natural Language
Intelligence": every utterance must have a language-model perplexity below a threshold (35)
and a relevance score with the previous utterance at or above one (0.4); one that fails
either check loses the game for its player. Both checks record their score, threshold and
model with every utterance. The first utterance has nothing to be relevant to, so its
relevance is skipped (and passes).

Scores are cached by model and text (`ScoreCache`), so a text judged once, for a replay or a
second game, costs no model call; only the misses of a `check` go to the models, in batches.

Example:
    >>> judge = Judge(JudgeConfig(fluency_model="models/gpt2-taboo"), cache=MemoryCache())
    >>> verdicts = judge.check([JudgeRequest("Where do apples grow?", previous=None)])
    >>> verdicts[0].passed, verdicts[0].scores["fluency"]["score"]  # doctest: +SKIP
    (True, 21.3)
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict

from crowd.exceptions import InvalidConfig, ValidationError
from models.judges.config import JudgeConfig
from models.judges.fluency import FluencyScorer
from models.judges.relevance import RelevanceScorer

log = logging.getLogger(__name__)

Kind = Literal["fluency", "relevance"]
KINDS: tuple[Kind, ...] = ("fluency", "relevance")
NO_FLUENCY_MODEL = "no fluency model configured"
FIRST_UTTERANCE = "first utterance"


def cache_key(kind: str, text: str, previous: str | None = None) -> str:
    """sha256 hex of the text (fluency) or of previous + NUL + text (relevance)."""
    if kind == "fluency":
        if previous is not None:
            raise ValueError("a fluency key is of the text alone: leave previous out")
        material = text
    elif kind == "relevance":
        if previous is None:
            raise ValueError("a relevance key needs the previous utterance")
        material = previous + "\x00" + text
    else:
        raise ValueError(f"unknown score kind {kind!r}: use one of {', '.join(KINDS)}")
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class ScoreCache(Protocol):
    """Where scores are kept between checks, by kind, model id and `cache_key`."""

    def get_many(self, kind: str, model_id: str, keys: list[str]) -> dict[str, float]:
        """The scores found among `keys`; missing keys are left out."""
        ...

    def put_many(self, kind: str, model_id: str, scores: dict[str, float]) -> None:
        """Keep `scores` (key -> score)."""
        ...


class MemoryCache:
    """A ScoreCache in a dict, for one process (tests, the CLI, a worker's lifetime)."""

    def __init__(self) -> None:
        self.scores: dict[tuple[str, str, str], float] = {}

    def get_many(self, kind: str, model_id: str, keys: list[str]) -> dict[str, float]:
        found = {key: self.scores.get((kind, model_id, key)) for key in keys}
        return {key: score for key, score in found.items() if score is not None}

    def put_many(self, kind: str, model_id: str, scores: dict[str, float]) -> None:
        for key, score in scores.items():
            self.scores[(kind, model_id, key)] = score

    def __len__(self) -> int:
        return len(self.scores)


@dataclass(frozen=True)
class JudgeRequest:
    """One utterance to judge and the utterance it replies to (None: the game's first)."""

    text: str
    previous: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValidationError("an utterance must be non-empty text", "text")
        if self.previous is not None and (
            not isinstance(self.previous, str) or not self.previous.strip()
        ):
            raise ValidationError(
                "the previous utterance must be non-empty text, or None for the first", "previous"
            )


class CheckScore(TypedDict):
    """One check of one utterance, as recorded with it."""

    score: float | None  # None: skipped, or the model could not score the text
    threshold: float
    model: str | None  # the model id that gave the score; None when skipped
    passed: bool
    skipped: str | None  # why the check was not made; None when it was


@dataclass(frozen=True)
class Verdict:
    """The checks of one utterance ("fluency", "relevance") and whether it passed them all.

    A fluency score of None that did not pass means the model gave an infinite perplexity
    (no token it could score, or a log-likelihood below what a float holds).
    """

    scores: dict[str, CheckScore]
    passed: bool

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "scores": {kind: dict(s) for kind, s in self.scores.items()}}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Verdict:
        """A verdict from what `to_json` gave."""
        try:
            scores = {
                kind: CheckScore(
                    score=None if check["score"] is None else float(check["score"]),
                    threshold=float(check["threshold"]),
                    model=check["model"],
                    passed=bool(check["passed"]),
                    skipped=check["skipped"],
                )
                for kind, check in raw["scores"].items()
            }
            return cls(scores=scores, passed=bool(raw["passed"]))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValidationError(
                f"not a verdict ({error!r}): give the object Verdict.to_json made", "verdict"
            ) from None


class Judge:
    """Checks utterances against a JudgeConfig; the models load on first need, once."""

    def __init__(self, config: JudgeConfig | None = None, cache: ScoreCache | None = None) -> None:
        self.config = config = config if config is not None else JudgeConfig()
        if not isinstance(config, JudgeConfig):
            raise InvalidConfig("give a JudgeConfig (JudgeConfig.from_json(raw))", "judge")
        self.cache = cache
        options: dict[str, Any] = {
            "batch_size": config.batch_size,
            "max_length": config.max_length,
            "device": config.device,
        }
        self.fluency: FluencyScorer | None = (
            None if config.fluency_model is None else FluencyScorer(config.fluency_model, **options)
        )
        self.relevance = RelevanceScorer(config.relevance_model, **options)

    def check(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """A verdict per request, in order; only texts not in the cache go to the models."""
        for request in requests:
            if not isinstance(request, JudgeRequest):
                raise ValidationError("give JudgeRequest(text, previous) objects", "requests")
        fluency = self._fluency(requests)
        relevance = self._relevance(requests)
        verdicts = []
        for first, second in zip(fluency, relevance, strict=True):
            scores = {"fluency": first, "relevance": second}
            verdicts.append(Verdict(scores=scores, passed=first["passed"] and second["passed"]))
        return verdicts

    def _fluency(self, requests: Sequence[JudgeRequest]) -> list[CheckScore]:
        threshold = float(self.config.fluency_threshold)
        scorer = self.fluency
        if scorer is None:
            return [
                CheckScore(score=None, threshold=threshold, model=None, passed=True,
                           skipped=NO_FLUENCY_MODEL)
                for _ in requests
            ]  # fmt: skip
        wanted = {cache_key("fluency", r.text): r.text for r in requests}
        found = self._lookup("fluency", scorer.model_id, wanted, scorer.perplexity)
        checks = []
        for request in requests:
            score = found[cache_key("fluency", request.text)]
            finite = math.isfinite(score)
            checks.append(
                CheckScore(
                    score=score if finite else None,
                    threshold=threshold,
                    model=scorer.model_id,
                    passed=finite and score < threshold,
                    skipped=None,
                )
            )
        return checks

    def _relevance(self, requests: Sequence[JudgeRequest]) -> list[CheckScore]:
        threshold = float(self.config.relevance_threshold)
        scorer = self.relevance
        wanted = {
            cache_key("relevance", r.text, r.previous): (r.previous, r.text)
            for r in requests
            if r.previous is not None
        }
        found = self._lookup("relevance", scorer.model_id, wanted, scorer.score) if wanted else {}
        checks = []
        for request in requests:
            if request.previous is None:
                checks.append(
                    CheckScore(
                        score=None,
                        threshold=threshold,
                        model=None,
                        passed=True,
                        skipped=FIRST_UTTERANCE,
                    )
                )
                continue
            score = found[cache_key("relevance", request.text, request.previous)]
            checks.append(
                CheckScore(
                    score=score,
                    threshold=threshold,
                    model=scorer.model_id,
                    passed=score >= threshold,
                    skipped=None,
                )
            )
        return checks

    def _lookup(
        self,
        kind: Kind,
        model_id: str,
        wanted: dict[str, Any],
        compute: Callable[[list[Any]], list[float]],
    ) -> dict[str, float]:
        """Scores of `wanted` (key -> model input): from the cache, the misses computed."""
        # The cache is keyed by max_length too: it changes the scores of long texts.
        namespace = f"{model_id};max_length={self.config.max_length}"
        keys = list(wanted)
        found = dict(self.cache.get_many(kind, namespace, keys)) if self.cache else {}
        missing = [key for key in keys if key not in found]
        if missing:
            computed = dict(zip(missing, compute([wanted[key] for key in missing]), strict=True))
            found.update(computed)
            if self.cache is not None:
                # Infinite perplexities are not kept: a JSON or SQL store could not hold them.
                finite = {key: score for key, score in computed.items() if math.isfinite(score)}
                if finite:
                    self.cache.put_many(kind, namespace, finite)
        log.debug("%s: %d texts, %d from the cache", kind, len(keys), len(keys) - len(missing))
        return found
