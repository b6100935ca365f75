"""Relevance as the cosine similarity of two sentence embeddings (Yao et al. 2021: >= 0.4).

Each text is embedded the way sentence-transformers uses all-MiniLM-L6-v2: the encoder's
last hidden states averaged over the text's tokens ([CLS] and [SEP] included, padding not),
then scaled to unit length, so the dot product of two embeddings is their cosine similarity.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from models.backbones import MINILM
from models.judges.scorer import LocalModelScorer


class RelevanceScorer(LocalModelScorer):
    """Cosine similarities of (previous utterance, reply) pairs; the encoder loads on use."""

    auto_class: ClassVar[str] = "AutoModel"
    role: ClassVar[str] = "relevance_model"

    def __init__(
        self, model: str | Path = MINILM, *, batch_size: int = 32, max_length: int = 128,
        device: str = "auto",
    ) -> None:  # fmt: skip
        super().__init__(model, batch_size=batch_size, max_length=max_length, device=device)

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit-length mean-pooled embeddings, one row per text (a float32 torch tensor)."""
        import torch
        import torch.nn.functional as F

        self.load()
        rows = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            encoded = self._tokenizer(
                batch,
                padding=True,
                truncation=True,
                max_length=self._context(),
                return_tensors="pt",
            )
            inputs = {key: value.to(self.device) for key, value in encoded.items()}
            with torch.inference_mode():
                hidden = self._model(**inputs).last_hidden_state.float()
            mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            rows.append(F.normalize(pooled, p=2, dim=1).cpu())
        if not rows:
            return torch.zeros((0, 0))
        return torch.cat(rows)

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Cosine similarity of each (previous utterance, reply), in order.

        Every distinct text is embedded once, however many pairs it is in.
        """
        if not pairs:
            return []
        texts = list(dict.fromkeys(text for pair in pairs for text in pair))
        row = {text: index for index, text in enumerate(texts)}
        vectors = self.embed(texts)
        first = vectors[[row[previous] for previous, _ in pairs]]
        second = vectors[[row[reply] for _, reply in pairs]]
        return [float(value) for value in (first * second).sum(dim=1).tolist()]
