"""Anomaly signals fire just past their thresholds and not at them, with their evidence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from qc.anomalies import (
    MAX_EXAMPLES,
    SIGNALS,
    WorkerSignals,
    normalize_explanation,
    response_signals,
)
from qc.config import AnomalyThresholds, parse_qc_config
from qc.evidence import worker_evidence
from qc.rules import evaluate

T = AnomalyThresholds()  # 40 chars/s reading, 1 s minimum, runs of 5, 15 chars/s typing


def row(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "response_id": 1,
        "worker": "w",
        "item": "i",
        "kind": "real",
        "seconds": 60.0,
        "chars_shown": 400,
        "surface": None,
        "attention_passed": None,
        "gold_accuracy": None,
        "explanation": None,
        "typing": None,
    }
    return base | fields


def typing(keys: int, pastes: int = 0, pasted_chars: int = 0, typing_ms: int = 0) -> dict[str, int]:
    return {"keys": keys, "pastes": pastes, "pasted_chars": pasted_chars, "typing_ms": typing_ms}


def test_too_fast_is_measured_against_the_text_length() -> None:
    # 400 characters need 10 s at 40 chars/s.
    assert "too_fast" not in response_signals(row(seconds=10.0), T)
    fired = response_signals(row(seconds=9.99), T)["too_fast"]
    assert fired == {"seconds": 9.99, "chars_shown": 400, "min_seconds_for_text": 10.0}


def test_too_fast_uses_min_seconds_for_short_texts() -> None:
    # 20 characters would take 0.5 s; the 1 s floor applies.
    assert response_signals(row(seconds=0.99, chars_shown=20), T)["too_fast"][
        "min_seconds_for_text"
    ] == pytest.approx(1.0)
    assert response_signals(row(seconds=1.0, chars_shown=20), T) == {}
    assert response_signals(row(seconds=None, chars_shown=20), T) == {}


def test_pasted_needs_a_paste_covering_the_share() -> None:
    text = "x" * 40
    at_share = response_signals(row(explanation=text, typing=typing(40, 1, 20, 9000)), T)
    assert at_share["pasted"] == {"pastes": 1, "pasted_chars": 20, "explanation_chars": 40}
    below = response_signals(row(explanation=text, typing=typing(40, 1, 19, 9000)), T)
    assert "pasted" not in below
    no_paste = response_signals(row(explanation=text, typing=typing(40, 0, 40, 9000)), T)
    assert "pasted" not in no_paste


def test_typed_too_fast_on_speed() -> None:
    text = "y" * 30  # 30 typed characters at 15 chars/s take 2 s
    ok = response_signals(row(explanation=text, typing=typing(30, typing_ms=2000)), T)
    assert "typed_too_fast" not in ok
    fast = response_signals(row(explanation=text, typing=typing(30, typing_ms=1900)), T)
    evidence = fast["typed_too_fast"]
    assert evidence["typed_chars"] == 30 and evidence["typing_ms"] == 1900
    assert evidence["chars_per_second"] == pytest.approx(30 / 1.9)


def test_typed_too_fast_on_missing_keystrokes() -> None:
    text = "z" * 30  # slow enough, but needs at least 15 keys
    assert "typed_too_fast" not in response_signals(
        row(explanation=text, typing=typing(15, typing_ms=60000)), T
    )
    assert "typed_too_fast" in response_signals(
        row(explanation=text, typing=typing(14, typing_ms=60000)), T
    )


def test_typed_too_fast_ignores_short_or_pasted_text() -> None:
    # Exactly 20 typed characters is too little to judge, however quick.
    assert "typed_too_fast" not in response_signals(
        row(explanation="a" * 20, typing=typing(0, typing_ms=1)), T
    )
    assert "typed_too_fast" in response_signals(
        row(explanation="a" * 21, typing=typing(0, typing_ms=1)), T
    )
    # 100 characters, 80 pasted: the typed part is 20 characters.
    pasted = response_signals(row(explanation="b" * 100, typing=typing(0, 1, 80, 1)), T)
    assert "typed_too_fast" not in pasted and "pasted" in pasted


def test_no_typing_report_means_no_typing_signals() -> None:
    assert response_signals(row(explanation="c" * 200, typing=None), T) == {}


def surfaces(
    values: Sequence[str | None], kind: str = "real", start: int = 0
) -> list[dict[str, Any]]:
    return [
        row(response_id=start + i, item=f"i{start + i}", kind=kind, surface=value)
        for i, value in enumerate(values)
    ]


def test_runs_of_four_do_not_count_and_five_do() -> None:
    four = WorkerSignals(T).fit(surfaces(["a"] * 4 + ["b"]))
    assert four.metrics_["w"]["longest_run"] == 4
    assert four.signals_["w"]["identical_run"] == []
    five = WorkerSignals(T).fit(surfaces(["b"] + ["a"] * 5 + ["b"]))
    assert five.metrics_["w"]["longest_run"] == 5
    assert five.signals_["w"]["identical_run"] == [
        {
            "response_id": 1,
            "item": "i1",
            "value": "a",
            "length": 5,
            "first_response_id": 1,
            "last_response_id": 5,
        }
    ]


def test_runs_skip_attention_and_training_but_break_on_missing_surface() -> None:
    rows = (
        surfaces(["a"] * 3)
        + surfaces(["human"], kind="attention", start=10)
        + surfaces(["x"], kind="training", start=20)
        + surfaces(["a"] * 2, start=3)
    )
    assert WorkerSignals(T).fit(rows).metrics_["w"]["longest_run"] == 5
    broken = surfaces(["a"] * 3 + [None] + ["a"] * 2)
    assert WorkerSignals(T).fit(broken).metrics_["w"]["longest_run"] == 3


def test_constant_share_over_real_and_gold_only() -> None:
    rows = (
        surfaces(["5,5,5"] * 6)
        + surfaces(["1,2,3"], kind="gold", start=6)
        + surfaces(["human"] * 5, kind="attention", start=10)
        + surfaces(["9"] * 9, kind="training", start=20)
        + surfaces([None], start=30)
    )
    metrics = WorkerSignals(T).fit(rows).metrics_["w"]
    assert metrics["constant_share"] == pytest.approx(6 / 7)
    assert metrics["constant_n"] == 7  # what the share is over: the worker's own choices
    assert metrics["constant_value"] == "5,5,5"
    assert metrics["responses"] == 6 + 1 + 5 + 1  # not the 9 training rows


def test_attention_rows_count_for_too_fast() -> None:
    rows = [
        row(response_id=1, item="a1", kind="attention", seconds=0.5),
        row(response_id=2, item="r1", kind="real", seconds=30.0),
        row(response_id=3, item="t1", kind="training", seconds=0.1),
    ]
    model = WorkerSignals(T).fit(rows)
    assert model.metrics_["w"]["too_fast_n"] == 1
    assert model.metrics_["w"]["too_fast_share"] == 0.5
    assert [e["item"] for e in model.signals_["w"]["too_fast"]] == ["a1"]


def test_repeated_explanations_are_normalised_and_span_items() -> None:
    rows = [
        row(response_id=1, item="i1", explanation="The 2nd sentence is odd."),
        row(response_id=2, item="i2", explanation="the 2nd   SENTENCE is odd"),
        row(response_id=3, item="i3", explanation="The 2nd sentence, is odd!"),
        row(response_id=4, item="i4", explanation="Too short"),  # 9 chars: ignored
        row(response_id=5, item="i5", explanation="Too short"),
        row(response_id=6, item="i6", explanation="Different reason entirely."),
        # Same text on one item (a resubmission) is not a reuse.
        row(response_id=7, item="i7", explanation="Resubmitted text here"),
        row(response_id=8, item="i7", explanation="Resubmitted text here"),
        row(response_id=9, item="t", kind="training", explanation="The 2nd sentence is odd."),
    ]
    model = WorkerSignals(T).fit(rows)
    assert model.metrics_["w"]["repeated_explanations"] == 3
    assert model.signals_["w"]["repeated_explanation"] == [
        {
            "response_id": 1,
            "item": "i1",
            "text": "the 2nd sentence is odd",
            "items": ["i1", "i2", "i3"],
            "responses": 3,
            "response_ids": [1, 2, 3],
        }
    ]
    assert normalize_explanation("Too short") == "too short"


def test_min_explanation_chars_edge() -> None:
    ten = [row(response_id=i, item=f"i{i}", explanation="abcde fghi") for i in range(2)]
    assert WorkerSignals(T).fit(ten).metrics_["w"]["repeated_explanations"] == 2
    nine = [row(response_id=i, item=f"i{i}", explanation="abcd fghi!") for i in range(2)]
    assert WorkerSignals(T).fit(nine).metrics_["w"]["repeated_explanations"] == 0


def test_paste_and_typing_counts_and_evidence_ids() -> None:
    rows = [
        row(response_id=7, item="p", explanation="q" * 30, typing=typing(5, 1, 30, 4000)),
        row(response_id=8, item="f", explanation="r" * 30, typing=typing(30, 0, 0, 500)),
        row(response_id=9, item="ok", explanation="s" * 30, typing=typing(30, 0, 0, 9000)),
    ]
    model = WorkerSignals(T).fit(rows)
    assert model.metrics_["w"]["pasted_n"] == 1
    assert model.metrics_["w"]["typed_too_fast_n"] == 1
    assert model.signals_["w"]["pasted"][0]["response_id"] == 7
    assert model.signals_["w"]["typed_too_fast"][0]["item"] == "f"
    assert set(model.signals_["w"]) == set(SIGNALS)


def test_training_only_worker_has_empty_metrics() -> None:
    model = WorkerSignals(T).fit([row(worker="t", kind="training", seconds=0.1, surface="a")])
    assert model.metrics_["t"] == {
        "responses": 0,
        "too_fast_n": 0,
        "too_fast_share": None,
        "constant_n": 0,
        "constant_share": None,
        "constant_value": None,
        "longest_run": 0,
        "repeated_explanations": 0,
        "pasted_n": 0,
        "typed_too_fast_n": 0,
    }


def test_bad_rows_are_refused() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        WorkerSignals(T).fit([row(kind="bogus")])
    with pytest.raises(ValueError, match="no 'worker'"):
        WorkerSignals(T).fit([{"kind": "real"}])


def test_evidence_keeps_the_latest_examples_and_the_metrics_count_them_all() -> None:
    """A worker at machine speed: every answer too fast, pasted, alike, the same words."""
    n = 1000
    rows = [
        row(response_id=i, item=f"i{i}", seconds=0.2, surface="a",
            explanation="the second sentence is odd",
            typing=typing(keys=0, pastes=1, pasted_chars=26))
        for i in range(n)
    ]  # fmt: skip
    model = WorkerSignals(T).fit(rows)
    metrics, signals = model.metrics_["w"], model.signals_["w"]
    assert (metrics["too_fast_n"], metrics["too_fast_share"]) == (n, 1.0)
    assert (metrics["pasted_n"], metrics["longest_run"], metrics["repeated_explanations"]) == (
        n, n, n
    )  # fmt: skip
    ids = list(range(n - MAX_EXAMPLES, n))
    assert [e["response_id"] for e in signals["too_fast"]] == ids
    assert [e["response_id"] for e in signals["pasted"]] == ids
    [reused] = signals["repeated_explanation"]
    assert (reused["responses"], reused["response_ids"]) == (n, ids)
    assert len(reused["items"]) == MAX_EXAMPLES
    assert all(len(entries) <= MAX_EXAMPLES for entries in signals.values())
    # How many each signal found, for the reviewer's "the latest 20 of 1,000".
    assert model.counts_["w"] == {
        "too_fast": n, "pasted": n, "typed_too_fast": 0, "identical_run": 1,
        "repeated_explanation": 1,
    }  # fmt: skip

    # The rules decide on the counts: the speed rule sees 1,000 of 1,000, not 20.
    config = parse_qc_config(None)
    evidence = worker_evidence(rows, config)
    decisions = {d.rule: d for d in evaluate(evidence, config.rules)}
    assert decisions["too_fast"].evidence["too_fast_n"] == n
    assert f"answered {n} of {n} items too fast" in decisions["too_fast"].reason
    assert evidence["w"]["evidence_counts"] == model.counts_["w"]
