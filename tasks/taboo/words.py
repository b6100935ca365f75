"""Does an utterance say the target word? The same tokens and inflections on both sides.

The target and every utterance go through the same tokenizer (`tokenize`: NFKC-normalised,
invisible format characters dropped, runs of letters, case-folded, so "Banana's" gives
"banana" and "s", and a fullwidth "ｂａｎａｎａ" is "banana"). A target's forms are every
inflection lemminflect knows of it ("run" gives runs, ran, running; "mouse" mice), plus the
experimenter's explicit variants and theirs; words lemminflect has never seen get its
rule-based inflections. A target that is itself a lemma in some word class inflects from
itself only: "rose" gives roses, not "rises" (rose as a form of rise), "left" does not match
"leave". Other targets (an inflected form, "mice") inflect from their lemmas. Word lists
should give base forms; anything else goes in the variants.

Multi-word targets ("ice cream") match as a run of tokens in which only the last inflects.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

WORD = re.compile(r"[^\W\d_]+")
# Word classes whose rule-based lemmas we ask lemminflect for when it has never seen a word.
OOV_CLASSES = ("NOUN", "VERB")
ARTICLES = frozenset({"a", "an", "the"})


def normalize(text: str) -> str:
    """NFKC, without format characters (zero-width spaces and joiners, soft hyphens)."""
    folded = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")


def tokenize(text: str) -> list[str]:
    """The words of a text, case-folded; the same function serves targets and utterances."""
    return [match.group(0).casefold() for match in WORD.finditer(normalize(text))]


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
    """Every inflected form of a target token (see the module docstring for which lemmas)."""
    import lemminflect

    known = lemminflect.getAllLemmas(token)
    own_lemma = any(token in (form.casefold() for form in forms) for forms in known.values())
    bases = {token} if own_lemma or not known else set(lemmas(token))
    found = {token}
    for base in bases:
        table = lemminflect.getAllInflections(base)
        if not table:
            for upos in OOV_CLASSES:
                table = {**table, **lemminflect.getAllInflectionsOOV(base, upos)}
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
        for prefix, _lemmas in self._heads:
            n = len(prefix) + 1
            for start in range(len(tokens) - n + 1):
                window = tuple(tokens[start : start + n])
                if window[:-1] != prefix:
                    continue
                if window in self.forms:
                    return " ".join(window)
        return None

    def is_guessed_by(self, guess: str) -> bool:
        """Whether a guess names the target: one of its forms as a whole ("Bananas", "a banana")."""
        tokens = tokenize(guess)
        if len(tokens) > 1 and tokens[0] in ARTICLES:
            tokens = tokens[1:]
        if not tokens:
            return False
        return tuple(tokens) in self.forms


def all_forms(word: str, variants: Iterable[str] = ()) -> list[str]:
    """The target's forms as text, sorted: what the experimenter can check a word list by."""
    return sorted(" ".join(form) for form in TargetWord(word, tuple(variants)).forms)
