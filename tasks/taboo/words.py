"""Does an utterance say the target word? Tokens, lemmas and inflections on both sides.

The target and every utterance go through the same tokenizer (`tokenize`: runs of letters,
case-folded, so "Banana's" gives "banana" and "s"). A target's forms are its own tokens
plus every inflection lemminflect knows of each of its lemmas ("run" gives runs, ran,
running), plus the experimenter's explicit variants. An utterance token also matches when
one of its own lemmas is one of the target's lemmas, which covers forms lemminflect lists
only in one direction and words it has never seen (it guesses their lemmas by rule).

Multi-word targets ("ice cream") match as a run of tokens in which only the last inflects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

WORD = re.compile(r"[^\W\d_]+")
# Word classes whose rule-based lemmas we ask lemminflect for when it has never seen a word.
OOV_CLASSES = ("NOUN", "VERB")
ARTICLES = frozenset({"a", "an", "the"})


def tokenize(text: str) -> list[str]:
    """The words of a text, case-folded; the same function serves targets and utterances."""
    return [match.group(0).casefold() for match in WORD.finditer(text)]


@lru_cache(maxsize=65536)
def lemmas(token: str) -> frozenset[str]:
    """Every lemma of one token over all its word classes (the token itself included)."""
    import lemminflect  # a 5 MB table: loaded on first use, not at import

    found = {token}
    known = lemminflect.getAllLemmas(token)
    if not known:
        for upos in OOV_CLASSES:
            known = {**known, **lemminflect.getAllLemmasOOV(token, upos)}
    for forms in known.values():
        found.update(form.casefold() for form in forms)
    return frozenset(found)


@lru_cache(maxsize=65536)
def inflections(token: str) -> frozenset[str]:
    """Every inflected form of every lemma of a token (plural, verb forms, degrees)."""
    import lemminflect

    found = {token}
    for lemma in lemmas(token):
        table = lemminflect.getAllInflections(lemma)
        if not table:
            for upos in OOV_CLASSES:
                table = {**table, **lemminflect.getAllInflectionsOOV(lemma, upos)}
        for forms in table.values():
            found.update(form.casefold() for form in forms)
    return frozenset(found)


@dataclass(frozen=True)
class TargetWord:
    """A target word with its variants; `mention` finds it in a text."""

    word: str
    variants: tuple[str, ...] = ()
    forms: frozenset[tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _heads: frozenset[tuple[tuple[str, ...], frozenset[str]]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        spellings = [self.word, *self.variants]
        forms: set[tuple[str, ...]] = set()
        heads: set[tuple[tuple[str, ...], frozenset[str]]] = set()
        for spelling in spellings:
            tokens = tokenize(spelling)
            if not tokens:
                raise ValueError(f"{spelling!r} has no letters: a target word needs some")
            *prefix, last = tokens
            forms.update((*prefix, form) for form in inflections(last))
            heads.add((tuple(prefix), lemmas(last)))
        object.__setattr__(self, "forms", frozenset(forms))
        object.__setattr__(self, "_heads", frozenset(heads))

    def mention(self, text: str) -> str | None:
        """The words of `text` that say the target (e.g. "bananas"), or None."""
        tokens = tokenize(text)
        for prefix, head_lemmas in self._heads:
            n = len(prefix) + 1
            for start in range(len(tokens) - n + 1):
                window = tuple(tokens[start : start + n])
                if window[:-1] != prefix:
                    continue
                if window in self.forms or lemmas(window[-1]) & head_lemmas:
                    return " ".join(window)
        return None

    def is_guessed_by(self, guess: str) -> bool:
        """Whether a guess names the target: one of its forms as a whole ("Bananas", "a banana")."""
        tokens = tokenize(guess)
        if len(tokens) > 1 and tokens[0] in ARTICLES:
            tokens = tokens[1:]
        if not tokens:
            return False
        return any(
            tuple(tokens[:-1]) == prefix
            and (tuple(tokens) in self.forms or bool(lemmas(tokens[-1]) & head_lemmas))
            for prefix, head_lemmas in self._heads
        )


def all_forms(word: str, variants: Iterable[str] = ()) -> list[str]:
    """The target's forms as text, sorted: what the experimenter can check a word list by."""
    return sorted(" ".join(form) for form in TargetWord(word, tuple(variants)).forms)
