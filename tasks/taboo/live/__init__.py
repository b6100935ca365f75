"""Adversarial Taboo's platform side: a HIT type played live, so it has platform code of its
own, which lives here with its type (TabooHit.live names this package; crowd/ finds it only
through that name, and the rest of tasks/taboo/ never imports it).

play.py: the waiting room, moves and what each page sees; games.py: game states, agents'
moves, the clocks and the end (with the sweep of games nobody polls); jobs.py: judging
utterances and agent tournaments on the models queue (with the handler of each new move);
records.py: games as records for reports and exports; web.py: the blueprint; cli.py:
`crowd taboo`; sim.py: a simulated player over HTTP; demo.py: its part of `crowd demo`.

What the platform reads here (crowd.plugins.live_module): `blueprint`, `command`,
`game_records` and `demo`; importing the package registers the sweep and the handler.
"""

from __future__ import annotations

from tasks.taboo.live import demo, games, jobs
from tasks.taboo.live.cli import taboo as command
from tasks.taboo.live.records import records as game_records
from tasks.taboo.live.web import bp as blueprint

__all__ = ["blueprint", "command", "demo", "game_records", "games", "jobs"]
