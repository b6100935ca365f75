"""Taboo agents and agent-vs-agent games: rules kept, secrets kept, and who beats whom."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest

from crowd.exceptions import RegistryError
from tasks.taboo.agents import (
    AGENTS,
    Agent,
    AgentView,
    Corpus,
    Move,
    NaiveDefender,
    Pair,
    RetrievalAttacker,
    ThresholdDefender,
    agent_names,
    make_agent,
    register_agent,
)
from tasks.taboo.agents.corpus import content_words
from tasks.taboo.engine import (
    EndReason,
    InvalidCost,
    Outcome,
    Phase,
    Role,
    Rules,
    new_game,
    say,
)
from tasks.taboo.simulate import (
    TournamentGame,
    Word,
    load_words,
    max_steps,
    play,
    tournament,
)
from tasks.taboo.words import TargetWord

A, D = Role.ATTACKER, Role.DEFENDER
BANANA_PROMPTS = (
    "What did you put in your smoothie?",
    "What fruit do monkeys love?",
    "What's yellow, curved and easy to peel?",
    "Which fruit is supposed to have lots of potassium?",
)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.default()


@pytest.fixture(scope="module")
def words() -> list[Word]:
    return load_words()


@pytest.fixture(scope="module")
def sample_games(words: list[Word]) -> list[TournamentGame]:
    """Three games per sample word of the retrieval attacker against each defender."""
    return tournament(words, ["retrieval"], ["naive", "threshold"], games_per_pair=3, seed=11)


def rates(games: list[TournamentGame], defender: str) -> dict[str, float]:
    outcomes = Counter(str(g.state.outcome) for g in games if g.defender == defender)
    assert not outcomes[Outcome.ABANDONED]
    total = sum(outcomes.values())
    return {side: outcomes[side] / total for side in ("attacker", "defender", "tie")}


class Spy(Agent):
    """A defender that records every view it gets and answers like the naive one."""

    name = "spy"
    role = Role.DEFENDER

    def __init__(self, corpus: Corpus) -> None:
        super().__init__(corpus)
        self.inner = NaiveDefender(corpus)
        self.views: list[AgentView] = []

    def act(self, view: AgentView, rng: random.Random) -> Move:
        self.views.append(view)
        return self.inner.act(view, rng)


class Scripted(Agent):
    """An attacker that says its lines in order, then the last one again."""

    name = "scripted"
    role = Role.ATTACKER
    lines: ClassVar[tuple[str, ...]] = ()

    def act(self, view: AgentView, rng: random.Random) -> Move:
        said = len([who for who, _ in view.history if who == Role.ATTACKER])
        return Move("say", self.lines[min(said, len(self.lines) - 1)])


def scripted(corpus: Corpus, *lines: str) -> Scripted:
    agent = Scripted(corpus)
    agent.lines = lines  # type: ignore[misc]
    return agent


def view_after(target: str, attacker_lines: list[str], rules: Rules | None = None) -> AgentView:
    """The defender's view once the attacker said each line and the defender answered 'hm'."""
    state = new_game(target, rules=rules)
    for number, line in enumerate(attacker_lines):
        state = say(state, A, line)
        if number < len(attacker_lines) - 1:
            state = say(state, D, "hm, no idea")
    return AgentView.of(state, D)


# -- the attacker ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rules",
    [Rules(), Rules(max_turns=20, invalid_cost=InvalidCost.REDO), Rules(wrong_guess_ends=False)],
)
def test_the_attacker_never_says_the_target_or_a_variant(words: list[Word], rules: Rules):
    games = tournament(words, ["retrieval"], ["naive", "threshold"], 3, rules=rules, seed=3)
    attacker_lines = 0
    for game in games:
        target = TargetWord(game.word.word, game.word.variants)
        for utterance in game.state.utterances:
            if utterance.role == A:
                attacker_lines += 1
                assert target.mention(utterance.text) is None, (game.word, utterance.text)
                assert utterance.valid is True
        assert game.state.end_reason != EndReason.INVALID
    assert attacker_lines > 2 * len(games)


def test_the_attacker_avoids_explicit_variants_and_says_what_draws_the_target_out(
    corpus: Corpus,
):
    attacker = RetrievalAttacker(corpus)
    bike = TargetWord("bicycle", ("bike",))
    for option in attacker.plan(bike):
        assert bike.mention(option.group.text) is None
        assert option.strength > 0
        assert any(bike.mention(reply) for reply in option.group.replies)
    # Without the variant, replies that say only "bike" do not count.
    plain = {option.group.text for option in attacker.plan(TargetWord("bicycle"))}
    assert "What got stolen from outside the store?" not in plain
    assert "What got stolen from outside the store?" in {o.group.text for o in attacker.plan(bike)}


