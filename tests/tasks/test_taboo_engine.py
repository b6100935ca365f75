"""The rules of Adversarial Taboo: every outcome and edge of the engine, and target matching."""

from __future__ import annotations

import pytest

from tasks.taboo.engine import (
    MAX_REDOS,
    EndReason,
    GameState,
    InvalidMove,
    Outcome,
    Phase,
    Role,
    Rules,
    end,
    guess,
    judge,
    new_game,
    say,
    seen_by,
)
from tasks.taboo.words import TargetWord, all_forms, tokenize

A, D = Role.ATTACKER, Role.DEFENDER


def exchange(state: GameState, pairs: int) -> GameState:
    for n in range(pairs):
        state = say(state, A, f"tell me about the weather on day {n}")
        state = say(state, D, f"it was grey and windy on that day {n}")
    return state


# -- target matching ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "text", "found"),
    [
        ("banana", "I ate two bananas", "bananas"),
        ("banana", "BANANA bread", "banana"),
        ("banana", "a banana-split", "banana"),
        ("banana", "Banana's peel", "banana"),
        ("banana", "bandana", None),
        ("banana", "ban ana", None),
        ("run", "she ran home", "ran"),
        ("run", "he runs daily", "runs"),
        ("run", "Running is fun", "running"),
        ("running", "I run", None),  # "running" is a lemma (a noun): word lists give bases
        ("mice", "a mouse", "mouse"),  # a target that is no lemma inflects from its lemma
        ("rose", "the sun rises", None),  # not a form of "rise": rose is its own lemma
        ("rose", "red roses", "roses"),
        ("saw", "I see what you mean", None),
        ("left", "I will leave now", None),
        ("banana", "ｂａｎａｎａｓ", "bananas"),  # fullwidth letters, NFKC-normalised
        ("banana", "ban\u200bana", "banana"),  # a zero-width space inside
        ("mouse", "two mice", "mice"),
        ("child", "the children", "children"),
        ("go", "she went out", "went"),
        ("ice cream", "two ice creams", "ice creams"),
        ("ice cream", "ice and cream", None),
        ("ice cream", "cream", None),
        ("blorp", "many blorps", "blorps"),  # a word lemminflect has never seen
    ],
)
def test_mentions_cover_plural_verb_forms_and_case(target: str, text: str, found: str | None):
    assert TargetWord(target).mention(text) == found


def test_explicit_variants_and_same_tokenization_both_sides() -> None:
    word = TargetWord("television", ("TV", "telly"))
    assert word.mention("we watched TV") == "tv"
    assert word.mention("the tellies were on") == "tellies"
    assert word.mention("Televisions everywhere") == "televisions"
    assert TargetWord("television").mention("we watched TV") is None
    assert tokenize("Don't say BANANA-split!") == ["don", "t", "say", "banana", "split"]
    assert "mice" in all_forms("mouse") and "mouse" in all_forms("mouse")
    with pytest.raises(ValueError, match="no letters"):
        TargetWord("123")


def test_guess_matching_accepts_forms_and_an_article_but_not_more() -> None:
    word = TargetWord("banana")
    assert word.is_guessed_by("Bananas")
    assert word.is_guessed_by("a banana")
    assert not word.is_guessed_by("banana bread")
    assert not word.is_guessed_by("apple")
    assert not word.is_guessed_by("")


# -- outcomes ---------------------------------------------------------------------------------


def test_attacker_speaks_first_and_sides_alternate() -> None:
    state = new_game("banana")
    assert state.phase == Phase.ATTACKER and state.to_move() == A
    with pytest.raises(InvalidMove, match="attacker's turn"):
        say(state, D, "hello")
    state = say(state, A, "what do monkeys eat?")
    assert state.to_move() == D and state.turns == 1
    with pytest.raises(InvalidMove, match="defender's turn"):
        say(state, A, "again")
    state = say(state, D, "they like fruit")
    assert state.to_move() == A and state.turns == 2


def test_attacker_wins_when_defender_says_a_variant() -> None:
    state = say(new_game("banana"), A, "what yellow fruit do monkeys love?")
    state = say(state, D, "Monkeys love Bananas, of course")
    assert state.outcome == Outcome.ATTACKER and state.end_reason == EndReason.SAID_TARGET
    assert state.over and state.turns == 2
    with pytest.raises(InvalidMove, match="over"):
        say(state, A, "more")
    with pytest.raises(InvalidMove, match="over"):
        guess(state, "banana")


