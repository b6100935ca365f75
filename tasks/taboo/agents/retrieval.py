"""The retrieval attacker: say what, in the corpus, gets replies that say the target.

For a target it ranks the corpus utterances by the share of their replies that mention the
target (`TargetWord.mention`, so "bananas" counts for banana and the experimenter's variants
count too), never one that mentions the target itself (the engine would strike it). Each
turn it says the best one not said yet in this game, adding `relevance` x the overlap with
the defender's last utterance, so the talk follows the defender where it can.

Fallback: when no reply in the corpus says the target, it ranks the utterances by how much
their replies share words that co-occur with the target in the corpus (in the same pair,
weighted count x IDF: `Corpus.related`), steering the defender towards the target's
neighbours. When the target does not occur in the corpus at all, only the relevance to the
defender's last utterance is left, and with nothing said yet the choice is random. Ties are
broken by the game's `rng`, so a game is deterministic given its seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tasks.taboo.agents.base import Agent, AgentView, Move, register_agent
from tasks.taboo.agents.corpus import Corpus, UtteranceGroup, content_words, target_word
from tasks.taboo.engine import Role
from tasks.taboo.words import TargetWord, tokenize

# Said when the corpus has nothing the attacker may say (every utterance names the target).
FILLERS = ("Tell me more about that.", "What do you mean?", "Go on.", "Hmm.")


@dataclass(frozen=True)
class Option:
    """A corpus utterance the attacker may say, and how strongly it draws out the target."""

    group: UtteranceGroup
    strength: float  # from 0 to 1


class RetrievalAttacker(Agent):
    """Says the corpus utterances whose typical replies say the target."""

    name = "retrieval"
    role = Role.ATTACKER
    settings = {
        "relevance": "weight, 0 or more, of the overlap with the defender's last utterance "
        "next to the share of replies that say the target (0 to 1), e.g. 0.5",
    }

    def __init__(self, corpus: Corpus, *, relevance: float = 0.5) -> None:
        super().__init__(corpus)
        if isinstance(relevance, bool) or not isinstance(relevance, int | float):
            raise ValueError("relevance must be a number, 0 or more, e.g. 0.5")
        if not 0 <= relevance < float("inf"):
            raise ValueError("relevance must be 0 or more, e.g. 0.5 (0: ignore the defender)")
        self.relevance = float(relevance)
        self._plans: dict[TargetWord, list[Option]] = {}

    def plan(self, word: TargetWord) -> list[Option]:
        """Every utterance the attacker may say for `word`, strongest first (cached)."""
        if word not in self._plans:
            if len(self._plans) > 1024:
                self._plans.clear()
            self._plans[word] = self._rank(word)
        return self._plans[word]

    def _rank(self, word: TargetWord) -> list[Option]:
        allowed = [group for group in self.corpus.groups if word.mention(group.text) is None]
        drawing = [
            Option(group, sum(1 for r in group.replies if word.mention(r)) / len(group.replies))
            for group in allowed
        ]
        options = [option for option in drawing if option.strength > 0]
        if not options:
            options = self._neighbours(word, allowed)
        return sorted(options, key=lambda option: -option.strength)

    def _neighbours(self, word: TargetWord, allowed: list[UtteranceGroup]) -> list[Option]:
        related = self.corpus.related(word)
        if not related:
            return [Option(group, 0.0) for group in allowed]
        pull = {
            group.text: sum(
                sum(related.get(other, 0.0) for other in content_words(reply))
                for reply in group.replies
            )
            / len(group.replies)
            for group in allowed
        }
        top = max(pull.values(), default=0.0)
        if top <= 0:
            return [Option(group, 0.0) for group in allowed]
        return [Option(group, pull[group.text] / top) for group in allowed]

    def act(self, view: AgentView, rng: random.Random) -> Move:
        if view.role != Role.ATTACKER or view.target is None:
            raise ValueError("the retrieval attacker plays the attacker: its view needs the target")
        word = target_word(view.target, tuple(view.variants))
        plan = self.plan(word)
        said = {tuple(tokenize(text)) for text in view.said_by(Role.ATTACKER)}
        fresh = [option for option in plan if tuple(tokenize(option.group.text)) not in said]
        options = list(fresh or plan)
        if not options:
            return Move("say", self._filler(word, rng))
        last = view.last_said_by(Role.DEFENDER)
        heard = content_words(last) if last else ()
        rng.shuffle(options)
        best = max(
            options,
            key=lambda option: (
                option.strength + self.relevance * self.corpus.similarity(heard, option.group.words)
            ),
        )
        return Move("say", best.group.text)

    @staticmethod
    def _filler(word: TargetWord, rng: random.Random) -> str:
        safe = [line for line in FILLERS if word.mention(line) is None]
        return rng.choice(safe) if safe else FILLERS[-1]


register_agent(RetrievalAttacker)
