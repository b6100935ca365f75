"""Signs of careless work in a worker's responses: too fast, pasted, constant, repeated.

Each signal keeps its evidence (the response, the item and the numbers) so a reviewer can
see why a worker was flagged: the latest MAX_EXAMPLES entries, while the metrics count every
one. The thresholds come from `AnomalyThresholds`; rules in `qc.rules` decide what the
resulting metrics mean for the worker.

Rows are "QC rows" (one dict per response, in time order); see `qc.evidence`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from qc.config import AnomalyThresholds

Row = Mapping[str, Any]
Metric = float | int | str | None

KINDS = ("real", "gold", "attention", "training")
# Answers on these kinds are the worker's own choice; an attention item dictates its answer,
# so a worker passing them all would look "constant" for doing the right thing.
_CHOSEN = ("real", "gold")
SIGNALS = ("too_fast", "pasted", "typed_too_fast", "identical_run", "repeated_explanation")
_MIN_TYPED = 20  # shorter typed text gives too few keystrokes to judge speed by
# Evidence entries kept per signal (and responses per reused explanation): the latest. A
# worker answering at machine speed sets off "too fast" on every answer; their evidence,
# stored and serialised on every refresh, stays this size, and the metrics stay exact.
MAX_EXAMPLES = 20

_PUNCTUATION = re.compile(r"[^\w\s]")
_SPACE = re.compile(r"\s+")


def normalize_explanation(text: str) -> str:
    """Lowercase, punctuation stripped, whitespace collapsed: how repeats are compared.

    >>> normalize_explanation("  It's   FLUENT, and clear! ")
    'its fluent and clear'
    """
    return _SPACE.sub(" ", _PUNCTUATION.sub("", text.lower())).strip()


def response_signals(row: Row, thresholds: AnomalyThresholds) -> dict[str, dict[str, Any]]:
    """The signals one response sets off, each with its evidence; {} when none fired.

    too_fast: answered before the text shown could be read at `reading_chars_per_second`
    (or under `min_seconds`); pasted: at least `paste_share` of the explanation came from
    pasting; typed_too_fast: more than 20 typed characters that either came faster than
    `typing_chars_per_second` or with fewer keys pressed than half the characters.

    >>> row = {"seconds": 2.0, "chars_shown": 400, "explanation": None, "typing": None}
    >>> response_signals(row, AnomalyThresholds())
    {'too_fast': {'seconds': 2.0, 'chars_shown': 400, 'min_seconds_for_text': 10.0}}
    """
    out: dict[str, dict[str, Any]] = {}
    seconds = row.get("seconds")
    chars_shown = row.get("chars_shown") or 0
    if seconds is not None:
        needed = max(thresholds.min_seconds, chars_shown / thresholds.reading_chars_per_second)
        if seconds < needed:
            out["too_fast"] = {
                "seconds": seconds,
                "chars_shown": chars_shown,
                "min_seconds_for_text": needed,
            }

    typing = row.get("typing")
    if typing is None:
        return out
    explanation_chars = len(row.get("explanation") or "")
    pastes = int(typing.get("pastes") or 0)
    pasted_chars = int(typing.get("pasted_chars") or 0)
    # With nothing left in the field, a paste (since deleted) left no pasted text in the data.
    if (
        pastes > 0
        and explanation_chars > 0
        and pasted_chars >= thresholds.paste_share * explanation_chars
    ):
        out["pasted"] = {
            "pastes": pastes,
            "pasted_chars": pasted_chars,
            "explanation_chars": explanation_chars,
        }

    typed = max(explanation_chars - pasted_chars, 0)
    keys = int(typing.get("keys") or 0)
    typing_ms = int(typing.get("typing_ms") or 0)
    if typed > _MIN_TYPED:
        # No typing time at all for this much text is infinitely fast.
        speed = typed / (typing_ms / 1000) if typing_ms > 0 else None
        too_quick = speed is None or speed > thresholds.typing_chars_per_second
        if too_quick or keys < typed / 2:
            out["typed_too_fast"] = {
                "typed_chars": typed,
                "typing_ms": typing_ms,
                "chars_per_second": speed,
                "keys": keys,
            }
    return out


def _check_row(index: int, row: Row) -> None:
    if not isinstance(row, Mapping) or "worker" not in row:
        raise ValueError(f"QC row {index} has no 'worker'; give one dict per response")
    if row.get("kind") not in KINDS:
        raise ValueError(
            f"QC row {index} has kind {row.get('kind')!r}; kind must be one of {', '.join(KINDS)}"
        )


@dataclass
class WorkerSignals:
    """Per-worker anomaly metrics and the evidence behind them.

    Training rows are ignored; attention rows count for speed and typing but not for
    constant answers or runs (their answer is dictated). Fitted: `signals_` (worker ->
    signal -> the latest MAX_EXAMPLES evidence entries, each with response_id and item;
    every name in `SIGNALS` is present), `counts_` (worker -> signal -> the entries found,
    kept or not) and `metrics_` (worker -> responses, too_fast_n,
    too_fast_share, constant_share, constant_value, longest_run, repeated_explanations,
    pasted_n, typed_too_fast_n), which count every response. Workers with only training
    rows appear with 0 responses.

    Example:
        >>> rows = [{"response_id": i, "worker": "w", "item": f"i{i}", "kind": "real",
        ...          "seconds": 9.0, "chars_shown": 100, "surface": "5"} for i in range(6)]
        >>> model = WorkerSignals().fit(rows)
        >>> model.metrics_["w"]["longest_run"], model.metrics_["w"]["constant_share"]
        (6, 1.0)
        >>> model.signals_["w"]["identical_run"][0]["length"]
        6
    """

    thresholds: AnomalyThresholds = field(default_factory=AnomalyThresholds)
    signals_: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict, init=False)
    metrics_: dict[str, dict[str, Metric]] = field(default_factory=dict, init=False)
    counts_: dict[str, dict[str, int]] = field(default_factory=dict, init=False)

    def fit(self, rows: Iterable[Row]) -> WorkerSignals:
        by_worker: dict[str, list[Row]] = {}
        for index, row in enumerate(rows):
            _check_row(index, row)
            rows_of = by_worker.setdefault(str(row["worker"]), [])
            if row["kind"] != "training":
                rows_of.append(row)
        self.signals_, self.metrics_, self.counts_ = {}, {}, {}
        for worker, worker_rows in by_worker.items():
            signals, metrics = self._worker(worker_rows)
            self.counts_[worker] = {name: len(entries) for name, entries in signals.items()}
            self.signals_[worker] = {name: e[-MAX_EXAMPLES:] for name, e in signals.items()}
            self.metrics_[worker] = metrics
        return self

    def fit_predict(self, rows: Iterable[Row]) -> dict[str, dict[str, Metric]]:
        return self.fit(rows).metrics_

    def _worker(self, rows: list[Row]) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Metric]]:
        signals: dict[str, list[dict[str, Any]]] = {name: [] for name in SIGNALS}
        for row in rows:
            for name, evidence in response_signals(row, self.thresholds).items():
                signals[name].append(
                    {"response_id": row.get("response_id"), "item": row.get("item"), **evidence}
                )

        chosen = [row for row in rows if row["kind"] in _CHOSEN]
        surfaces = [row.get("surface") for row in chosen if row.get("surface") is not None]
        constant_share: float | None = None
        constant_value: str | None = None
        if surfaces:
            constant_value, count = Counter(surfaces).most_common(1)[0]
            constant_share = count / len(surfaces)
        longest, runs = self._runs(chosen)
        signals["identical_run"] = runs
        repeated, groups = self._repeats(rows)
        signals["repeated_explanation"] = groups

        n = len(rows)
        too_fast = len(signals["too_fast"])
        metrics: dict[str, Metric] = {
            "responses": n,
            "too_fast_n": too_fast,
            "too_fast_share": too_fast / n if n else None,
            "constant_n": len(surfaces),
            "constant_share": constant_share,
            "constant_value": constant_value,
            "longest_run": longest,
            "repeated_explanations": repeated,
            "pasted_n": len(signals["pasted"]),
            "typed_too_fast_n": len(signals["typed_too_fast"]),
        }
        return signals, metrics

    def _runs(self, rows: list[Row]) -> tuple[int, list[dict[str, Any]]]:
        """The longest run of identical consecutive surfaces, and every run long enough."""
        longest = 0
        found: list[dict[str, Any]] = []
        run: list[Row] = []

        def close() -> None:
            if len(run) >= self.thresholds.run_length:
                found.append(
                    {
                        "response_id": run[0].get("response_id"),
                        "item": run[0].get("item"),
                        "value": run[0].get("surface"),
                        "length": len(run),
                        "first_response_id": run[0].get("response_id"),
                        "last_response_id": run[-1].get("response_id"),
                    }
                )

        for row in rows:
            surface = row.get("surface")
            # A response without a surface (nothing shown to compare) breaks the run.
            if surface is None or not run or run[-1].get("surface") != surface:
                close()
                run = [] if surface is None else [row]
            else:
                run.append(row)
            longest = max(longest, len(run))
        close()
        return longest, found

    def _repeats(self, rows: list[Row]) -> tuple[int, list[dict[str, Any]]]:
        """Responses whose explanation the worker also gave on another item."""
        groups: dict[str, list[Row]] = {}
        for row in rows:
            text = normalize_explanation(row.get("explanation") or "")
            if len(text) >= self.thresholds.min_explanation_chars:
                groups.setdefault(text, []).append(row)
        repeated = 0
        found: list[dict[str, Any]] = []
        for text, group in groups.items():
            items = {str(row.get("item")) for row in group}
            # The same text twice on one item is a resubmission, not a reused explanation.
            if len(items) < 2:
                continue
            repeated += len(group)
            latest = group[-MAX_EXAMPLES:]
            found.append(
                {
                    "response_id": group[0].get("response_id"),
                    "item": group[0].get("item"),
                    "text": text,
                    "items": sorted({str(row.get("item")) for row in latest}),
                    "responses": len(group),
                    "response_ids": [row.get("response_id") for row in latest],
                }
            )
        return repeated, found
