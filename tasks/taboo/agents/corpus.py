"""Utterance/reply pairs, and the word statistics the Taboo agents draw on.

A corpus is a list of everyday exchanges, `{"utterance": ..., "reply": ...}` one a line
(JSONL). The same utterance may come with several replies; together they are its typical
replies. Words are compared by a canonical lemma (`canonical`: "bananas" and "banana" are one
word) after dropping stopwords, so the statistics count words, not spellings.

Two statistics serve the agents:

- `similar`: how close a text is to each corpus utterance (IDF-weighted Jaccard overlap of
  their content words), for retrieving a reply or staying on topic;
- `suspects`: the defender's belief about the hidden word after some attacker utterances.
  An attacker picks utterances whose replies say the target, so an utterance `a` is evidence
  for a word `c` in proportion to the likelihood ratio P(c in reply | a) / P(c in reply).
  P(c in reply | a) is the IDF-weighted mean over the content words `w` of `a` of
  (n(w, c) + beta * P(c)) / (n(w) + beta), where n(w) counts the pairs whose utterance has
  `w` and n(w, c) those whose reply also has `c` (smoothed towards P(c), the share of replies
  with `c`). The ratios of the turns multiply (their logs add up), from a uniform prior over
  the content words of the replies, and are normalised to a distribution.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from tasks.taboo.words import TargetWord, lemmas, tokenize

SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "data" / "corpus.jsonl"
# Pseudo-count of the smoothing towards the overall share of replies with a word.
BETA = 1.0

# Function words and conversational filler: they say nothing about a hidden word. Pieces
# of contractions are here too, since the tokenizer splits "don't" into "don" and "t".
_STOPWORD_TEXT = """
    a about above after again against all almost also although always am an and any anyone
    anything are around as at away back be because been before being below between both but
    by can could did do does doing done down during each either else enough even ever every
    everyone everything few for from further get gets getting go goes going gone got had has
    have having he her here hers herself him himself his how however i if in into is it its
    itself just keep know let like lot lots made make many may maybe me might mine more most
    much must my myself need never no nor not now of off often oh ok okay on once one only or
    other our ours ourselves out over own perhaps pretty quite rather really right said same
    say says see seem she should since so some someone something sometimes still such sure
    take than that the their theirs them themselves then there these they thing things think
    this those though through to too under until up upon us very want was way we well
    were what when where whether which while who whom whose why will with without would yeah
    yes yet you your yours yourself yourselves
    don doesn didn isn aren wasn weren haven hasn hadn won wouldn couldn shouldn can cannot
    ain ll ve re m d s t
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def canonical(token: str) -> str:
    """One spelling for all forms of a word: a lemma other than the token itself, if any."""
    others = lemmas(token) - {token}
    return min(others, key=lambda form: (len(form), form)) if others else token


@lru_cache(maxsize=65536)
def content_words(text: str) -> tuple[str, ...]:
    """The canonical content words of a text, in order of first appearance, each once."""
    found: dict[str, None] = {}
    for token in tokenize(text):
        if len(token) < 2 or token in STOPWORDS:
            continue
        word = canonical(token)
        if word not in STOPWORDS:
            found.setdefault(word, None)
    return tuple(found)


@lru_cache(maxsize=4096)
def target_word(word: str, variants: tuple[str, ...] = ()) -> TargetWord:
    """A `TargetWord`, built once (its inflection table takes a moment)."""
    return TargetWord(word, variants)


@dataclass(frozen=True)
class Pair:
    """One exchange: something said and the reply it got."""

    utterance: str
    reply: str

    @classmethod
    def from_json(cls, raw: Any) -> Pair:
        if not isinstance(raw, dict):
            raise ValueError('a pair is an object {"utterance": "...", "reply": "..."}')
        unknown = set(raw) - {"utterance", "reply"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}: a pair has utterance and reply")
        for key in ("utterance", "reply"):
            value = raw.get(key)
            if not isinstance(value, str) or not tokenize(value):
                raise ValueError(f"{key!r} must be text with some words in it")
        return cls(" ".join(raw["utterance"].split()), " ".join(raw["reply"].split()))


@dataclass(frozen=True)
class UtteranceGroup:
    """A corpus utterance (the first spelling seen) with every reply it got, in order."""

    text: str
    replies: tuple[str, ...]
    words: frozenset[str]

    def typical_replies(self) -> list[str]:
        """Its distinct replies, the most frequent first (ties in corpus order)."""
        counts = Counter(self.replies)
        return sorted(counts, key=lambda reply: -counts[reply])


