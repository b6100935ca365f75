"""How the QC benchmark's crowd writes: explanations of people who read, of people who do
not, and of a language model, and the page's report of how they were typed or pasted
(`benchmarks/qc_crowd.py` uses them; nothing here imports the project)."""

from __future__ import annotations

import hashlib
import random

# Explanations of people who read: a detail of their own, so two rarely match word for word.
_OPENINGS = ("It", "This sentence", "The new line", "Sentence {i}", "This part", "Here it")
_FLAWS = (
    ("repeats what the passage already said", "repetition"),
    ("does not follow from the sentence before", "irrelevant"),
    ("contradicts an earlier sentence", "contradicts_sentence"),
    ("gets a plain fact wrong", "contradicts_knowledge"),
    ("describes something that could not happen", "common_sense"),
    ("mixes up who is doing what", "coreference"),
    ("sounds generic and empty", "generic"),
    ("has clumsy grammar", "grammar"),
)
_DETAILS = (
    "right after a good start", "and the tone shifts", "with no reason given",
    "as if pasted from elsewhere", "in a flat voice", "which a writer would not do",
    "and the names stop matching", "and it reads like a list", "so I stopped trusting it",
    "although the words are fine", "the moment the topic moves",
)  # fmt: skip
# Explanations of people who do not read: varied wording, nothing about the passage.
_GENERIC_OPEN = ("I think", "Seems like", "To me", "Probably", "I guess", "Feels like")
_GENERIC_MID = (
    "this is where it changes", "the machine starts here", "it looks off", "it is fake now",
    "the text is weird", "something is different",
)  # fmt: skip
_GENERIC_END = ("", ".", "!", " here.", " I think.", " maybe.")
# A language model's explanation: one long fluent sentence, fixed by the item.
_LLM_OPEN = (
    "Upon careful analysis of the passage, it becomes evident that",
    "A close reading of the text reveals that",
    "Examining the progression of the narrative, one can observe that",
    "Taking into account the overall coherence of the passage, it is clear that",
)
_LLM_CLAIM = (
    "sentence {i} marks a subtle yet noticeable shift in style and coherence",
    "the transition at sentence {i} introduces content that lacks the natural flow of the "
    "preceding sentences",
    "from sentence {i} onward the text exhibits the repetitive, generic phrasing "
    "characteristic of machine-generated language",
)
_LLM_END = (
    ", which strongly suggests that it was produced by an automated language model rather "
    "than a human author.",
    ", indicating a departure from the original human-written content and the onset of "
    "machine-generated text.",
    ", a pattern that is commonly associated with the output of large language models.",
)


def item_hash(*parts: str) -> int:
    """A stable number from the item (the same in every process and for every paster)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def typed(rng: random.Random, text: str) -> dict[str, int]:
    """The page's report of an explanation typed at 3 to 7 characters a second."""
    return {
        "keys": len(text) + rng.randint(0, 6),
        "pastes": 0,
        "pasted_chars": 0,
        "typing_ms": int(1000 * len(text) / rng.uniform(3.0, 7.0)),
    }


def pasted(rng: random.Random, text: str) -> dict[str, int]:
    """The page's report of an explanation pasted in one go."""
    return {
        "keys": rng.randint(1, 3),
        "pastes": 1,
        "pasted_chars": len(text),
        "typing_ms": rng.randint(250, 350),
    }


def reader_explanation(rng: random.Random, step: int) -> tuple[str, list[str]]:
    flaw, tag = rng.choice(_FLAWS)
    opening = rng.choice(_OPENINGS).format(i=step + 1)
    return f"{opening} {flaw}, {rng.choice(_DETAILS)}.", [tag]


def generic_explanation(rng: random.Random) -> tuple[str, list[str]]:
    text = f"{rng.choice(_GENERIC_OPEN)} {rng.choice(_GENERIC_MID)}{rng.choice(_GENERIC_END)}"
    return text, [rng.choice(("other", "generic", "irrelevant"))]


def llm_explanation(key: str, step: int) -> tuple[str, list[str]]:
    h = item_hash("llm-explanation", key)
    opening = _LLM_OPEN[h % len(_LLM_OPEN)]
    claim = _LLM_CLAIM[(h // 7) % len(_LLM_CLAIM)].format(i=step + 1)
    end = _LLM_END[(h // 59) % len(_LLM_END)]
    return f"{opening} {claim}{end}", ["generic"]
