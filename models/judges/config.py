"""Settings of the Adversarial Taboo judge, with the thresholds of Yao et al. (AAAI 2021).

Plain Python: it imports neither torch nor transformers, so the platform can check a game's
judge settings without them. `model_directory` and `model_id` are here too because a study
config names its models by these rules before any model is loaded.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from crowd.exceptions import InvalidConfig
from models.backbones import MINILM, minilm_path
from models.checks import is_int, is_number

WHERE = "judge config"
MAX_BATCH_SIZE = 1024
MAX_LENGTH = 8192
# Files up to this size go whole into a model's fingerprint; of larger ones (the weights)
# the first and last FINGERPRINT_BYTES, which differ after any fine-tuning.
FINGERPRINT_BYTES = 1 << 20


@dataclass(frozen=True)
class JudgeConfig:
    """What checks an utterance must pass; every field says what it does in its help."""

    fluency_model: str | None = field(
        default=None,
        metadata={"help": "Local directory of a causal language model (config.json, weights, "
                  "tokenizer) whose perplexity measures fluency; nothing is downloaded. "
                  "None: fluency is not checked and every verdict records it as skipped."},
    )  # fmt: skip
    fluency_threshold: float = field(
        default=35.0,
        metadata={"help": "An utterance is fluent when its perplexity is below this (paper: "
                  "35 with its fine-tuned GPT-2; a different model needs its own value)."},
    )  # fmt: skip
    relevance_model: str = field(
        default=MINILM,
        metadata={"help": "Sentence encoder for relevance: 'minilm' for the all-MiniLM-L6-v2 "
                  "bundled with crowd[ml], or a local encoder directory."},
    )  # fmt: skip
    relevance_threshold: float = field(
        default=0.4,
        metadata={"help": "A reply is relevant when the cosine similarity of its embedding "
                  "and the previous utterance's is at or above this (paper: 0.4)."},
    )  # fmt: skip
    batch_size: int = field(
        default=32, metadata={"help": "Texts per forward pass of either model."}
    )
    max_length: int = field(
        default=128,
        metadata={"help": "Tokens kept of one text (for fluency counting the start token); "
                  "longer texts are cut at the end."},
    )  # fmt: skip
    device: str = field(
        default="auto",
        metadata={"help": "auto (cuda when available, else cpu), cpu or cuda[:N]. Scores are "
                  "computed in float32 on every device."},
    )  # fmt: skip

    def __post_init__(self) -> None:
        device_ok = isinstance(self.device, str) and (
            self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")
        )
        fluency_ok = self.fluency_model is None or (
            isinstance(self.fluency_model, str) and bool(self.fluency_model.strip())
        )
        checks = [
            (fluency_ok, "fluency_model",
             "give the local directory of a causal language model, or null to skip fluency"),
            (self.fluency_model != MINILM, "fluency_model",
             f"{MINILM!r} is a sentence encoder, not a language model: give the directory "
             "of a causal language model, or null to skip fluency"),
            (is_number(self.fluency_threshold) and self.fluency_threshold > 1,
             "fluency_threshold",
             "must be a number above 1 (perplexity is at least 1; the paper used 35)"),
            (isinstance(self.relevance_model, str) and bool(self.relevance_model.strip()),
             "relevance_model", f"give {MINILM!r} or the local directory of a sentence encoder"),
            (is_number(self.relevance_threshold) and -1 <= self.relevance_threshold <= 1,
             "relevance_threshold",
             "must be a number from -1 to 1 (a cosine similarity; the paper used 0.4)"),
            (is_int(self.batch_size) and 1 <= self.batch_size <= MAX_BATCH_SIZE, "batch_size",
             f"must be a whole number from 1 to {MAX_BATCH_SIZE}"),
            (is_int(self.max_length) and 2 <= self.max_length <= MAX_LENGTH, "max_length",
             f"must be a whole number of tokens from 2 to {MAX_LENGTH}"),
            (device_ok, "device", "must be auto, cpu, cuda or cuda:N"),
        ]  # fmt: skip
        for passed, where, message in checks:
            if not passed:
                raise InvalidConfig(message, f"{WHERE}: {where}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any] | None) -> JudgeConfig:
        """A config from plain data; unknown keys are an error that names the known ones."""
        if raw is not None and not isinstance(raw, dict):
            raise InvalidConfig("must be an object of judge settings", WHERE)
        raw = dict(raw or {})
        known = sorted(f.name for f in fields(cls))
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise InvalidConfig(f"unknown judge settings {unknown}; known: {known}", WHERE)
        return cls(**raw)

    @classmethod
    def help(cls) -> dict[str, str]:
        """Each setting's help text, for `--help` and the API description."""
        return {f.name: str(f.metadata.get("help", "")) for f in fields(cls)}


def model_directory(name: str | Path, role: str) -> Path:
    """The local directory of a judge's model: 'minilm' or a directory with a config.json."""
    if str(name) == MINILM:
        return minilm_path()
    path = Path(name).expanduser()
    if not path.is_dir():
        raise InvalidConfig(
            f"{str(name)!r} is not a directory: give a local model directory (config.json, "
            "weights, tokenizer), e.g. one saved with save_pretrained; nothing is downloaded",
            role,
        )
    if not (path / "config.json").is_file():
        raise InvalidConfig(f"{path} has no config.json: is it a transformers model?", role)
    return path


def model_id(name: str | Path, directory: Path) -> str:
    """A stable name for a model's scores: its name or directory name, '@', a content hash.

    The hash covers every file at the top of the directory (names, sizes, and the contents,
    of large files the first and last MiB), so retrained weights get a new id and old cached
    scores are not reused, while a copy of the same model elsewhere keeps its id.
    """
    label = MINILM if str(name) == MINILM else directory.resolve().name
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        size = path.stat().st_size
        digest.update(f"{path.name}\x00{size}\x00".encode())
        with path.open("rb") as handle:
            if size <= 2 * FINGERPRINT_BYTES:
                digest.update(handle.read())
            else:
                digest.update(handle.read(FINGERPRINT_BYTES))
                handle.seek(-FINGERPRINT_BYTES, 2)
                digest.update(handle.read(FINGERPRINT_BYTES))
    return f"{label}@{digest.hexdigest()[:12]}"


def pick_device(device: str) -> str:
    """The torch device for a config's `device` ('auto': cuda when available)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidConfig("CUDA is not available here: use device cpu or auto", "device")
    return device