def test_the_attacker_skips_utterances_that_say_the_target_however_well_they_work():
    tiny = Corpus(
        [
            Pair("Do you like bananas?", "Yes, I love bananas."),
            Pair("What's your snack?", "An apple."),
            Pair("What's your snack?", "A banana."),
            Pair("How are you?", "Fine."),
        ]
    )
    attacker = RetrievalAttacker(tiny)
    plan = attacker.plan(TargetWord("banana"))
    assert [(o.group.text, o.strength) for o in plan] == [("What's your snack?", 0.5)]
    move = attacker.act(AgentView.of(new_game("banana"), A), random.Random(0))
    assert move == Move("say", "What's your snack?")


def test_the_attacker_follows_the_defender_and_does_not_repeat_itself(corpus: Corpus):
    attacker = RetrievalAttacker(corpus)
    state = new_game("coffee")
    said: list[str] = []
    for _ in range(5):
        move = attacker.act(AgentView.of(state, A), random.Random(0))
        assert move.kind == "say" and move.text not in said
        said.append(move.text)
        state = say(say(state, A, move.text), D, "I never drink anything hot in the morning")
    # The defender spoke of drinking in the morning: an utterance on that topic comes first.
    state = say(new_game("coffee"), A, "Why are you so jittery?")
    state = say(state, D, "I never drink anything in the morning")
    assert attacker.act(AgentView.of(state, A), random.Random(0)).text == (
        "What do you drink in the morning?"
    )


def test_fallback_steers_towards_the_neighbours_of_a_target_no_reply_says(corpus: Corpus):
    attacker = RetrievalAttacker(corpus)
    umbrella = TargetWord("umbrella")
    _, heard = corpus.mentions(umbrella)
    assert not heard  # no reply says it: the fallback is what we test
    related = corpus.related(umbrella)
    assert "rain" in related and "umbrella" not in related
    plan = attacker.plan(umbrella)
    assert all(umbrella.mention(option.group.text) is None for option in plan)
    best = plan[0].group
    assert any(word in related for reply in best.replies for word in content_words(reply))
    # A word the corpus never saw: still a valid, target-free line every turn.
    state = play(attacker, make_agent("naive"), "xylophone", rng=random.Random(2))
    assert state.over and all(u.valid for u in state.utterances)


# -- what a defender may know ---------------------------------------------------------------


@pytest.mark.parametrize("cost", [InvalidCost.REDO, InvalidCost.TURN])
def test_a_defender_never_receives_the_target(corpus: Corpus, cost: InvalidCost):
    spy = Spy(corpus)
    attacker = scripted(
        corpus, "I love bananas", "What fruit do monkeys love?", "What's a good snack?"
    )
    rules = Rules(max_turns=6, invalid_cost=cost)
    state = play(attacker, spy, "banana", ("plantain",), rules=rules, rng=random.Random(1))
    assert state.utterances[0].valid is False  # the struck line said the target
    assert spy.views
    banana = TargetWord("banana", ("plantain",))
    for view in spy.views:
        assert view.role == D and view.target is None and view.variants == ()
        assert view.history[0] == (A, None)
        for _, text in view.history:
            assert text is None or banana.mention(text) is None
    # The attacker does see its own struck line, and the target.
    attacker_view = AgentView.of(state, A)
    assert attacker_view.target == "banana" and attacker_view.variants == ("plantain",)
    assert attacker_view.history[0] == (A, "I love bananas")


def test_defenders_refuse_a_view_that_holds_the_target(corpus: Corpus):
    state = say(new_game("banana"), A, BANANA_PROMPTS[0])
    leaked = AgentView.of(state, A)
    leaked = AgentView(D, "banana", (), leaked.history, 1, 10, Phase.DEFENDER, False)
    with pytest.raises(ValueError, match="must not hold the target"):
        ThresholdDefender(corpus).act(leaked, random.Random(0))


# -- the threshold defender -----------------------------------------------------------------


def test_the_threshold_defender_guesses_once_the_evidence_passes_its_threshold(corpus: Corpus):
    defender = ThresholdDefender(corpus, threshold=0.5)
    guessed_at = None
    for count in range(1, len(BANANA_PROMPTS) + 1):
        view = view_after("banana", list(BANANA_PROMPTS[:count]))
        top, share = defender.suspects(view, rule_out_said=True)[0]
        move = defender.act(view, random.Random(0))
        if share >= 0.5:
            assert move == Move("guess", top)
            guessed_at = guessed_at or count
        else:
            assert move.kind == "say"
    assert guessed_at is not None and guessed_at > 1  # one line is not enough evidence
    assert TargetWord("banana").is_guessed_by(
        defender.act(view_after("banana", list(BANANA_PROMPTS)), random.Random(0)).text
    )