def test_guess_at_turn_one_wins_for_the_defender() -> None:
    state = say(new_game("banana"), A, "long yellow fruit that monkeys peel")
    state = guess(state, "Banana")
    assert state.outcome == Outcome.DEFENDER and state.end_reason == EndReason.GUESSED
    assert state.guess == "Banana" and state.guess_turn == 1


def test_guess_before_the_attacker_speaks_is_allowed() -> None:
    # "at any time": even before the first utterance (a lucky or a wasted guess)
    state = guess(new_game("banana"), "apple")
    assert state.outcome == Outcome.TIE and state.end_reason == EndReason.WRONG_GUESS
    assert state.guess_turn == 0


def test_wrong_guess_ends_in_a_tie_or_uses_up_the_guess() -> None:
    state = guess(exchange(new_game("banana"), 1), "apple")
    assert state.outcome == Outcome.TIE and state.turns == 2
    going_on = guess(exchange(new_game("banana", rules=Rules(wrong_guess_ends=False)), 1), "pear")
    assert not going_on.over and going_on.guess == "pear"
    with pytest.raises(InvalidMove, match="already used"):
        guess(going_on, "banana")
    # the attacker can still win after the wasted guess
    going_on = say(going_on, A, "what do monkeys eat?")
    assert say(going_on, D, "bananas").outcome == Outcome.ATTACKER


def test_turn_limit_forces_the_guess() -> None:
    state = exchange(new_game("banana", rules=Rules(max_turns=4)), 2)
    assert state.phase == Phase.FINAL_GUESS and state.turns == 4 and state.to_move() == D
    with pytest.raises(InvalidMove, match="must guess"):
        say(state, D, "more talk")
    right = guess(state, "bananas")
    assert right.outcome == Outcome.DEFENDER and right.guess_turn == 4
    wrong = guess(state, "umbrella")
    assert wrong.outcome == Outcome.TIE and wrong.end_reason == EndReason.WRONG_GUESS


def test_default_limit_is_ten_turns_and_an_odd_limit_ends_after_the_attacker() -> None:
    state = exchange(new_game("banana"), 5)
    assert state.phase == Phase.FINAL_GUESS and state.turns == 10
    state = say(new_game("banana", rules=Rules(max_turns=1)), A, "hi there")
    assert state.phase == Phase.FINAL_GUESS


def test_used_guess_and_exhausted_turns_is_a_tie() -> None:
    rules = Rules(max_turns=2, wrong_guess_ends=False)
    state = guess(say(new_game("banana", rules=rules), A, "hello"), "apple")
    state = say(state, D, "hello to you")
    assert state.outcome == Outcome.TIE and state.end_reason == EndReason.NO_GUESS


# -- invalid utterances -----------------------------------------------------------------------


def test_attacker_saying_the_target_loses_by_default() -> None:
    state = say(new_game("banana"), A, "Do you like BANANAS?")
    assert state.outcome == Outcome.DEFENDER and state.end_reason == EndReason.INVALID
    assert state.ended_by == A
    struck = state.utterances[-1]
    assert struck.valid is False and "bananas" in struck.reasons[0]


def test_invalid_costing_a_turn_strikes_the_utterance_and_passes_the_turn() -> None:
    state = say(new_game("banana", rules=Rules(invalid_cost="turn")), A, "banana?")
    assert not state.over and state.turns == 1 and state.to_move() == D
    assert state.utterances[0].valid is False


def test_invalid_costing_a_redo_lets_the_attacker_try_again_without_a_turn() -> None:
    state = say(new_game("banana", rules=Rules(invalid_cost="redo")), A, "banana?")
    assert not state.over and state.turns == 0 and state.to_move() == A
    assert state.utterances[0].turn is None
    state = say(state, A, "a yellow fruit?")
    assert state.turns == 1 and state.utterances[1].turn == 1


def test_redo_gives_a_few_tries_then_uses_up_the_turn() -> None:
    state = new_game("banana", rules=Rules(invalid_cost="redo"))
    for _ in range(MAX_REDOS - 1):
        state = say(state, A, "banana!")
        assert state.to_move() == A and state.turns == 0
    state = say(state, A, "bananas!")
    assert state.to_move() == D and state.turns == 1 and state.utterances[-1].turn == 1


