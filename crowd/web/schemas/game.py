"""The open-web game's profile and leaderboard."""

from __future__ import annotations

from pydantic import Field

from crowd.web.contract import Body, Reply
from crowd.web.schemas.studies import Count


class LeaderboardQuery(Body):
    # Item.category holds at most 100 characters: a longer one names no category.
    category: str | None = Field(
        default=None, max_length=100, description="only answers to items of this category"
    )


class PlayerScore(Reply):
    """A player's points and answers (boundary games)"""

    name: str | None = Field(description="the player's display name")
    points: float
    annotations: Count
    exact: Count = Field(description="guesses that named the boundary exactly")
    mean_distance: float | None = Field(
        description="mean of guess minus boundary (negative: early); null with no answers"
    )


class RankedScore(PlayerScore):
    """A player on the leaderboard"""

    rank: int = Field(ge=1)


class Leaderboard(Reply):
    """The best players, by points"""

    category: str | None
    leaderboard: list[RankedScore] = Field(max_length=50)


class Profile(PlayerScore):
    """Your scores, overall and per category"""

    by_category: dict[str, PlayerScore]