def test_the_threshold_defender_is_forced_to_guess_at_the_end(corpus: Corpus):
    cautious = ThresholdDefender(corpus, threshold=1.0)
    state = new_game("banana", rules=Rules(max_turns=2))
    state = say(state, A, BANANA_PROMPTS[1])
    assert cautious.act(AgentView.of(state, D), random.Random(0)).kind == "say"
    state = say(state, D, "hm, no idea")
    assert state.phase == Phase.FINAL_GUESS
    assert cautious.act(AgentView.of(state, D), random.Random(0)).kind == "guess"
    naive = NaiveDefender(corpus)
    assert naive.act(AgentView.of(state, D), random.Random(0)).kind == "guess"


def test_the_threshold_defender_avoids_the_words_it_suspects(corpus: Corpus):
    view = view_after("dog", ["What animal barks?"])
    assert make_agent("naive", spread=1).act(view, random.Random(0)).text == "A dog barks."
    reply = ThresholdDefender(corpus).act(view, random.Random(0))
    assert reply.kind == "say" and TargetWord("dog").mention(reply.text) is None
    # A word already said cannot be the target: it drops out of the candidates.
    view = view_after("dog", ["What animal barks?", "Who keeps barking next door?"])
    said = {"animal", "bark", "keep", "next", "door", "hm", "idea"}
    assert not said & {word for word, _ in ThresholdDefender(corpus).suspects(view, True)}


# -- games and tournaments ------------------------------------------------------------------


@pytest.mark.parametrize("max_turns", [1, 2, 5, 10])
def test_play_respects_the_turn_limit(corpus: Corpus, max_turns: int):
    rules = Rules(max_turns=max_turns)
    cautious = ThresholdDefender(corpus, threshold=1.0)
    for target in ("xylophone", "banana", "freedom"):
        state = play(RetrievalAttacker(corpus), cautious, target, rules=rules)
        assert state.over and state.turns <= max_turns
        if state.end_reason != EndReason.SAID_TARGET:
            assert state.turns == max_turns and state.guess is not None


def test_a_player_stuck_on_struck_lines_uses_up_its_turns(corpus: Corpus):
    # Under REDO the engine lets a player try a turn MAX_REDOS times, then charges the turn.
    stubborn = scripted(corpus, "bananas!")
    rules = Rules(max_turns=4, invalid_cost=InvalidCost.REDO)
    state = play(stubborn, make_agent("threshold"), "banana", rules=rules)
    assert state.over and state.outcome != Outcome.ABANDONED
    attacker_lines = [u for u in state.utterances if u.role == A]
    assert all(u.valid is False for u in attacker_lines)
    assert len(state.utterances) < max_steps(rules)


def test_play_checks_the_agents_roles(corpus: Corpus):
    with pytest.raises(ValueError, match="pass an attacker"):
        play(make_agent("naive"), make_agent("threshold"), "banana")


def test_a_tournament_is_deterministic_for_a_seed(words: list[Word]):
    some = words[:5]
    first = tournament(some, ["retrieval"], ["naive", "threshold"], 2, seed=5)
    again = tournament(some, ["retrieval"], ["naive", "threshold"], 2, seed=5)
    assert [g.to_json() for g in first] == [g.to_json() for g in again]
    assert len(first) == 5 * 2 * 2
    assert len({g.seed for g in first}) == len(first)
    # Each game has its own seed: the order the words come in changes nothing.
    backwards = tournament(some[::-1], ["retrieval"], ["naive", "threshold"], 2, seed=5)
    by_key = {(g.word.word, g.defender, g.seed): g.to_json() for g in backwards}
    assert all(by_key[(g.word.word, g.defender, g.seed)] == g.to_json() for g in first)
    other = tournament(some, ["retrieval"], ["naive", "threshold"], 2, seed=6)
    assert [g.to_json() for g in other] != [g.to_json() for g in first]


def test_tournament_records_are_what_the_analysis_reads(sample_games: list[TournamentGame]):
    from tasks.taboo.analysis import analyze

    record = sample_games[0].to_json()
    assert record["attacker"] == {"kind": "agent", "id": "retrieval", "name": "retrieval"}
    assert record["pairing"] == "agent-agent" and record["concreteness"] is not None
    assert json.loads(json.dumps(record)) == record
    naive = [g.to_json() for g in sample_games if g.defender == "naive"]
    assert analyze(naive)["rates"] == pytest.approx(rates(sample_games, "naive"))


def test_retrieval_beats_the_naive_defender_far_more_often_than_the_threshold_one(
    sample_games: list[TournamentGame],
):
    naive, threshold = rates(sample_games, "naive"), rates(sample_games, "threshold")
    # Measured on the sample words, 3 games each: about 1.0 against 0.05.
    assert naive["attacker"] >= 0.8
    assert threshold["attacker"] <= 0.3
    assert naive["attacker"] - threshold["attacker"] >= 0.5
    assert threshold["defender"] >= 0.5  # it wins by guessing, not only by ties


