"""Settings of a reward-model run, with the defaults of Ziegler et al. (2019)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from crowd.exceptions import InvalidConfig
from models.checks import is_int, is_number

KINDS = ("auto", "causal", "encoder")
POOLINGS = ("auto", "last", "mean", "cls")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class RewardConfig:
    """A reward model's training settings; every field says what it does in its help."""

    backbone: str = field(
        default="minilm",
        metadata={"help": "Local model directory (config.json, weights, tokenizer), or "
                  "'minilm' for the all-MiniLM-L6-v2 encoder bundled with crowd[ml]."},
    )  # fmt: skip
    kind: str = field(
        default="auto",
        metadata={"help": "'causal' (reward from the last token of a causal LM), 'encoder' "
                  "(from the pooled output), or 'auto' to tell from the model's config."},
    )  # fmt: skip
    pooling: str = field(
        default="auto",
        metadata={"help": "How one sequence becomes a vector: 'last' token (causal LMs), "
                  "'mean' of the tokens or the 'cls' pooler output (encoders); 'auto' picks "
                  "'last' for causal LMs and 'mean' for encoders."},
    )  # fmt: skip
    share_query: bool = field(
        default=True,
        metadata={"help": "Put each label's query once in a row with its K candidates, each "
                  "seeing the query and itself (a block attention mask): exact for causal "
                  "LMs, and fewer tokens. For encoders the query's tokens do not see the "
                  "candidates, which can cost some accuracy (mock task, 1k labels: 0.78 vs "
                  "0.82 top-1); false gives every candidate a row of its own."},
    )  # fmt: skip
    epochs: int = field(default=1, metadata={"help": "Passes over the labels (paper: 1)."})
    learning_rate: float = field(
        default=1.77e-5, metadata={"help": "Adam's learning rate (paper: 1.77e-5)."}
    )
    batch_size: int = field(
        default=8,
        metadata={"help": "Labels per step, each with all K candidates (paper: 8 for style, "
                  "32 for summarization)."},
    )  # fmt: skip
    dropout: float = field(
        default=0.0, metadata={"help": "Dropout in the backbone while training (paper: off)."}
    )
    max_length: int = field(
        default=128,
        metadata={"help": "Tokens of one query plus candidate; longer queries are cut from "
                  "the start so the candidate is kept."},
    )  # fmt: skip
    held_out: float = field(
        default=0.1,
        metadata={"help": "Share of items kept out of training to measure top-1 accuracy."},
    )
    seed: int = field(default=0, metadata={"help": "Seed for the split, the head and shuffling."})
    device: str = field(
        default="auto", metadata={"help": "'cuda', 'cpu', or 'auto' (a GPU when there is one)."}
    )
    bf16: bool | None = field(
        default=None,
        metadata={"help": "Train in bfloat16 autocast; None: on a GPU that supports it."},
    )
    normalize: bool = field(
        default=True,
        metadata={"help": "Set a gain and bias after training so the rewards of base-policy "
                  "samples have mean 0 and variance 1."},
    )  # fmt: skip
    base_policy: str | None = field(
        default=None,
        metadata={"help": "Policy whose candidates are the base-policy samples for the "
                  "normalization; None uses every candidate."},
    )  # fmt: skip
    eval_batch_size: int = field(
        default=32, metadata={"help": "Labels per forward pass when scoring held-out items."}
    )

    def __post_init__(self) -> None:
        def check(ok: bool, message: str) -> None:
            if not ok:
                raise InvalidConfig(message, "reward model config")

        check(isinstance(self.backbone, str) and bool(self.backbone.strip()),
              "backbone must name a model directory or 'minilm'")  # fmt: skip
        for name in ("epochs", "batch_size", "eval_batch_size", "max_length", "seed"):
            check(is_int(getattr(self, name)), f"{name} must be a whole number")
        for name in ("learning_rate", "dropout", "held_out"):
            check(is_number(getattr(self, name)), f"{name} must be a number")
        for name in ("share_query", "normalize"):
            check(isinstance(getattr(self, name), bool), f"{name} must be true or false")
        check(self.bf16 is None or isinstance(self.bf16, bool), "bf16 must be true, false or null")
        check(self.base_policy is None or isinstance(self.base_policy, str),
              "base_policy must be a policy name or null")  # fmt: skip
        for name in ("kind", "pooling", "device"):
            check(isinstance(getattr(self, name), str), f"{name} must be text")
        check(self.kind in KINDS, f"kind must be one of {', '.join(KINDS)}")
        check(self.pooling in POOLINGS, f"pooling must be one of {', '.join(POOLINGS)}")
        check(self.device in DEVICES, f"device must be one of {', '.join(DEVICES)}")
        check(isinstance(self.epochs, int) and 1 <= self.epochs <= 100, "epochs must be 1-100")
        check(0 < float(self.learning_rate) < 1, "learning_rate must be in (0, 1)")
        check(isinstance(self.batch_size, int) and 1 <= self.batch_size <= 1024,
              "batch_size must be 1-1024")  # fmt: skip
        check(isinstance(self.eval_batch_size, int) and 1 <= self.eval_batch_size <= 4096,
              "eval_batch_size must be 1-4096")  # fmt: skip
        check(0 <= float(self.dropout) < 1, "dropout must be in [0, 1)")
        check(isinstance(self.max_length, int) and 8 <= self.max_length <= 8192,
              "max_length must be 8-8192 tokens")  # fmt: skip
        check(0 <= float(self.held_out) < 1, "held_out must be in [0, 1)")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any] | None) -> RewardConfig:
        """A config from plain data; unknown keys are an error that names the known ones."""
        raw = dict(raw or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise InvalidConfig(
                f"unknown reward model settings {unknown}; known: {sorted(known)}",
                "reward model config",
            )
        try:
            return cls(**raw)
        except (TypeError, ValueError) as error:
            raise InvalidConfig(str(error), "reward model config") from None

    @classmethod
    def help(cls) -> dict[str, str]:
        """Each setting's help text, for `--help` and the API description."""
        return {f.name: str(f.metadata.get("help", "")) for f in fields(cls)}


# Where a run's labels come from: every accepted label, or one aggregated label per item.
LABEL_SOURCES = ("raw", "majority_vote", "dawid_skene", "bradley_terry")
MAX_RETRAIN_EVERY = 10_000_000


def validate_study_settings(raw: Any) -> dict[str, Any]:
    """A comparison study's `reward_model` config, checked, with its defaults filled in.

    {"retrain_every": N or null (retrain from scratch after every N new accepted labels),
     "labels": "raw" or an aggregation method, "settings": {RewardConfig fields}}
    """
    where = "reward_model"
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InvalidConfig("must be an object with retrain_every, labels and settings", where)
    unknown = sorted(set(raw) - {"retrain_every", "labels", "settings"})
    if unknown:
        raise InvalidConfig(f"unknown keys {unknown}: use retrain_every, labels, settings", where)
    every = raw.get("retrain_every")
    if every is not None and (
        not isinstance(every, int) or isinstance(every, bool) or not 1 <= every <= MAX_RETRAIN_EVERY
    ):
        raise InvalidConfig("retrain_every must be a whole number of labels (1 or more) or null",
                            where)  # fmt: skip
    labels = raw.get("labels", "raw")
    if labels not in LABEL_SOURCES:
        raise InvalidConfig(f"labels must be one of {', '.join(LABEL_SOURCES)}", where)
    settings = raw.get("settings") or {}
    if not isinstance(settings, dict):
        raise InvalidConfig("settings must be an object of reward model settings", where)
    RewardConfig.from_json(settings)  # raises on unknown or bad values
    check_backbone_name(settings.get("backbone", MINILM_NAME))
    return {"retrain_every": every, "labels": labels, "settings": dict(settings)}


MINILM_NAME = "minilm"
BACKBONE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_backbone_name(name: Any) -> str:
    """A backbone named through the API or a study config: 'minilm' or a directory name
    under CROWD_DATA_DIR/backbones, never a path (experimenters must not read the server's
    files or each other's models). The CLI, run by the operator, may give any path."""
    if not isinstance(name, str) or not BACKBONE_NAME.fullmatch(name) or ".." in name:
        raise InvalidConfig(
            "backbone must be 'minilm' or the name of a directory in CROWD_DATA_DIR/backbones "
            "(no paths; the operator's CLI takes paths)",
            "backbone",
        )
    return name
