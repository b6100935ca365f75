"""Fluency as a causal language model's perplexity (Yao et al. 2021: fluent below 35).

The perplexity of a text of tokens x_1..x_n is exp(-(1/n) sum_i log p(x_i | s, x_<i)), where
s is a start token put before the text so that its first token is scored too. s is the
tokenizer's beginning-of-sequence token, else the model config's, else the end-of-sequence
token (GPT-2 and Qwen mark the start of a document with it). A model with none of them
cannot score the first token: it is then context only, and a text of one token has no token
left to score, so its perplexity is infinite, as is that of a text with no tokens at all.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from models.judges.scorer import LocalModelScorer

log = logging.getLogger(__name__)


class FluencyScorer(LocalModelScorer):
    """Perplexities of texts under a local causal LM, loaded on first use, in eval mode."""

    auto_class: ClassVar[str] = "AutoModelForCausalLM"
    role: ClassVar[str] = "fluency_model"

    def __init__(
        self, model: str | Path, *, batch_size: int = 32, max_length: int = 128,
        device: str = "auto",
    ) -> None:  # fmt: skip
        super().__init__(model, batch_size=batch_size, max_length=max_length, device=device)
        self._start: int | None = None

    def after_load(self, tokenizer: Any, model: Any) -> None:
        self._start = start_token(tokenizer, model.config)
        if self._start is None:
            log.warning("%s has no start token: the first token of each text is not scored",
                        self.directory)  # fmt: skip

    def perplexity(self, texts: Sequence[str]) -> list[float]:
        """exp(mean token negative log-likelihood) of each text, in order, batch by batch."""
        self.load()
        scores: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            scores.extend(self._batch(texts[start : start + self.batch_size]))
        return scores

    def _batch(self, texts: Sequence[str]) -> list[float]:
        import torch
        import torch.nn.functional as F

        prefix = [] if self._start is None else [self._start]
        room = self._context() - len(prefix)
        encoded = self._tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        rows = [prefix + list(ids)[:room] for ids in encoded]
        width = max(2, max(len(row) for row in rows))
        # Right padding keeps every text at the positions it has alone; padded positions
        # are masked out of attention and of the loss, so the id used does not matter.
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for index, row in enumerate(rows):
            ids[index, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[index, : len(row)] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            logits = self._model(input_ids=ids, attention_mask=mask).logits.float()
        targets = ids[:, 1:]
        scored = mask[:, 1:].bool()
        nll = F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
        ).view(targets.shape)
        # where, not a product: padding must not bring a NaN into a text's sum.
        totals = torch.where(scored, nll.to(torch.float64), 0.0).sum(dim=1)
        counts = scored.sum(dim=1)
        return [
            _exp(total / count) if count > 0 else math.inf
            for total, count in zip(totals.tolist(), counts.tolist(), strict=True)
        ]


def _exp(value: float) -> float:
    try:
        return math.exp(value)
    except OverflowError:  # a mean NLL above ~709 nats
        return math.inf


def start_token(tokenizer: Any, config: Any) -> int | None:
    """The id put before each text: BOS of the tokenizer or model, else EOS, else None."""
    for value in (
        tokenizer.bos_token_id,
        getattr(config, "bos_token_id", None),
        tokenizer.eos_token_id,
        getattr(config, "eos_token_id", None),
    ):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