class Corpus:
    """Utterance/reply pairs with the statistics the agents use; immutable once built."""

    def __init__(self, pairs: Iterable[Pair], source: str = "the corpus") -> None:
        self.pairs: tuple[Pair, ...] = tuple(pairs)
        self.source = source
        if not self.pairs:
            raise ValueError(f"{source} has no utterance/reply pairs: give at least one")
        grouped: dict[tuple[str, ...], list[Pair]] = {}
        for pair in self.pairs:
            grouped.setdefault(tuple(tokenize(pair.utterance)), []).append(pair)
        self.groups: tuple[UtteranceGroup, ...] = tuple(
            UtteranceGroup(
                text=members[0].utterance,
                replies=tuple(pair.reply for pair in members),
                words=frozenset(content_words(members[0].utterance)),
            )
            for members in grouped.values()
        )
        group_df = Counter(word for group in self.groups for word in group.words)
        self._idf = {
            word: math.log((1 + len(self.groups)) / (1 + df)) + 1.0 for word, df in group_df.items()
        }
        self._unseen_idf = math.log(1 + len(self.groups)) + 1.0
        # n(w): pairs whose utterance has w; n(w, c): ... and whose reply has c.
        self._with: Counter[str] = Counter()
        self._then: dict[str, Counter[str]] = {}
        self.reply_counts: Counter[str] = Counter()
        for pair in self.pairs:
            reply_words = content_words(pair.reply)
            self.reply_counts.update(reply_words)
            for word in content_words(pair.utterance):
                self._with[word] += 1
                self._then.setdefault(word, Counter()).update(reply_words)
        self.vocabulary: tuple[str, ...] = tuple(sorted(self.reply_counts))
        self._mentions: dict[TargetWord, tuple[frozenset[int], frozenset[int]]] = {}

    def __repr__(self) -> str:
        return f"Corpus({self.source!r}, {len(self.pairs)} pairs)"

    # -- loading ----------------------------------------------------------------------------

    @classmethod
    def from_lines(cls, lines: Iterable[str], source: str = "the corpus") -> Corpus:
        """Parse JSONL lines (blank lines skipped); a bad line raises naming its number."""
        pairs: list[Pair] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                pairs.append(Pair.from_json(json.loads(line)))
            except json.JSONDecodeError as error:
                raise ValueError(f"{source} line {number}: not JSON ({error.msg})") from None
            except ValueError as error:
                raise ValueError(f"{source} line {number}: {error}") from None
        return cls(pairs, source)

    @classmethod
    def load(cls, path: str | Path) -> Corpus:
        """Read a JSONL file of `{"utterance": ..., "reply": ...}` lines."""
        path = Path(path)
        with path.open(encoding="utf-8") as lines:
            return cls.from_lines(lines, source=str(path))

    @classmethod
    def default(cls) -> Corpus:
        """The sample corpus shipped in tasks/taboo/data/corpus.jsonl (built once)."""
        return _default_corpus()

    # -- statistics -------------------------------------------------------------------------

    def idf(self, word: str) -> float:
        return self._idf.get(word, self._unseen_idf)

    def similarity(self, a: Iterable[str], b: Iterable[str]) -> float:
        """IDF-weighted Jaccard overlap of two sets of content words, from 0 to 1."""
        left, right = set(a), set(b)
        union = sum(self.idf(word) for word in left | right)
        return sum(self.idf(word) for word in left & right) / union if union else 0.0

    def similar(
        self, text: str, rng: random.Random | None = None
    ) -> list[tuple[float, UtteranceGroup]]:
        """The corpus utterances that share a content word with `text`, closest first.

        Ties keep corpus order, or a random order drawn from `rng` when given.
        """
        words = content_words(text)
        scored = [(self.similarity(words, group.words), group) for group in self.groups]
        scored = [item for item in scored if item[0] > 0]
        if rng is not None:
            rng.shuffle(scored)
        return sorted(scored, key=lambda item: -item[0])

    def mentions(self, word: TargetWord) -> tuple[frozenset[int], frozenset[int]]:
        """Indices of the pairs whose utterance, and whose reply, say `word` (cached)."""
        if word not in self._mentions:
            if len(self._mentions) > 4096:
                self._mentions.clear()
            said = frozenset(i for i, p in enumerate(self.pairs) if word.mention(p.utterance))
            heard = frozenset(i for i, p in enumerate(self.pairs) if word.mention(p.reply))
            self._mentions[word] = (said, heard)
        return self._mentions[word]

    def suspects(
        self, texts: Sequence[str], excluded: Iterable[str] = ()
    ) -> list[tuple[str, float]]:
        """Each candidate word's share of the evidence in `texts`, the largest first.

        Candidates are the content words of the replies, less `excluded` (words known not to
        be the target). Texts with no word the corpus knows carry no evidence.
        """
        gone = set(excluded)
        candidates = [word for word in self.vocabulary if word not in gone]
        if not candidates:
            return []
        n_pairs = len(self.pairs)
        log_ratio = dict.fromkeys(candidates, 0.0)
        for text in texts:
            words = [word for word in content_words(text) if word in self._with]
            if not words:
                continue
            weights = {word: self.idf(word) for word in words}
            total = sum(weights.values())
            base = sum(weights[w] * BETA / (self._with[w] + BETA) for w in words) / total
            boost: defaultdict[str, float] = defaultdict(float)
            for w in words:
                scale = weights[w] / (self._with[w] + BETA) / total
                for candidate, count in self._then[w].items():
                    boost[candidate] += scale * count
            for candidate in candidates:
                prior = self.reply_counts[candidate] / n_pairs
                log_ratio[candidate] += math.log(base + boost.get(candidate, 0.0) / prior)
        top = max(log_ratio.values())
        weight = {word: math.exp(value - top) for word, value in log_ratio.items()}
        total_weight = sum(weight.values())
        shares = [(word, value / total_weight) for word, value in weight.items()]
        return sorted(shares, key=lambda item: (-item[1], item[0]))

    def related(self, word: TargetWord) -> dict[str, float]:
        """Words that share a pair with a mention of `word`, weighted count x IDF.

        The attacker's fallback when no reply says the target: it steers the talk towards
        the target's neighbours in the corpus.
        """
        said, heard = self.mentions(word)
        counts: Counter[str] = Counter()
        for index in said | heard:
            pair = self.pairs[index]
            counts.update(set(content_words(pair.utterance)) | set(content_words(pair.reply)))
        return {
            other: count * self.idf(other)
            for other, count in counts.items()
            if word.mention(other) is None
        }


@cache
def _default_corpus() -> Corpus:
    return Corpus.load(SAMPLE_CORPUS)
