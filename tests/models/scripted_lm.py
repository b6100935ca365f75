"""Tiny GPT-2s that say what they are told: deterministic models for end-to-end tests.

Every transformer block is switched off (its output projections are zero) and positions are
ignored, so the next token depends on the last token only: a bigram table. Each token of the
scripted answers gets its own embedding direction and every other token (the whole prompt)
shares one; the output head maps each direction to the next token of its answer, and the
last token of every answer to the end-of-sequence token, with a margin that no temperature
up to 5 overturns. With several answers, their first tokens tie after the prompt, so each
sample is one of the answers with equal chance.
"""

from __future__ import annotations

from pathlib import Path


def build_scripted_causal_lm(target: str | Path, *answers: str, hidden: int = 32) -> Path:
    """A causal LM in `target` (MiniLM's tokenizer) whose every answer is one of `answers`."""
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from models.backbones import minilm_path

    path = Path(target)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    tokenizer.save_pretrained(str(path))
    scripts = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) for text in answers]
    tokens = [token for script in scripts for token in script]
    if not scripts or len(set(tokens)) != len(tokens) or len(tokens) >= hidden:
        raise ValueError(f"{answers}: use fewer than {hidden} tokens in all, none repeated")
    config = GPT2Config(
        vocab_size=len(tokenizer), n_embd=hidden, n_layer=1, n_head=2, n_positions=512,
        bos_token_id=101, eos_token_id=102, pad_token_id=0, tie_word_embeddings=False,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    state = {token: index for index, token in enumerate(tokens, start=1)}  # 0: any other token
    with torch.no_grad():
        for block in model.transformer.h:
            for projection in (block.attn.c_proj, block.mlp.c_proj):
                projection.weight.zero_()
                projection.bias.zero_()
        model.transformer.wpe.weight.zero_()
        directions = torch.eye(hidden)
        embeddings = model.transformer.wte.weight
        embeddings.copy_(directions[0].expand_as(embeddings))
        for token, index in state.items():
            embeddings[token] = directions[index]
        model.transformer.ln_f.weight.fill_(1.0)
        model.transformer.ln_f.bias.zero_()
        normed = torch.nn.functional.layer_norm(directions, (hidden,))
        head = model.lm_head.weight
        head.zero_()
        for script in scripts:
            previous = [0, *(state[token] for token in script[:-1])]
            for token, before in zip(script, previous, strict=True):
                head[token] = 10.0 * normed[before]
            head[config.eos_token_id] += 10.0 * normed[state[script[-1]]]
    model.save_pretrained(str(path))
    return path