# -- registry and settings ------------------------------------------------------------------


def test_the_registry_names_the_known_agents_on_a_typo():
    assert agent_names(A) == ["retrieval"] and agent_names(D) == ["naive", "threshold"]
    with pytest.raises(RegistryError, match=r"'retriever'.*naive, retrieval, threshold"):
        make_agent("retriever")
    with pytest.raises(RegistryError, match="already registered"):
        register_agent(RetrievalAttacker)
    with pytest.raises(RegistryError, match="plays the defender.*retrieval"):
        tournament(["banana"], ["threshold"], ["naive"])
    assert set(AGENTS) == {"retrieval", "naive", "threshold"}


@pytest.mark.parametrize(
    ("name", "settings", "message"),
    [
        ("threshold", {"threshold": 0}, r"\(0, 1\]"),
        ("threshold", {"threshold": 1.5}, r"\(0, 1\]"),
        ("threshold", {"threshold": "high"}, "must be a number"),
        ("threshold", {"avoid": -1}, "0 or more"),
        ("threshold", {"treshold": 0.5}, "no setting 'treshold'.*threshold"),
        ("naive", {"spread": 0}, "1 or more"),
        ("retrieval", {"relevance": -0.1}, "0 or more"),
    ],
)
def test_bad_settings_say_how_to_fix_them(name: str, settings: dict[str, Any], message: str):
    with pytest.raises(ValueError, match=message):
        make_agent(name, **settings)


def test_an_agent_must_describe_its_settings(corpus: Corpus):
    class Sloppy(Agent):
        name = "sloppy"
        role = Role.ATTACKER

        def __init__(self, corpus: Corpus, *, secret: int = 1) -> None:
            super().__init__(corpus)

        def act(self, view: AgentView, rng: random.Random) -> Move:
            return Move("say", "hm")

    with pytest.raises(TypeError, match="secret"):
        register_agent(Sloppy)
    assert "sloppy" not in AGENTS


# -- data -----------------------------------------------------------------------------------


def test_corpus_lines_are_checked_and_named(tmp_path: Path):
    good = json.dumps({"utterance": "Hi there", "reply": "Hello!"})
    path = tmp_path / "corpus.jsonl"
    for bad, message in [
        ("{not json", "line 2: not JSON"),
        (json.dumps({"utterance": "Hi"}), "line 2: 'reply' must be text"),
        (json.dumps({"utterance": "Hi", "reply": "Yo", "x": 1}), r"line 2: unknown keys \['x'\]"),
        (json.dumps(["Hi", "Yo"]), "line 2: a pair is an object"),
        (json.dumps({"utterance": "?!", "reply": "Yo"}), "line 2: 'utterance' must be text"),
    ]:
        path.write_text(f"{good}\n{bad}\n")
        with pytest.raises(ValueError, match=message):
            Corpus.load(path)
    path.write_text("\n")
    with pytest.raises(ValueError, match="no utterance/reply pairs"):
        Corpus.load(path)
    path.write_text(f"{good}\n\n{good}\n")
    corpus = Corpus.load(path)
    assert corpus.pairs == (Pair("Hi there", "Hello!"),) * 2 and len(corpus.groups) == 1


def test_the_sample_data(corpus: Corpus, words: list[Word]):
    assert len(corpus.pairs) >= 300 and len(words) >= 20
    concreteness = [w.concreteness for w in words if w.concreteness is not None]
    assert len(concreteness) == len(words) and min(concreteness) < 2 < 4.5 < max(concreteness)
    for word in words:
        target = TargetWord(word.word, word.variants)
        said, heard = corpus.mentions(target)
        assert len(heard - said) >= 10, word.word


def test_words_are_checked(tmp_path: Path):
    assert Word.from_json({"word": "bike", "variants": ["cycle"], "concreteness": 5}) == Word(
        "bike", ("cycle",), 5.0
    )
    assert Word.from_json("dog") == Word("dog")
    for raw, message in [
        ({"word": "dog", "concreteness": 7}, "1-5 scale"),
        ({"word": "dog", "variants": "hound"}, "list of words"),
        ({"word": "dog", "colour": "brown"}, "unknown keys"),
        ({"word": "42"}, "needs some letters"),
    ]:
        with pytest.raises(ValueError, match=message):
            Word.from_json(raw)
    path = tmp_path / "words.jsonl"
    path.write_text('{"word": "dog"}\n{"word": "cat", "concreteness": 0}\n')
    with pytest.raises(ValueError, match="line 2: concreteness"):
        load_words(path)
