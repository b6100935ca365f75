"""Adversarial Taboo exports: whole transcripts as JSON lines, or one CSV row per utterance.

- "jsonl": one game per line: the word, pairing, players, outcome, end reason, turns, the
  guess, and every utterance with its role, text, turn, validity, reasons and the judge's
  scores, thresholds and model ids as recorded.
- "csv": one row per utterance, the game's columns repeated on each, the judge flattened
  into <check>_score, <check>_threshold, <check>_model, <check>_passed (fluency and
  relevance always, then any other check found, by name). A game with no utterance still
  gets one row, its utterance columns empty, so every game shows up.

Every record passed is written, running games included (their outcome is empty): the
caller picks which games to export.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TextIO, get_args

from crowd.exceptions import InvalidConfig
from tasks.taboo.analysis import turns
from tasks.taboo.engine import DEFAULT_MAX_TURNS, EndReason

ExportFormat = Literal["jsonl", "csv"]
FORMATS: tuple[str, ...] = get_args(ExportFormat)
JUDGE_CHECKS: tuple[str, ...] = ("fluency", "relevance")
JUDGE_FIELDS: tuple[str, ...] = ("score", "threshold", "model", "passed")
PLAYER_FIELDS: tuple[str, ...] = ("kind", "id", "name")
GAME_COLUMNS: tuple[str, ...] = (
    "game_id", "study_id", "word", "concreteness", "pairing",
    *(f"{role}_{field}" for role in ("attacker", "defender") for field in PLAYER_FIELDS),
    "excluded", "phase", "outcome", "end_reason", "ended_by", "turns", "max_turns", "guess",
    "guess_turn", "guess_correct", "created_at", "ended_at",
)  # fmt: skip
UTTERANCE_COLUMNS: tuple[str, ...] = (
    "index", "role", "text", "turn", "valid", "reasons", "at",
)  # fmt: skip


class UnknownExportFormat(InvalidConfig, ValueError):
    """An export format this type does not write (a ValueError, and a 422 on the web)."""


def _player(player: Mapping[str, Any] | None) -> dict[str, Any]:
    player = player or {}
    return {field: player.get(field) for field in PLAYER_FIELDS}


def _guess_correct(state: Mapping[str, Any]) -> bool | None:
    # A right guess always ends the game as "defender_guessed"; any other guess was wrong.
    if state.get("guess") is None:
        return None
    return state.get("end_reason") == EndReason.GUESSED


def _utterance(index: int, raw: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "index": index,
        "role": raw.get("role"),
        "text": raw.get("text"),
        "turn": raw.get("turn"),
        "valid": raw.get("valid"),
        "reasons": list(raw.get("reasons") or ()),
        "judge": {check: dict(v) for check, v in (raw.get("judge") or {}).items()},
        "at": raw.get("at"),
    }


def transcript(game: Mapping[str, Any]) -> dict[str, Any]:
    """One game as a plain, JSON-ready transcript."""
    state: Mapping[str, Any] = game["state"]
    rules = dict(state.get("rules") or {})
    return {
        "game_id": game.get("game_id"),
        "study_id": game.get("study_id"),
        "word": game.get("word") or state.get("target"),
        "variants": list(state.get("variants") or ()),
        "concreteness": game.get("concreteness"),
        "pairing": game.get("pairing"),
        "attacker": _player(game.get("attacker")),
        "defender": _player(game.get("defender")),
        "excluded": bool(game.get("excluded")),
        "rules": rules,
        "phase": state.get("phase"),
        "outcome": state.get("outcome"),
        "end_reason": state.get("end_reason"),
        "ended_by": state.get("ended_by"),
        "turns": turns(game),
        "max_turns": rules.get("max_turns", DEFAULT_MAX_TURNS),
        "guess": state.get("guess"),
        "guess_turn": state.get("guess_turn"),
        "guess_correct": _guess_correct(state),
        "created_at": game.get("created_at"),
        "ended_at": game.get("ended_at"),
        "utterances": [
            _utterance(index, raw) for index, raw in enumerate(state.get("utterances") or ())
        ],
    }


def judge_checks(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """fluency and relevance, then any other check the transcripts carry, by name."""
    found = {
        check
        for record in records
        for utterance in record["utterances"]
        for check in utterance["judge"]
    }
    return [*JUDGE_CHECKS, *sorted(found - set(JUDGE_CHECKS))]


def csv_rows(record: Mapping[str, Any], checks: Sequence[str]) -> list[dict[str, Any]]:
    """The CSV rows of one transcript: one per utterance (one empty one if none)."""
    game = {key: record.get(key) for key in GAME_COLUMNS if key in record}
    for role in ("attacker", "defender"):
        game.update({f"{role}_{field}": value for field, value in record[role].items()})
    rows = []
    for utterance in record["utterances"] or [None]:
        row = dict(game)
        if utterance is not None:
            row.update({key: utterance[key] for key in UTTERANCE_COLUMNS})
            row["reasons"] = "; ".join(utterance["reasons"])
            for check in checks:
                verdict = utterance["judge"].get(check) or {}
                row.update({f"{check}_{field}": verdict.get(field) for field in JUDGE_FIELDS})
        rows.append(row)
    return rows


def _write_csv(records: Sequence[Mapping[str, Any]], handle: TextIO) -> int:
    checks = judge_checks(records)
    judge_columns = [f"{check}_{field}" for check in checks for field in JUDGE_FIELDS]
    columns = [*GAME_COLUMNS, *UTTERANCE_COLUMNS, *judge_columns]
    writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    written = 0
    for record in records:
        for row in csv_rows(record, checks):
            writer.writerow(row)
            written += 1
    return written


def write(games: Sequence[Mapping[str, Any]], fmt: str, handle: TextIO) -> int:
    """Write game records in `fmt`; returns the lines (jsonl) or rows (csv) written."""
    if fmt not in FORMATS:
        raise UnknownExportFormat(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
    records = [transcript(game) for game in games]
    if fmt == "csv":
        return _write_csv(records, handle)
    for record in records:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
    return len(records)
