"""Adversarial Taboo: the waiting room, a player's view of a game, moves, and the
experimenter's game records, tournaments and summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import MISSING, AfterValidator, ConfigDict, Field, RootModel
from pydantic_core import PydanticCustomError

from crowd.storage import Pairing, SeatState
from crowd.web.contract import Body, Reply
from crowd.web.schemas.work import Completion, WorkDone
from tasks.taboo.agents import agent_names
from tasks.taboo.config import Opponent
from tasks.taboo.engine import (
    MAX_GUESS_CHARS,
    MAX_UTTERANCE_CHARS,
    EndReason,
    Outcome,
    Phase,
    Role,
)
from tasks.taboo.export import ExportFormat
from tasks.taboo.live.jobs import MAX_GAMES_PER_PAIR, TOURNAMENT_NAME

Result = Literal["won", "lost", "tie", "left", "partner_left"]
MAX_INT = 2**63 - 1
MAX_AGENTS = 20


class LobbyBody(Body):
    model_config = ConfigDict(strict=True)

    opponent: Opponent = Field(
        default="either",
        description="who to play: a person, a computer player, or a person if one comes in "
        "time and else a computer player (what the study offers)",
    )


class Seat(Reply):
    """The player's seat in the waiting room; `game_id` once paired"""

    seat_id: int
    study_id: int
    state: SeatState
    opponent: Opponent
    game_id: int | None
    expires_at: str = Field(description="when waiting for a person ends (ISO 8601)")


class SeatReply(RootModel[Seat | WorkDone]):
    """The player's seat, or `done` when the study has no game left for them"""


class MoveBody(Body):
    """Say something or guess the word: one of `say` and `guess`."""

    model_config = ConfigDict(strict=True)

    version: int = Field(
        ge=0, le=MAX_INT,
        description="the game version the page shows: a retried move changes nothing",
    )  # fmt: skip
    say: str | None = Field(default=None, max_length=MAX_UTTERANCE_CHARS,
                            description="an utterance, on the player's turn")  # fmt: skip
    guess: str | None = Field(default=None, max_length=MAX_GUESS_CHARS,
                              description="the defender's one guess of the word")  # fmt: skip


class OpponentView(Reply):
    kind: Literal["human", "agent"]
    name: str


class ShownUtterance(Reply):
    index: int
    role: Role
    text: str
    turn: int | None = Field(description="the turn it used; null when struck without one")
    valid: bool | None = Field(description="null while the judge has not ruled")
    reasons: list[str] = Field(description="why it was struck")


class StruckUtterance(Reply):
    """The other side's struck utterance: only that it was struck, never its text."""

    index: int
    role: Role
    struck: Literal[True]
    turn: int | None


class GameView(Reply):
    """What one player's page may see of the game: the defender never gets the target (nor
    struck attacker text) before the game is over"""

    game_id: int
    study_id: int | None
    version: int
    role: Role
    opponent: OpponentView
    phase: Phase
    your_turn: bool
    turns: int
    max_turns: int
    utterances: list[ShownUtterance | StruckUtterance]
    guess_used: bool | None = Field(description="the defender's one guess is spent (null for "
                                    "the attacker)")  # fmt: skip
    move_seconds: float
    deadline: str = Field(description="when the player to move times out (ISO 8601)")
    over: bool
    target: str | MISSING = Field(default=MISSING,
                                  description="the word: the attacker's, or once over")
    variants: list[str] | MISSING = Field(default=MISSING, description="for the attacker")
    outcome: Outcome | MISSING = MISSING
    result: Result | MISSING = Field(default=MISSING, description="once over, for this player")
    end_reason: EndReason | None | MISSING = MISSING
    guess: str | None | MISSING = MISSING
    completion: Completion | MISSING = Field(
        default=MISSING, description="on a crowd platform, once over: how to hand the work in"
    )


# -- experimenters ---------------------------------------------------------------------------


class GamesQuery(Body):
    tournament: str | None = Field(default=None, max_length=100,
                                   description="only the games of this tournament")  # fmt: skip


class Player(Reply):
    kind: Literal["human", "agent"]
    id: str
    name: str


class GameRecord(Reply):
    game_id: int
    study_id: int | None
    tournament: str | None
    word: str
    concreteness: float | None
    pairing: Pairing
    attacker: Player
    defender: Player
    workers: list[str] = Field(description="the human players, as provider:id")
    excluded: bool
    state: dict[str, Any] = Field(
        description="the game's full state: rules, utterances with judge scores, outcome"
    )
    created_at: str
    ended_at: str | None


class Games(Reply):
    """Every game of the study with its full transcript and judge scores"""

    games: list[GameRecord]


def _agent_of(role: Role) -> Callable[[str], str]:
    def check(name: str) -> str:
        known = agent_names(role)
        if name not in known:
            raise PydanticCustomError(
                "unknown_agent", "{name!r} is not a {role} agent (known: {known})",
                {"name": name, "role": str(role), "known": ", ".join(known)},
            )  # fmt: skip
        return name

    return check


def _listed(role: Role) -> Callable[[dict[str, Any]], None]:
    def add(schema: dict[str, Any]) -> None:
        # Read when /openapi.json is built, so agents registered later are listed too.
        schema["enum"] = agent_names(role)

    return add


AttackerName = Annotated[
    str,
    Field(max_length=100, json_schema_extra=_listed(Role.ATTACKER)),
    AfterValidator(_agent_of(Role.ATTACKER)),
]
DefenderName = Annotated[
    str,
    Field(max_length=100, json_schema_extra=_listed(Role.DEFENDER)),
    AfterValidator(_agent_of(Role.DEFENDER)),
]


class NewTournament(Body):
    """Agents play every word of the study against each other, as a job on the models queue
    (`crowd worker --queue crowd-models`); the games are stored under `name`."""

    model_config = ConfigDict(strict=True)

    name: str = Field(
        pattern=f"^{TOURNAMENT_NAME.pattern}$",
        description="1 to 100 letters, digits, '.', '_' or '-', new in the study",
    )
    attackers: list[AttackerName] = Field(min_length=1, max_length=MAX_AGENTS)
    defenders: list[DefenderName] = Field(min_length=1, max_length=MAX_AGENTS)
    games_per_pair: int = Field(default=1, ge=1, le=MAX_GAMES_PER_PAIR,
                                description="games per word and pairing")  # fmt: skip
    seed: int = Field(default=0, ge=-MAX_INT - 1, le=MAX_INT)
    judge: bool = Field(default=True, description="judge every utterance after the games")


class TournamentQueued(Reply):
    """The tournament is queued"""

    tournament: str
    job_id: str
    status: Literal["queued"]


class LeaderboardRow(Reply):
    rank: int
    player: str = Field(description="human:<id> or agent:<name>")
    kind: str
    id: str | None
    name: str
    games: int
    attacker_played: int
    attacker_won: int
    defender_played: int
    defender_won: int
    wins: int
    ties: int
    losses: int
    abandoned: int
    opponent_left: int
    points: float
    win_rate: float | None


class TabooSummary(Reply):
    """The study's rates, per word and per pairing, and its leaderboard"""

    full: dict[str, Any] = Field(description="the analysis over every game")
    filtered: dict[str, Any] = Field(
        description="the analysis without games a QC-excluded or blocked worker played"
    )
    leaderboard: list[LeaderboardRow]


class TranscriptsQuery(Body):
    format: ExportFormat = Field(
        default="jsonl", description="jsonl: a game a line; csv: an utterance a row"
    )
    tournament: str | None = Field(default=None, max_length=100,
                                   description="only the games of this tournament")  # fmt: skip

