"""A local causal language model as one more rater: sampled answers, parsed into ratings.

Chiang & Lee (2023) sampled three answers per question with nucleus sampling (p = 0.9,
temperature 1) and kept every sample as a rating, so the LLM is a group of raters whose
agreement and bias the Likert analysis measures like any human group's. Here the model is a
directory on disk (transformers' config, weights and tokenizer; nothing is downloaded),
prompted through its chat template when the tokenizer has one, else with plain text.

Example:
    >>> config = LLMEvalConfig(model="models/my-lm", samples=3, max_new_tokens=32)
    >>> answers = LLMEvaluator(config).rate(prompts)  # doctest: +SKIP
    >>> answers[0].text, answers[0].rating  # doctest: +SKIP
    ('I would rate it a 4.', 4.0)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crowd.exceptions import InvalidConfig
from models.llm_eval.config import MAX_TEMPERATURE, LLMEvalConfig, is_number
from models.llm_eval.parse import parse_rating
from models.llm_eval.prompts import RatingPrompt, build_prompt
from tasks.likert.config import validate_study_config

log = logging.getLogger(__name__)

Progress = Callable[[float], None]

# Base (non-chat) models continue text: this cue makes the next words an answer.
PLAIN_SUFFIX = "\nAnswer:"


@dataclass(frozen=True)
class LLMAnswer:
    """One sampled answer to one prompt: the raw text and the rating parsed from it."""

    item: str
    attribute: str
    sample: int  # 1-based: sample k of every prompt is one rater
    prompt: str
    text: str
    rating: float | None  # None: the answer had no rating in the scale (missing, never 0)
    temperature: float
    top_p: float


def resolve_model(path: str | Path) -> Path:
    """The model directory, checked: it must exist locally and hold a config.json."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise InvalidConfig(
            f"{str(path)!r} is not a directory: give a local model directory (config.json, "
            "weights, tokenizer), e.g. one saved with save_pretrained",
            "model",
        )
    if not (directory / "config.json").is_file():
        raise InvalidConfig(f"{directory} has no config.json: is it a transformers model?", "model")
    return directory


