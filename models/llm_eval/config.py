"""How an LLM evaluation runs: one config dataclass whose fields carry their help text.

It imports neither torch nor the analysis code, so the CLI can build its options from it
without slowing down `crowd --help`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crowd.exceptions import InvalidConfig
from models.checks import is_int, is_number

MAX_SAMPLES = 20
MAX_NEW_TOKENS = 4096
MAX_TEMPERATURE = 5.0
MAX_PERSONA_CHARS = 1000


@dataclass(frozen=True)
class LLMEvalConfig:
    """How to ask a language model for ratings; the defaults are Chiang & Lee's."""

    model: str = field(
        metadata={
            "help": "Local directory of a causal language model (config.json, weights, "
            "tokenizer); nothing is downloaded."
        }
    )
    samples: int = field(
        default=3,
        metadata={"help": "Answers sampled per text and question; each is one rating."},
    )
    top_p: float = field(
        default=0.9, metadata={"help": "Nucleus sampling: keep the most likely tokens up to p."}
    )
    temperature: float = field(
        default=1.0,
        metadata={"help": "Sampling temperature (> 0); lower is closer to greedy decoding."},
    )
    max_new_tokens: int = field(
        default=64,
        metadata={"help": "Longest answer in tokens; the first number in it is the rating."},
    )
    persona: str | None = field(
        default=None,
        metadata={"help": "A line put before the instructions, e.g. 'You are an English teacher.'"},
    )
    explain: bool = field(
        default=False,
        metadata={"help": "Ask the model to explain its decision after giving the rating."},
    )
    seed: int = field(
        default=0, metadata={"help": "Random seed: the same seed and model give the same answers."}
    )
    batch_size: int = field(
        default=8,
        metadata={"help": "Prompts generated together (each with all its samples)."},
    )
    device: str = field(
        default="auto",
        metadata={"help": "auto (cuda with bfloat16 when available, else cpu), cpu or cuda[:N]."},
    )

    def __post_init__(self) -> None:
        persona_ok = self.persona is None or (
            isinstance(self.persona, str) and len(self.persona) <= MAX_PERSONA_CHARS
        )
        device_ok = isinstance(self.device, str) and (
            self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")
        )
        checks = [
            (isinstance(self.model, str) and bool(self.model.strip()), "model",
             "give the local directory of a causal language model"),
            (is_int(self.samples) and 1 <= self.samples <= MAX_SAMPLES, "samples",
             f"must be a whole number from 1 to {MAX_SAMPLES} (the paper used 3)"),
            (is_number(self.top_p) and 0 < self.top_p <= 1, "top_p",
             "must be in (0, 1]: 0.9 keeps the likeliest tokens that make up 90% of the mass"),
            (is_number(self.temperature) and 0 < self.temperature <= MAX_TEMPERATURE,
             "temperature",
             f"must be in (0, {MAX_TEMPERATURE}]; for near-greedy answers use e.g. 0.01"),
            (is_int(self.max_new_tokens) and 1 <= self.max_new_tokens <= MAX_NEW_TOKENS,
             "max_new_tokens", f"must be a whole number from 1 to {MAX_NEW_TOKENS}"),
            (persona_ok, "persona",
             f"must be text of at most {MAX_PERSONA_CHARS} characters, or absent"),
            (isinstance(self.explain, bool), "explain", "must be true or false"),
            (is_int(self.seed), "seed", "must be a whole number"),
            (is_int(self.batch_size) and self.batch_size >= 1, "batch_size",
             "must be a whole number of at least 1"),
            (device_ok, "device", "must be auto, cpu, cuda or cuda:N"),
        ]  # fmt: skip
        for passed, where, message in checks:
            if not passed:
                raise InvalidConfig(message, where)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> LLMEvalConfig:
        """A config from plain values (a job's options), refusing unknown keys."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise InvalidConfig(f"unknown LLM evaluation options {unknown}: use {names}")
        return cls(**dict(options))

    def to_options(self) -> dict[str, Any]:
        """The config as plain values, for a job's arguments."""
        return dataclasses.asdict(self)

    @classmethod
    def help(cls, name: str) -> str:
        """The help text of one field (the CLI's options reuse it)."""
        return str({f.name: f for f in dataclasses.fields(cls)}[name].metadata["help"])

