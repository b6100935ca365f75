"""r(x, y): a scalar head on a pretrained transformer, with a gain and bias.

The head reads the last token of a causal LM or the pooled output of an encoder (SPEC 1.3).
After training, the gain and bias are set so that rewards of base-policy samples have mean 0
and variance 1 (Ziegler et al. 2019, section 2.2). Saved as a directory: the backbone
(transformers' save_pretrained, safetensors), head.safetensors, reward_config.json and a
README.md model card.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from crowd.exceptions import InvalidConfig
from models.backbones import resolve_backbone
from models.reward.config import RewardConfig


@dataclass(frozen=True)
class Encoded:
    """A query and its candidates as token ids (see RewardModel.tokenize)."""

    query: tuple[int, ...]
    candidates: tuple[tuple[int, ...], ...]


log = logging.getLogger(__name__)

# Models whose position ids start after the padding index.
ROBERTA_POSITIONS = ("roberta", "xlm-roberta", "camembert")
HEAD_FILE = "head.safetensors"
CONFIG_FILE = "reward_config.json"
CARD_FILE = "README.md"
BACKBONE_DIR = "backbone"
# Encoders we know; anything else with a causal-LM architecture reads from its last token.
ENCODER_TYPES = frozenset(
    {"bert", "roberta", "distilbert", "deberta", "deberta-v2", "electra", "xlm-roberta",
     "mpnet", "albert", "camembert", "modernbert"}
)  # fmt: skip


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def detect_kind(config: Any) -> str:
    """'causal' or 'encoder', from a transformers config."""
    architectures = getattr(config, "architectures", None) or []
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        return "causal"
    if getattr(config, "model_type", None) in ENCODER_TYPES:
        return "encoder"
    if getattr(config, "is_decoder", False):
        return "causal"
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if getattr(config, "model_type", None) in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "causal"  # e.g. a base model saved without its LM head
    raise InvalidConfig(
        f"cannot tell whether {getattr(config, 'model_type', '?')!r} is a causal LM or an "
        "encoder: set kind to 'causal' or 'encoder'",
        "reward model config",
    )


def pick_device(config: RewardConfig) -> torch.device:
    if config.device == "cuda" and not torch.cuda.is_available():
        raise InvalidConfig("device 'cuda' asked for, but no GPU is available", "reward model")
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(config.device)


def _no_dropout(module: nn.Module, p: float) -> None:
    for child in module.modules():
        if isinstance(child, nn.Dropout):
            child.p = p


class RewardModel(nn.Module):
    """A backbone, a linear head to one number, and a gain and bias for normalization."""

    gain: torch.Tensor
    bias: torch.Tensor
    backbone: Any

    def __init__(self, backbone: Any, tokenizer: Any, kind: str, pooling: str,
                 config: RewardConfig) -> None:  # fmt: skip
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.kind = kind
        self.pooling = pooling
        self.config = config
        hidden = int(getattr(backbone.config, "hidden_size", 0) or backbone.config.n_embd)
        self.head = nn.Linear(hidden, 1)
        generator = torch.Generator().manual_seed(config.seed)
        with torch.no_grad():
            # Small initial rewards, as in the paper's N(0, 1/(d_model+1)) head init.
            self.head.weight.copy_(
                torch.randn(self.head.weight.shape, generator=generator) / (hidden + 1) ** 0.5
            )
            self.head.bias.zero_()
        self.register_buffer("gain", torch.tensor(1.0))
        self.register_buffer("bias", torch.tensor(0.0))
        self.data_card: dict[str, Any] = {}
        self.metrics: dict[str, Any] = {}

    # -- building and loading ---------------------------------------------------------------

    @classmethod
    def from_backbone(cls, config: RewardConfig) -> RewardModel:
        """A fresh reward model on the pretrained backbone config.backbone (local only)."""
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        _quiet_transformers()
        path = resolve_backbone(config.backbone)
        backbone_config = AutoConfig.from_pretrained(str(path), local_files_only=True)
        kind = config.kind if config.kind != "auto" else detect_kind(backbone_config)
        pooling = config.pooling
        if pooling == "auto":
            pooling = "last" if kind == "causal" else "mean"
        if kind == "causal" and pooling != "last":
            raise InvalidConfig("a causal LM's reward is read from its 'last' token", "pooling")
        if pooling == "cls" and config.share_query:
            raise InvalidConfig(
                "'cls' pooling needs share_query false (the query's [CLS] token does not "
                "see the candidates in packed rows)",
                "pooling",
            )
        torch.manual_seed(config.seed)
        # fp32 weights whatever the checkpoint holds (bf16 weights would round Adam's small
        # updates away); autocast does the bf16 compute on a GPU. Packed rows need SDPA:
        # eager attention adds a bool mask instead of applying it.
        extra: dict[str, Any] = {"attn_implementation": "sdpa"} if config.share_query else {}
        try:
            backbone = AutoModel.from_pretrained(
                str(path), local_files_only=True, dtype=torch.float32, **extra
            )
        except (ValueError, ImportError) as error:
            if not config.share_query:
                raise
            raise InvalidConfig(
                f"{path} cannot use SDPA attention ({error}); set share_query false",
                "share_query",
            ) from None
        if config.share_query and backbone.config._attn_implementation != "sdpa":
            raise InvalidConfig("packed rows need SDPA attention: set share_query false",
                                "share_query")  # fmt: skip
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        tokenizer.truncation_side = "left"
        model = cls(backbone, tokenizer, kind, pooling, config)
        _no_dropout(model, config.dropout)
        return model

    @classmethod
    def load(cls, directory: str | Path, device: str | None = None) -> RewardModel:
        """A saved reward model (see save)."""
        from safetensors.torch import load_file

        directory = Path(directory)
        if not (directory / CONFIG_FILE).is_file():
            raise InvalidConfig(f"{directory} holds no saved reward model ({CONFIG_FILE})")
        saved = json.loads((directory / CONFIG_FILE).read_text())
        config = RewardConfig.from_json(
            {**saved["config"], "backbone": str(directory / BACKBONE_DIR),
             "kind": saved["kind"], "pooling": saved["pooling"]}
        )  # fmt: skip
        model = cls.from_backbone(config)
        state = load_file(str(directory / HEAD_FILE))
        model.head.load_state_dict({"weight": state["head.weight"], "bias": state["head.bias"]})
        model.gain.copy_(state["gain"])
        model.bias.copy_(state["bias"])
        model.metrics = saved.get("metrics", {})
        model.data_card = saved.get("data", {})
        model.eval()
        if device is not None:
            model.to(torch.device(device))
        return model

    def save(self, directory: str | Path) -> Path:
        """Write the backbone, head, settings and a model card into `directory`."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(str(directory / BACKBONE_DIR))
        self.tokenizer.save_pretrained(str(directory / BACKBONE_DIR))
        tensors = {
            "head.weight": self.head.weight.detach().float().cpu().contiguous(),
            "head.bias": self.head.bias.detach().float().cpu().contiguous(),
            "gain": self.gain.detach().float().cpu().contiguous(),
            "bias": self.bias.detach().float().cpu().contiguous(),
        }
        save_file(tensors, str(directory / HEAD_FILE))
        saved = {
            "config": self.config.to_json(),
            "kind": self.kind,
            "pooling": self.pooling,
            "source_backbone": str(self.config.backbone),
            "normalization": {"gain": float(self.gain), "bias": float(self.bias)},
            "metrics": self.metrics,
            "data": self.data_card,
        }
        (directory / CONFIG_FILE).write_text(json.dumps(saved, indent=2, sort_keys=True))
        (directory / CARD_FILE).write_text(model_card(saved))
        return directory

    # -- scoring ----------------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    @property
    def share_query(self) -> bool:
        return self.config.share_query

    @property
    def _has_token_types(self) -> bool:
        types = int(getattr(self.backbone.config, "type_vocab_size", 0) or 0)
        return self.kind == "encoder" and types > 1

    @property
    def _position_offset(self) -> int:
        if getattr(self.backbone.config, "model_type", "") in ROBERTA_POSITIONS:
            return int(getattr(self.backbone.config, "pad_token_id", 1) or 1) + 1
        return 0

    def tokenize(self, query: str, candidates: Sequence[str]) -> Encoded:
        """Token ids of a query and its candidates, cut to fit config.max_length.

        Encoders get [CLS] query [SEP] candidate [SEP], as a sentence pair; causal LMs the
        query's tokens followed by the candidate's. A long candidate keeps its start; a long
        query keeps its end, the context right before the candidate.
        """
        tok = self.tokenizer
        limit = self.config.max_length
        texts = [tok(text, add_special_tokens=False)["input_ids"] for text in candidates]
        tail = [tok.sep_token_id] if self.kind == "encoder" and tok.sep_token_id is not None else []
        specials = tok.num_special_tokens_to_add(pair=False)
        query_length = len(tok(query, add_special_tokens=False)["input_ids"])
        # Candidates get what the query leaves, and the query at least half when it is long.
        budget = max(1, limit - specials - min(query_length, limit // 2) - len(tail))
        texts = [ids[:budget] + tail for ids in texts]
        room = max(limit - max(len(ids) for ids in texts), specials + 1)
        # The tokenizer truncates from the left (set on load) and keeps its special tokens.
        query_ids = tok(query, truncation=True, max_length=room)["input_ids"]
        return Encoded(query=tuple(query_ids), candidates=tuple(tuple(ids) for ids in texts))

    def collate(self, labels: Sequence[Encoded]) -> dict[str, torch.Tensor]:
        """A batch for label_rewards: packed (one row per label) or one row per candidate."""
        if self.share_query:
            return self._collate_packed(labels)
        return self._collate_flat(labels)

    def _collate_flat(self, labels: Sequence[Encoded]) -> dict[str, torch.Tensor]:
        rows = [(label.query, cand) for label in labels for cand in label.candidates]
        width = max(len(q) + len(c) for q, c in rows)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        types = torch.zeros((len(rows), width), dtype=torch.long)
        for r, (q, c) in enumerate(rows):
            n = len(q) + len(c)
            ids[r, :n] = torch.tensor(q + c)
            mask[r, :n] = 1
            types[r, len(q) : n] = 1
        k = max(len(label.candidates) for label in labels)
        slot = torch.zeros((len(labels), k), dtype=torch.bool)
        for b, label in enumerate(labels):
            slot[b, : len(label.candidates)] = True
        batch = {"input_ids": ids, "attention_mask": mask, "_slot": slot}
        if self._has_token_types:
            batch["token_type_ids"] = types
        return {key: value.to(self.device) for key, value in batch.items()}

    def _collate_packed(self, labels: Sequence[Encoded]) -> dict[str, torch.Tensor]:
        """Each label as one row: the query once, then its K candidates, each seeing only
        the query and itself (a block attention mask; positions restart after the query).

        For a causal LM this computes exactly what K separate rows would, with the query's
        tokens once instead of K times; for an encoder the query does not attend to the
        candidates (it is shared by all of them).
        """
        width = max(len(x.query) + sum(len(c) for c in x.candidates) for x in labels)
        k = max(len(label.candidates) for label in labels)
        n = len(labels)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.full((n, width), pad, dtype=torch.long)
        positions = torch.zeros((n, width), dtype=torch.long)
        segment = torch.full((n, width), -1, dtype=torch.long)
        pool = torch.zeros((n, k, width))
        slot = torch.zeros((n, k), dtype=torch.bool)
        for b, label in enumerate(labels):
            q = len(label.query)
            ids[b, :q] = torch.tensor(label.query)
            positions[b, :q] = torch.arange(q)
            segment[b, :q] = 0
            at = q
            for j, cand in enumerate(label.candidates):
                c = len(cand)
                ids[b, at : at + c] = torch.tensor(cand)
                positions[b, at : at + c] = torch.arange(q, q + c)
                segment[b, at : at + c] = j + 1
                if self.pooling == "last":
                    # An empty candidate reads the query's last token, as a row of its own would.
                    pool[b, j, at + c - 1 if c else q - 1] = 1.0
                else:  # mean over the query and this candidate, as one unpacked row would
                    pool[b, j, :q] = 1.0 / (q + c)
                    pool[b, j, at : at + c] = 1.0 / (q + c)
                slot[b, j] = True
                at += c
        seg_i, seg_j = segment[:, :, None], segment[:, None, :]
        allow = ((seg_j == 0) & (seg_i >= 0)) | ((seg_i == seg_j) & (seg_i > 0))
        if self.kind == "causal":
            allow &= torch.ones(width, width, dtype=torch.bool).tril()
        # Padding attends to itself only, so no row of the softmax is empty.
        allow |= torch.eye(width, dtype=torch.bool) & (segment < 0)[:, :, None]
        batch = {
            "input_ids": ids,
            "attention_mask": allow[:, None],
            "position_ids": positions,
            "_pool": pool,
            "_slot": slot,
        }
        if self._has_token_types:
            batch["token_type_ids"] = (segment > 0).long()
        if self._position_offset:
            # RoBERTa-style models count positions from padding_idx + 1.
            batch["position_ids"] = positions + self._position_offset
        return {key: value.to(self.device) for key, value in batch.items()}

    def _vectors(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """One vector per sequence (flat rows) or per candidate (packed rows: (B, K, H))."""
        inputs = {k: v for k, v in batch.items() if not k.startswith("_")}
        out = self.backbone(**inputs)
        hidden = out.last_hidden_state
        if "_pool" in batch:
            return torch.bmm(batch["_pool"].to(hidden.dtype), hidden)
        mask = batch["attention_mask"]
        if self.pooling == "last":
            last = mask.sum(dim=1) - 1
            return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        if self.pooling == "cls":
            pooled = getattr(out, "pooler_output", None)
            return pooled if pooled is not None else hidden[:, 0]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)

    def label_raw_rewards(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """(labels, K) head outputs before gain and bias; -inf where a label has no K-th."""
        vectors = self._vectors(batch)
        values = self.head(vectors.to(self.head.weight.dtype)).squeeze(-1).float()
        slot = batch["_slot"]
        scores = torch.full(slot.shape, float("-inf"), device=values.device)
        if values.dim() == 2:  # packed: already (B, K)
            return torch.where(slot, values, scores)
        return scores.masked_scatter(slot, values)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """(labels, K) normalized rewards."""
        return self.gain * self.label_raw_rewards(batch) + self.bias

    @torch.inference_mode()
    def score(
        self, queries: Sequence[str], texts: Sequence[str], batch_size: int = 64
    ) -> list[float]:
        """Normalized rewards of (query, text) pairs."""
        if len(queries) != len(texts):
            raise ValueError("give one query per text")
        was_training = self.training
        self.eval()
        rewards: list[float] = []
        encoded = [self.tokenize(q, [t]) for q, t in zip(queries, texts, strict=True)]
        for start in range(0, len(encoded), batch_size):
            scores = self(self.collate(encoded[start : start + batch_size]))
            rewards.extend(scores[:, 0].cpu().tolist())
        self.train(was_training)
        return rewards


def model_card(saved: dict[str, Any]) -> str:
    """A README.md for a saved reward model: data, metrics and settings."""
    metrics = saved.get("metrics") or {}
    data = saved.get("data") or {}
    lines = [
        "# Reward model",
        "",
        "A scalar reward r(x, y) on a pretrained transformer, trained by crowd on best-of-K",
        "comparisons with a softmax cross-entropy over the K rewards of each label",
        "(Ziegler et al. 2019, Fine-Tuning Language Models from Human Preferences).",
        "",
        "## Data",
        "",
    ]
    lines += [f"- {key}: {value}" for key, value in sorted(data.items())] or ["- (not recorded)"]
    lines += ["", "## Metrics", ""]
    lines += [f"- {key}: {value}" for key, value in sorted(metrics.items())] or ["- (none)"]
    lines += ["", "## Settings", ""]
    lines += [f"- backbone: {saved.get('source_backbone')} ({saved.get('kind')}, "
              f"{saved.get('pooling')} pooling)"]  # fmt: skip
    lines += [f"- {key}: {value}" for key, value in sorted(saved["config"].items())]
    norm = saved.get("normalization") or {}
    lines += ["", "## Normalization", "",
              f"reward = {norm.get('gain'):.6g} * head(x, y) + {norm.get('bias'):.6g}, so that "
              "base-policy samples have mean 0 and variance 1.", "",
              "## Loading", "", "```python", "from models.reward.model import RewardModel",
              "model = RewardModel.load('this directory')",
              "model.score(['a query'], ['a continuation'])", "```", ""]  # fmt: skip
    return "\n".join(lines)
