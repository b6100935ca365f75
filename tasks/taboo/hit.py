"""The Adversarial Taboo HIT type: items are target words; the work is a live game.

A worker's game is played through the game API (the live package, tasks/taboo/live/, at
/api/taboo/...), not through the one-worker step API: two players share a game. Each human
player still holds an assignment on the word's item, and the game's end stores their side
of it (role, outcome, result, turns) as their response, so quality control, payment and
platform hand-over work as for every type. Reports and exports read whole games (the live
package's records), agent games included. This module, like the rest of tasks/taboo/
outside live/, never imports the live package: the platform finds it by `live`.

Items: {"id": ... (default: the word), "word": "banana", "variants": ["plantain"],
"concreteness": 4.9}. The word is secret (the item's expected answer): only the attacker's
page ever sees it in play.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, TextIO

from crowd.exceptions import InvalidAction, InvalidConfig, InvalidItem
from tasks.base import HitType, ItemSpec, Simulator, StepResult
from tasks.taboo import analysis, export, report
from tasks.taboo.config import TabooConfig
from tasks.taboo.words import TargetWord

POINTS = {"won": 1.0, "tie": 0.5, "lost": 0.0, "left": 0.0}


class TabooSimulator(Simulator):
    """Simulated players learn what their side may know from the game view itself (the
    attacker's view carries the target), so there is no hidden truth per item."""

    kinds: ClassVar[tuple[str, ...]] = ("naive",)

    def truths(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        return {"": None}

    def key(self, task: Mapping[str, Any]) -> str:
        return ""

    def act(
        self, kind: str, rng: random.Random, task: Mapping[str, Any], truth: Any
    ) -> dict[str, Any]:
        raise InvalidAction(
            "simulated taboo players play through the game API: see tasks/taboo/live/sim.py"
        )


class TabooHit(HitType):
    name: ClassVar[str] = "taboo"
    title: ClassVar[str] = "Adversarial Taboo"
    template: ClassVar[str] = "taboo/task.html"
    export_formats: ClassVar[tuple[str, ...]] = export.FORMATS
    # How many games each word should get before others are preferred (words are picked
    # least-played first; a word is never given twice to the same worker).
    default_annotations_per_item: ClassVar[int] = 1
    aggregation_methods: ClassVar[tuple[str, ...]] = ()
    played_as_games: ClassVar[bool] = True
    live: ClassVar[str | None] = "tasks.taboo.live"

    def validate_extra_config(self, config: dict[str, Any]) -> dict[str, Any]:
        raw = dict(config)
        taboo = raw.pop("taboo", None)
        if raw:
            raise InvalidConfig(f"unknown config keys {sorted(raw)} for taboo studies")
        return {"taboo": TabooConfig.from_json(taboo).to_json()}

    def validate_item(self, raw: Mapping[str, Any], where: str = "item") -> ItemSpec:
        external_id = raw.get("id", raw.get("word"))  # a word list may leave ids out
        if not isinstance(external_id, str | int) or isinstance(external_id, bool) or not str(
            external_id
        ):
            raise InvalidItem("needs an 'id' (text or a number)", f"{where}.id")
        kind = raw.get("kind", "real")
        if kind != "real":
            raise InvalidItem("taboo items are target words: no gold, attention or training",
                              f"{where}.kind")  # fmt: skip
        word = raw.get("word")
        if not isinstance(word, str) or not word.strip() or len(word) > 60:
            raise InvalidItem("needs a 'word' of 1 to 60 characters", f"{where}.word")
        variants = raw.get("variants") or []
        if not isinstance(variants, list) or not all(
            isinstance(v, str) and v.strip() and len(v) <= 60 for v in variants
        ):
            raise InvalidItem("must be a list of words (variants of the target)",
                              f"{where}.variants")  # fmt: skip
        try:
            TargetWord(word.strip(), tuple(v.strip() for v in variants))
        except ValueError as error:
            raise InvalidItem(str(error), f"{where}.word") from None
        concreteness = raw.get("concreteness")
        if concreteness is not None and (
            not isinstance(concreteness, int | float) or isinstance(concreteness, bool)
        ):
            raise InvalidItem("must be a number (e.g. Brysbaert's 1-5 scale)",
                              f"{where}.concreteness")  # fmt: skip
        unknown = set(raw) - {"id", "kind", "word", "variants", "concreteness", "category"}
        if unknown:
            raise InvalidItem(f"unknown fields {sorted(unknown)}", where)
        return ItemSpec(
            external_id=str(external_id),
            content={},
            expected={"word": word.strip(), "variants": [v.strip() for v in variants]},
            meta={"concreteness": None if concreteness is None else float(concreteness)},
            category=raw.get("category"),
        )

    def start(
        self, content: Mapping[str, Any], now: datetime, config: Mapping[str, Any]
    ) -> StepResult:
        return StepResult(progress={"step": 0}, event={"type": "waiting", "at": now.isoformat()})

    def view(
        self, content: Mapping[str, Any], progress: Mapping[str, Any], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        # Deliberately no word: the page gets the game (and the attacker the target) from
        # the game API, which knows the player's role.
        return {"step": 0, "game_id": progress.get("game_id"), "role": progress.get("role")}

    def step(
        self,
        content: Mapping[str, Any],
        progress: Mapping[str, Any],
        action: Mapping[str, Any],
        now: datetime,
        config: Mapping[str, Any],
    ) -> StepResult:
        raise InvalidAction(
            f"taboo moves go to POST /api/taboo/games/{progress.get('game_id')}/move"
        )

    def score(self, expected: Mapping[str, Any], answer: Mapping[str, Any]) -> float | None:
        """1 for a win, 0.5 for a tie, 0 for a loss or leaving; None when the partner left."""
        return POINTS.get(str(answer.get("result")))

    def passed_attention(self, expected: Mapping[str, Any], answer: Mapping[str, Any]) -> bool:
        return False  # taboo studies have no attention items (validate_item refuses them)

    def answer_labels(self, answer: Mapping[str, Any]) -> dict[str, Hashable]:
        return {"result": str(answer.get("result"))}

    def expected_labels(self, expected: Mapping[str, Any]) -> dict[str, Hashable]:
        return {}

    def expected_from_labels(self, labels: Mapping[str, Hashable]) -> dict[str, Any]:
        raise InvalidConfig("taboo words have no answer to promote to gold")

    def feedback(
        self,
        content: Mapping[str, Any],
        expected: Mapping[str, Any],
        answer: Mapping[str, Any],
        kind: str,
        config: Mapping[str, Any],
    ) -> dict[str, Any]:
        """The game is over and stored: its word and how it ended may be shown."""
        result = str(answer.get("result"))
        messages = {"won": "You won!", "lost": "You lost this one.", "tie": "A tie.",
                    "left": "You left the game.", "partner_left": "Your partner left the game."}
        return {"message": messages.get(result, "Game over."), "result": result,
                "word": expected.get("word"), "game_id": answer.get("game_id")}  # fmt: skip

    def surface(self, answer: Mapping[str, Any]) -> str | None:
        return None

    def chars_shown(self, content: Mapping[str, Any], answer: Mapping[str, Any]) -> int:
        return 0

    def import_answer(
        self, content: Mapping[str, Any], raw: Mapping[str, Any], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        raise InvalidItem("taboo games are played live: there are no answers to import")

    def simulator(self) -> Simulator:
        return TabooSimulator()

    def analysis_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A game record passes through (the live package's records build them)."""
        return dict(row)

    def analyze(
        self, rows: list[dict[str, Any]], excluded_workers: set[str], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        games = [
            {**row, "excluded": bool(set(row.get("workers") or ()) & excluded_workers)}
            for row in rows
        ]
        return {
            "full": analysis.analyze(games, filtered=False),
            "filtered": analysis.analyze(games, filtered=True),
            "leaderboard": analysis.leaderboard(games),
        }

    def render_report(self, data: dict[str, Any], out_dir: Path, title: str) -> str:
        return report.render_report(data, out_dir, title)

    def export(self, rows: list[dict[str, Any]], fmt: str, handle: TextIO) -> int:
        return export.write(rows, fmt, handle)
