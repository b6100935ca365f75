"""What both judge scorers share: a local model directory, its id, loading on first use."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

from models.judges.config import model_directory, model_id, pick_device

log = logging.getLogger(__name__)


class LocalModelScorer:
    """A transformers model from a local directory, loaded once in eval mode, in float32.

    Subclasses name the transformers auto class (`auto_class`) and the config field the
    directory comes from (`role`), and may act on the loaded model (`after_load`).
    """

    auto_class: ClassVar[str]
    role: ClassVar[str]

    def __init__(
        self, model: str | Path, *, batch_size: int = 32, max_length: int = 128,
        device: str = "auto",
    ) -> None:  # fmt: skip
        self.name = str(model)
        self.directory = model_directory(model, self.role)
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self._model_id: str | None = None
        self._model: Any = None
        self._tokenizer: Any = None

    @property
    def model_id(self) -> str:
        """The model's name and a hash of its files; computed without loading the model."""
        if self._model_id is None:
            self._model_id = model_id(self.name, self.directory)
        return self._model_id

    @property
    def model(self) -> Any:
        """The loaded transformers model."""
        self.load()
        return self._model

    def load(self) -> None:
        """Load the tokenizer and the model onto the device (once)."""
        if self._model is not None:
            return
        import transformers

        device = pick_device(self.device)
        path = str(self.directory)
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        # float32 everywhere: scores are compared with thresholds, so they must not depend
        # on a device's half-precision rounding.
        auto = getattr(transformers, self.auto_class)
        model: Any = auto.from_pretrained(path, local_files_only=True)
        self._model = model.to(device).eval()
        self._tokenizer = tokenizer
        self.device = device
        self.after_load(tokenizer, model)
        log.info("loaded %s %s on %s", self.role, path, device)

    def after_load(self, tokenizer: Any, model: Any) -> None:
        """Hook: anything a subclass derives from the loaded tokenizer and model."""

    def _context(self) -> int:
        """Tokens of one row: max_length, or fewer where the model's context is shorter."""
        config = self._model.config
        for name in ("max_position_embeddings", "n_positions"):
            value = getattr(config, name, None)
            if isinstance(value, int) and value > 0:
                return min(self.max_length, value)
        return self.max_length