def test_the_defender_never_sees_struck_attacker_text() -> None:
    state = say(new_game("banana", rules=Rules(invalid_cost="turn")), A, "say banana")
    state = say(state, D, "I will not")
    for view_state in (state, guess(state, "apple")):  # also after the end
        defender_view = seen_by(view_state, D)
        assert "banana" not in repr(defender_view).lower()
        assert defender_view[0] == {"index": 0, "role": "attacker", "struck": True, "turn": 1}
    assert seen_by(state, A)[0]["text"] == "say banana"


def test_enforced_judge_holds_the_turn_until_it_rules() -> None:
    rules = Rules(enforce_judge=True, invalid_cost="turn")
    state = say(new_game("banana", rules=rules), A, "what is yellow?")
    assert state.phase == Phase.JUDGING and state.to_move() is None
    assert seen_by(state, D) == []  # not shown before the verdict
    with pytest.raises(InvalidMove, match="judge"):
        say(state, D, "hm")
    with pytest.raises(InvalidMove, match="judge"):
        guess(state, "sun")
    scores = {"relevance": {"score": None, "passed": True}, "fluency": {"score": 20.0,
              "threshold": 35.0, "passed": True}}  # fmt: skip
    passed = judge(state, 0, scores, passed=True)
    assert passed.to_move() == D and passed.utterances[0].valid is True
    assert passed.utterances[0].judge["fluency"]["score"] == 20.0
    failing = {"fluency": {"score": 400.0, "threshold": 35.0, "passed": False}}
    failed = judge(state, 0, failing, passed=False)
    assert failed.to_move() == D and failed.utterances[0].valid is False
    assert failed.utterances[0].reasons == ("judge: fluency",)
    lost = judge(say(new_game("banana", rules=Rules(enforce_judge=True)), A, "x y"), 0, failing,
                 passed=False)  # fmt: skip
    assert lost.outcome == Outcome.DEFENDER and lost.ended_by == A


def test_recorded_judge_scores_do_not_change_the_game() -> None:
    state = say(new_game("banana"), A, "what is yellow?")
    failing = {"fluency": {"score": 400.0, "threshold": 35.0, "passed": False}}
    state = judge(state, 0, failing, passed=False)
    assert state.to_move() == D and state.utterances[0].valid is True
    assert state.utterances[0].judge == failing
    with pytest.raises(InvalidMove, match="no utterance 5"):
        judge(state, 5, failing, passed=False)


def test_defender_saying_the_target_still_loses_under_the_enforced_judge() -> None:
    state = say(new_game("banana", rules=Rules(enforce_judge=True)), A, "fruit?")
    state = judge(state, 0, {}, passed=True)
    state = say(state, D, "banana")
    assert state.outcome == Outcome.ATTACKER


# -- leaving, validation and storage ----------------------------------------------------------


def test_a_player_leaving_abandons_the_game() -> None:
    state = end(exchange(new_game("banana"), 1), EndReason.TIMED_OUT, D)
    assert state.outcome == Outcome.ABANDONED and state.ended_by == D
    assert end(state, EndReason.LEFT, A) == state  # the first ending stands
    with pytest.raises(InvalidMove):
        end(new_game("banana"), EndReason.GUESSED, A)


def test_bad_moves_and_rules_are_refused_with_reasons() -> None:
    state = new_game("banana")
    with pytest.raises(InvalidMove, match="empty"):
        say(state, A, "   ")
    with pytest.raises(InvalidMove, match="under 500"):
        say(state, A, "x" * 501)
    with pytest.raises(InvalidMove, match="text"):
        say(state, A, 42)
    with pytest.raises(ValueError, match="invalid_cost must be one of lose, turn, redo"):
        Rules(invalid_cost="free")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="from 1 to 100"):
        Rules(max_turns=0)
    with pytest.raises(ValueError, match="unknown rules"):
        Rules.from_json({"turns": 3})
    with pytest.raises(ValueError, match="no letters"):
        new_game("42")


def test_states_round_trip_through_json() -> None:
    state = say(new_game("banana", ("plantain",), Rules(invalid_cost="turn")), A, "banana!")
    state = judge(say(state, D, "what?"), 1, {"relevance": {"score": 0.5}}, passed=True)
    state = guess(state, "apple")
    assert GameState.from_json(state.to_json()) == state
