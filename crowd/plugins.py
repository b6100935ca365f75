"""Plugins loaded by name: the feature modules that register what the queue runs, and the
live packages of HIT types.

Importing a module never loads plugins; the app factory, `crowd worker` (through
crowd.queue.jobs.configure) and the CLI call `load_features` and `live_modules`. Loading by
name keeps the import graph layered: the queue runs the features' handlers without
importing them, and the platform reaches a HIT type's live package (`HitType.live`) without
naming it, so a new live HIT type needs no edit in crowd/.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tasks import HIT_TYPES, HitType, load_builtin

# Modules that register outbox event handlers, sweeps or delivery hooks when imported.
FEATURES = (
    "crowd.quality.stats",  # worker statistics and QC standing after each answer (first)
    "crowd.delivery.signed",  # first attempts after the commit, the sweep of due deliveries
    "crowd.delivery.webhooks",  # experimenters' webhooks
    "crowd.scale.completion",  # Scale tasks complete, their callbacks
    "crowd.studies.reports",  # a report refresh after every event of a study
    "crowd.ml.reward",  # a reward-model run every N labels
    "crowd.platforms.actions",  # platform calls after the commit
    "crowd.platforms.sync",  # periodic syncs with the platforms
    "crowd.work.assignments",  # the sweep of stale assignments
)


def live_module(hit: HitType) -> ModuleType | None:
    """The live package of a HIT type (`HitType.live`), imported; None for a type without.

    A live package is the platform side of a type played live (a game). It may expose
    `blueprint` (a Flask Blueprint, registered by crowd.web.init_app), `command` (a click
    command or group, added to `crowd` by crowd.cli), `game_records(session, study)` (the
    per-game records that reports read for `played_as_games` types) and `demo` (a module
    with `start(settings, db, api_key, url, seed, echo, records) -> study_id` and
    `lines(settings, study_id) -> list[str]`, run by `crowd demo`); importing it registers
    its jobs' event handlers and sweeps (crowd.queue.hooks).
    """
    return importlib.import_module(hit.live) if hit.live else None


def live_modules() -> list[tuple[str, ModuleType]]:
    """(HIT type name, live package) of every registered type that has one."""
    load_builtin()
    found = []
    for name, hit in HIT_TYPES.items():
        module = live_module(hit)
        if module is not None:
            found.append((name, module))
    return found


def load_features() -> None:
    """Import every feature module and live package, so their handlers are registered."""
    for name in FEATURES:
        importlib.import_module(name)
    live_modules()
