"""Training a RewardModel on best-of-K labels with the K-way loss of Ziegler et al. (2019).

For a label (x, y_0 .. y_{K-1}, b) the loss is the cross-entropy of softmax_i r(x, y_i)
against b. All K candidates of every label in a batch go through the backbone in one
forward pass. Like TRL's trainers, the loop is fixed and the steps are hooks
(tokenize, collate, compute_loss, training_step, on_step) that a subclass can override.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from crowd.exceptions import ValidationError
from models.reward.config import RewardConfig
from models.reward.data import Comparison, base_samples
from models.reward.model import Encoded, RewardModel, pick_device

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Label:
    """One comparison, tokenized, with the index chosen."""

    encoded: Encoded
    best: int


@dataclass
class Progress:
    """Where a run is, for a progress bar or a job's meta."""

    phase: str  # "tokenize", "train", "evaluate", "normalize", "done"
    step: int = 0
    total_steps: int = 0
    loss: float | None = None
    labels_seen: int = 0

    @property
    def fraction(self) -> float:
        if self.phase == "done":
            return 1.0
        return self.step / self.total_steps if self.total_steps else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "fraction": round(self.fraction, 4)}


@dataclass
class TrainResult:
    """What a run did and how well the model picks the labelled best on held-out items."""

    labels: int
    steps: int
    seconds: float
    labels_per_second: float
    final_loss: float | None
    held_out: dict[str, Any] = field(default_factory=dict)
    gain: float = 1.0
    bias: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class RewardTrainer:
    """Trains a RewardModel; `train` runs the loop, the other methods are its hooks."""

    def __init__(
        self,
        config: RewardConfig,
        model: RewardModel | None = None,
        progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.config = config
        self.device = pick_device(config)
        self.model = model if model is not None else RewardModel.from_backbone(config)
        self.model.to(self.device)
        self.progress = progress
        self.use_bf16 = (
            config.bf16
            if config.bf16 is not None
            else self.device.type == "cuda" and torch.cuda.is_bf16_supported()
        )
        if self.use_bf16 and self.device.type != "cuda":
            raise ValidationError("bf16 training needs a GPU here; set bf16 to false on a CPU")
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.learning_rate)

    # -- hooks ------------------------------------------------------------------------------

    def tokenize(self, comparisons: Sequence[Comparison]) -> list[Label]:
        """Token ids of every query and candidate, once, before the loop."""
        return [
            Label(self.model.tokenize(c.query, c.candidates), c.best) for c in comparisons
        ]

    def batches(self, labels: Sequence[Label], size: int, shuffle: bool,
                generator: random.Random | None = None) -> Iterator[list[Label]]:  # fmt: skip
        order = list(range(len(labels)))
        if shuffle:
            (generator or random.Random(self.config.seed)).shuffle(order)
        for start in range(0, len(order), size):
            yield [labels[i] for i in order[start : start + size]]

    def collate(self, batch: Sequence[Label]) -> dict[str, torch.Tensor]:
        """All K candidates of every label in the batch, for one forward pass."""
        tensors = self.model.collate([label.encoded for label in batch])
        tensors["_best"] = torch.tensor([label.best for label in batch], device=self.device)
        return tensors

    def rewards(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """(labels, K) rewards; -inf where a label has fewer candidates."""
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16,
                            enabled=self.use_bf16):  # fmt: skip
            return self.model(tensors).float()

    def compute_loss(self, tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy of the softmax over each label's K rewards against its choice."""
        scores = self.rewards(tensors)
        return F.cross_entropy(scores, tensors["_best"]), scores

    def training_step(self, batch: Sequence[Label]) -> float:
        self.model.train()
        loss, _ = self.compute_loss(self.collate(batch))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def on_step(self, progress: Progress) -> None:
        if self.progress is not None:
            self.progress(progress)

    # -- the loop ---------------------------------------------------------------------------

    def train(
        self,
        train: Sequence[Comparison],
        held_out: Sequence[Comparison] = (),
        base: Sequence[tuple[str, str]] | None = None,
    ) -> TrainResult:
        """Train (from the current weights: a fresh trainer starts from the backbone's), then
        evaluate on held_out and normalize."""
        if not train:
            raise ValidationError("no labels to train on: collect comparisons first")
        samples: Sequence[tuple[str, str]] = ()
        if self.config.normalize:
            samples = base if base is not None else base_samples(train, self.config.base_policy)
            if not samples:  # found out now, not after hours of training
                raise ValidationError(
                    f"no base-policy samples to normalize on (base_policy "
                    f"{self.config.base_policy!r} matches no candidate's policy)"
                )
        torch.manual_seed(self.config.seed)
        self.on_step(Progress("tokenize"))
        labels = self.tokenize(train)
        size = self.config.batch_size
        total = self.config.epochs * math.ceil(len(labels) / size)
        shuffler = random.Random(self.config.seed)
        started = time.perf_counter()
        step, loss, seen = 0, None, 0
        for _ in range(self.config.epochs):
            for batch in self.batches(labels, size, shuffle=True, generator=shuffler):
                loss = self.training_step(batch)
                step += 1
                seen += len(batch)
                self.on_step(Progress("train", step, total, loss, seen))
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        result = TrainResult(
            labels=seen, steps=step, seconds=round(seconds, 3),
            labels_per_second=round(seen / seconds, 2) if seconds > 0 else 0.0,
            final_loss=loss,
        )  # fmt: skip
        if held_out:
            # Before the normalization, so the held-out loss is the one training minimized
            # (a positive gain leaves the accuracy as it is).
            self.on_step(Progress("evaluate", step, total, loss, seen))
            result.held_out = self.evaluate(held_out)
        if self.config.normalize:
            self.on_step(Progress("normalize", step, total, loss, seen))
            result.gain, result.bias = self.normalize(samples)
        self.on_step(Progress("done", step, total, loss, seen))
        self.model.metrics = {
            "train_labels": result.labels,
            "train_seconds": result.seconds,
            "labels_per_second": result.labels_per_second,
            "final_loss": result.final_loss,
            **{f"held_out_{key}": value for key, value in result.held_out.items()},
        }
        return result

    @torch.inference_mode()
    def evaluate(self, comparisons: Sequence[Comparison]) -> dict[str, Any]:
        """Top-1 accuracy (the highest reward is the labelled best) against chance (mean 1/K)."""
        if not comparisons:
            return {"n": 0, "accuracy": None, "chance": None, "loss": None}
        self.model.eval()
        labels = self.tokenize(comparisons)
        hits, loss_sum = 0, 0.0
        for batch in self.batches(labels, self.config.eval_batch_size, shuffle=False):
            tensors = self.collate(batch)
            loss, scores = self.compute_loss(tensors)
            hits += int((scores.argmax(dim=1) == tensors["_best"]).sum())
            loss_sum += float(loss) * len(batch)
        n = len(comparisons)
        return {
            "n": n,
            "accuracy": round(hits / n, 4),
            "chance": round(sum(1 / c.k for c in comparisons) / n, 4),
            "loss": round(loss_sum / n, 4),
        }

    @torch.inference_mode()
    def normalize(self, samples: Sequence[tuple[str, str]]) -> tuple[float, float]:
        """Set gain and bias so the samples' rewards have mean 0 and variance 1."""
        if not samples:
            raise ValidationError("no base-policy samples to normalize the rewards on")
        self.model.eval()
        self.model.gain.fill_(1.0)
        self.model.bias.fill_(0.0)
        raw: list[float] = []
        size = self.config.eval_batch_size * 4
        encoded = [self.model.tokenize(q, [t]) for q, t in samples]
        for start in range(0, len(encoded), size):
            batch = self.model.collate(encoded[start : start + size])
            # In fp32, as score() reads rewards, so the scored samples get mean 0, variance 1.
            raw.extend(self.model.label_raw_rewards(batch)[:, 0].float().cpu().tolist())
        values = torch.tensor(raw, dtype=torch.float64)
        mean = float(values.mean())
        std = float(values.std(unbiased=False)) if len(raw) > 1 else 0.0
        gain = 1.0 / std if std > 1e-8 else 1.0
        self.model.gain.fill_(gain)
        self.model.bias.fill_(-mean * gain)
        return gain, -mean * gain
