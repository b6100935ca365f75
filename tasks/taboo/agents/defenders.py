"""Defenders: a cautious one that weighs the evidence, and a naive baseline.

`ThresholdDefender` keeps a belief over the hidden word (`Corpus.suspects`: how strongly the
attacker's utterances tend to draw each word out in the corpus), leaving out every word
said so far: the attacker may not say the target and the defender would already have lost
had it said it. It guesses the top word once its share of the belief reaches `threshold`,
or when it must (the final guess); otherwise it answers the attacker's last utterance with
a corpus reply that says none of its `avoid` most suspected words, or with a stock reply
that says none of them.

`NaiveDefender` answers like someone who does not know the game: the typical corpus reply
to one of the closest corpus utterances, whatever it says, and a guess only when forced.
It is the baseline, and the simulated human of the demo.
"""

from __future__ import annotations

import random
from collections import Counter

from tasks.taboo.agents.base import Agent, AgentView, Move, register_agent
from tasks.taboo.agents.corpus import Corpus, content_words, target_word
from tasks.taboo.engine import Phase, Role

# Replies that fit after almost anything; no sample target word is in them.
STOCK_REPLIES = (
    "Hmm, I'm not sure what to say to that.",
    "That's an interesting question, let me think.",
    "I see what you mean.",
    "Why do you ask?",
    "Could be, I've never really thought about it.",
    "Tell me more first.",
    "Hard to say, honestly.",
)
# A guess must be something; this is it when the corpus offers no candidate at all.
LAST_RESORT_GUESS = "something"


class Defender(Agent):
    """What both defenders share: the belief over the hidden word, and the guess."""

    role = Role.DEFENDER

    def suspects(self, view: AgentView, rule_out_said: bool) -> list[tuple[str, float]]:
        """Candidate words and their share of the evidence in the attacker's utterances."""
        if view.role != Role.DEFENDER or view.target is not None:
            raise ValueError("a defender's view must not hold the target")
        excluded: set[str] = set()
        if rule_out_said:
            for _, text in view.history:
                if text is not None:
                    excluded.update(content_words(text))
        return self.corpus.suspects(view.said_by(Role.ATTACKER), excluded)

    def best_guess(self, suspects: list[tuple[str, float]]) -> Move:
        if suspects:
            return Move("guess", suspects[0][0])
        common = self.corpus.reply_counts.most_common(1)
        return Move("guess", common[0][0] if common else LAST_RESORT_GUESS)


class ThresholdDefender(Defender):
    """Guesses once the evidence is strong enough; meanwhile avoids its suspected words."""

    name = "threshold"
    settings = {
        "threshold": "share of the belief, in (0, 1], the top word needs before the "
        "defender guesses it, e.g. 0.5 (1: guess only at the end)",
        "avoid": "how many of the most suspected words its replies avoid, 0 or more, e.g. 8",
        "min_similarity": "how close, in [0, 1], a corpus utterance must be to the attacker's "
        "for its reply to be used instead of a stock reply, e.g. 0.1",
    }

    def __init__(
        self,
        corpus: Corpus,
        *,
        threshold: float = 0.5,
        avoid: int = 8,
        min_similarity: float = 0.1,
    ) -> None:
        super().__init__(corpus)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise ValueError("threshold must be a number in (0, 1], e.g. 0.5")
        if not 0 < threshold <= 1:
            raise ValueError(
                f"threshold {threshold} is out of range: give a share in (0, 1], e.g. 0.5"
            )
        if isinstance(avoid, bool) or not isinstance(avoid, int) or avoid < 0:
            raise ValueError("avoid must be a whole number of words, 0 or more, e.g. 8")
        if isinstance(min_similarity, bool) or not isinstance(min_similarity, int | float):
            raise ValueError("min_similarity must be a number in [0, 1], e.g. 0.1")
        if not 0 <= min_similarity <= 1:
            raise ValueError("min_similarity must be in [0, 1], e.g. 0.1")
        self.threshold = float(threshold)
        self.avoid = avoid
        self.min_similarity = float(min_similarity)

    def act(self, view: AgentView, rng: random.Random) -> Move:
        suspects = self.suspects(view, rule_out_said=True)
        if not view.guess_used and (
            view.phase == Phase.FINAL_GUESS or (suspects and suspects[0][1] >= self.threshold)
        ):
            return self.best_guess(suspects)
        avoided = [target_word(word) for word, _ in suspects[: self.avoid]]

        def safe(reply: str) -> bool:
            return not any(word.mention(reply) for word in avoided)

        mine = set(view.said_by(Role.DEFENDER))
        last = view.last_said_by(Role.ATTACKER)
        if last is not None:
            for similarity, group in self.corpus.similar(last, rng):
                if similarity < self.min_similarity:
                    break
                for reply in group.typical_replies():
                    if reply not in mine and safe(reply):
                        return Move("say", reply)
        stock = [reply for reply in STOCK_REPLIES if safe(reply) and reply not in mine]
        return Move("say", rng.choice(stock or list(STOCK_REPLIES)))


class NaiveDefender(Defender):
    """Answers with a typical reply and never avoids a word; guesses only when forced.

    Like a person who does not know the game and listens loosely, it answers one of the
    `spread` corpus utterances closest to the attacker's (drawn at random) with that
    utterance's most frequent reply.
    """

    name = "naive"
    settings = {
        "spread": "how many of the closest corpus utterances, 1 or more, it may take the "
        "attacker to have said, e.g. 3 (1: always the closest)",
    }

    def __init__(self, corpus: Corpus, *, spread: int = 3) -> None:
        super().__init__(corpus)
        if isinstance(spread, bool) or not isinstance(spread, int) or spread < 1:
            raise ValueError("spread must be a whole number, 1 or more, e.g. 3")
        self.spread = spread

    def act(self, view: AgentView, rng: random.Random) -> Move:
        if view.phase == Phase.FINAL_GUESS:
            return self.best_guess(self.suspects(view, rule_out_said=False))
        last = view.last_said_by(Role.ATTACKER)
        closest = self.corpus.similar(last, rng)[: self.spread] if last is not None else []
        if not closest:
            return Move("say", rng.choice(STOCK_REPLIES))
        _, group = rng.choice(closest)
        counts = Counter(group.replies)
        most = max(counts.values())
        return Move("say", rng.choice([reply for reply, n in counts.items() if n == most]))


register_agent(ThresholdDefender)
register_agent(NaiveDefender)