class LLMEvaluator:
    """Loads the model once and rates prompts with sampled answers."""

    def __init__(self, config: LLMEvalConfig) -> None:
        self.config = config
        self._model: Any = None
        self._tokenizer: Any = None
        self.device: str | None = None

    @property
    def uses_chat_template(self) -> bool:
        self.load()
        return bool(getattr(self._tokenizer, "chat_template", None))

    def load(self) -> None:
        """Load the tokenizer and the model onto the device (once)."""
        if self._model is not None:
            return
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = resolve_model(self.config.model)
        device = self.config.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise InvalidConfig("CUDA is not available here: use --device cpu or auto", "device")
        dtype = torch.float32
        if device.startswith("cuda"):
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        # Left padding: generation continues every prompt of a batch from its own last token.
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            if tokenizer.eos_token is None:
                raise InvalidConfig(
                    f"the tokenizer in {path} has neither a pad nor an end-of-sequence token: "
                    "set one (tokenizer.pad_token = ...) and save it again",
                    "model",
                )
            tokenizer.pad_token = tokenizer.eos_token
        model: Any = AutoModelForCausalLM.from_pretrained(
            str(path), local_files_only=True, dtype=dtype
        )
        self._model = model.to(device).eval()
        self._tokenizer = tokenizer
        self.device = device
        log.info("loaded %s on %s (%s)", path, device, dtype)

    def format(self, prompt: str) -> str:
        """The prompt as the model reads it: a user turn of its chat template, or plain text."""
        self.load()
        if self.uses_chat_template:
            messages = [{"role": "user", "content": prompt}]
            return str(
                self._tokenizer.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=True
                )
            )
        return prompt + PLAIN_SUFFIX

    def _context_limit(self) -> int | None:
        config = self._model.config
        for name in ("max_position_embeddings", "n_positions"):
            value = getattr(config, name, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    def generate(self, prompts: Sequence[str], temperature: float | None = None) -> list[list[str]]:
        """`samples` sampled answers per prompt (decoded new tokens only), in prompt order."""
        import torch
        from transformers import GenerationConfig

        self.load()
        config, tokenizer, model = self.config, self._tokenizer, self._model
        texts = [self.format(prompt) for prompt in prompts]
        # A chat template already holds the special tokens the model expects.
        encoded = tokenizer(
            texts,
            return_tensors="pt",
            padding=True,
            add_special_tokens=not self.uses_chat_template,
            return_token_type_ids=False,
        )
        limit = self._context_limit()
        longest = int(encoded["input_ids"].shape[1])
        if limit is not None and longest + config.max_new_tokens > limit:
            raise InvalidConfig(
                f"a prompt of {longest} tokens plus {config.max_new_tokens} new tokens exceeds "
                f"the model's context of {limit}: lower max_new_tokens, shorten the texts, or "
                "use a model with a longer context",
                "max_new_tokens",
            )
        generation = GenerationConfig(
            do_sample=True,
            top_p=config.top_p,
            top_k=0,  # nucleus sampling only: transformers would otherwise add top-k 50
            temperature=config.temperature if temperature is None else temperature,
            max_new_tokens=config.max_new_tokens,
            num_return_sequences=config.samples,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=(
                tokenizer.eos_token_id
                if model.generation_config.eos_token_id is None
                else model.generation_config.eos_token_id
            ),
            bos_token_id=model.generation_config.bos_token_id,
        )
        inputs = {key: value.to(self.device) for key, value in encoded.items()}
        with torch.inference_mode():
            output = model.generate(**inputs, generation_config=generation)
        new_tokens = output[:, inputs["input_ids"].shape[1] :]
        decoded = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        n = config.samples
        # generate returns the samples of each prompt next to each other.
        return [[text.strip() for text in decoded[i * n : (i + 1) * n]] for i in range(len(texts))]

    def rate(
        self,
        prompts: Sequence[RatingPrompt],
        temperature: float | None = None,
        progress: Progress | None = None,
    ) -> list[LLMAnswer]:
        """Every sample of every prompt, with its parsed rating, in prompt then sample order.

        The random generator is seeded once per call, so the same config (and temperature)
        gives the same answers on the same machine.
        """
        import torch

        self.load()
        config = self.config
        used = config.temperature if temperature is None else temperature
        if not (is_number(used) and 0 < used <= MAX_TEMPERATURE):
            raise InvalidConfig(f"must be in (0, {MAX_TEMPERATURE}]", "temperature")
        torch.manual_seed(config.seed)
        answers: list[LLMAnswer] = []
        if not prompts and progress is not None:
            progress(1.0)
        size = config.batch_size
        for start in range(0, len(prompts), size):
            batch = prompts[start : start + size]
            samples = self.generate([prompt.text for prompt in batch], temperature=used)
            for prompt, texts in zip(batch, samples, strict=True):
                for index, text in enumerate(texts, start=1):
                    answers.append(
                        LLMAnswer(
                            item=prompt.item,
                            attribute=prompt.attribute,
                            sample=index,
                            prompt=prompt.text,
                            text=text,
                            rating=parse_rating(text, prompt.low, prompt.high),
                            temperature=float(used),
                            top_p=float(config.top_p),
                        )
                    )
            if progress is not None:
                progress(min(1.0, (start + len(batch)) / len(prompts)))
        return answers

    def sweep(
        self,
        prompts: Sequence[RatingPrompt],
        temperatures: Sequence[float],
        progress: Progress | None = None,
    ) -> dict[float, list[LLMAnswer]]:
        """The same prompts rated at each temperature (each run seeded alike)."""
        if not temperatures or len(set(temperatures)) != len(temperatures):
            raise InvalidConfig("give one or more different temperatures", "temperature")
        results: dict[float, list[LLMAnswer]] = {}
        for index, temperature in enumerate(temperatures):

            def part(fraction: float, index: int = index) -> None:
                if progress is not None:
                    progress((index + fraction) / len(temperatures))

            results[float(temperature)] = self.rate(prompts, temperature=temperature, progress=part)
        return results


SANITY_TITLE = "Stocks rise as the central bank keeps interest rates unchanged"


@dataclass(frozen=True)
class SanityCheck:
    """Chiang & Lee's check: two identical titles must get the top meaning-preservation score."""

    answers: list[LLMAnswer]
    top: int

    @property
    def passed(self) -> bool:
        return bool(self.answers) and all(answer.rating == self.top for answer in self.answers)

    @property
    def top_share(self) -> float:
        """The share of sampled answers that gave the top score."""
        hits = sum(1 for answer in self.answers if answer.rating == self.top)
        return hits / len(self.answers) if self.answers else 0.0


def sanity_check(evaluator: LLMEvaluator, title: str = SANITY_TITLE) -> SanityCheck:
    """Ask the attack template's meaning-preservation question about a title and itself."""
    config = validate_study_config({"template": "attack"})
    prompt = build_prompt(
        {"text": title, "reference": title},
        config,
        "meaning_preservation",
        item="identical-titles",
        persona=evaluator.config.persona,
        explain=evaluator.config.explain,
    )
    return SanityCheck(answers=evaluator.rate([prompt]), top=prompt.high)
