"""The comparison HIT's exports (jsonl, csv, pairwise, k-way) and its simulated workers."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter
from typing import Any

import pytest

from crowd.exceptions import InvalidConfig
from tasks.comparison.hit import draw_order
from tasks.comparison.simulate import ComparisonSimulator, item_key
from tests.tasks.comparison_helpers import HIT, item

# -- exports ----------------------------------------------------------------------------------


def platform_row(record: dict[str, Any], worker: str, best: int, shown: int | None) -> dict:
    spec = HIT.validate_item(record)
    return {
        "response_id": hash((worker, spec.external_id)) % 10_000,
        "worker": worker,
        "worker_status": "active",
        "item": spec.external_id,
        "kind": spec.kind,
        "category": spec.category,
        "meta": spec.meta,
        "content": spec.content,
        "expected": spec.expected,
        "answer": {"best": best, "shown": shown, "order": None if shown is None else [0, 1]},
        "score": HIT.score(spec.expected, {"best": best}),
        "explanation": None,
        "reasons": [],
        "qc_flags": {},
        "events": [],
        "position": 0,
        "created_at": "2024-05-01T00:00:00+00:00",
        "source": "live" if shown is not None else "imported",
        "rater_group": "crowd" if shown is not None else "expert",
    }


def export_rows() -> list[dict[str, Any]]:
    rows = [
        platform_row(item("four", k=4), "w1", 3, 0),
        platform_row(item("two", k=2), "w2", 0, 1),
        platform_row(item("four", k=4), "e1", 1, None),
        platform_row(item("att", k=2, kind="attention", best=1), "w1", 1, 0),
    ]
    return [HIT.analysis_row(row) for row in rows]


def export(fmt: str) -> tuple[int, str]:
    handle = io.StringIO()
    written = HIT.export(export_rows(), fmt, handle)
    return written, handle.getvalue()


def test_jsonl_export_uses_the_query_sample_best_layout() -> None:
    written, text = export("jsonl")
    records = [json.loads(line) for line in text.splitlines()]
    assert written == len(records) == 4
    first = records[0]
    assert first["query"] == "Query of four:"
    assert [first[f"sample{i}"] for i in range(4)] == [f"four-cand{i} text" for i in range(4)]
    assert first["best"] == 3 and first["worker"] == "w1" and first["rater_group"] == "crowd"
    assert first["policies"] == ["policyA", "policyA", "policyB", "policyB"]
    assert records[1]["k"] == 2 and "sample2" not in records[1]
    assert records[2]["source"] == "imported" and records[2]["rater_group"] == "expert"


def test_csv_export_is_flat_with_padded_samples() -> None:
    written, text = export("csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert written == len(rows) == 4
    assert rows[0]["sample3"] == "four-cand3 text" and rows[0]["best"] == "3"
    assert rows[1]["sample2"] == "" and rows[1]["best"] == "0"
    assert rows[0]["policies"] == "policyA;policyA;policyB;policyB"


def test_pairwise_export_gives_k_minus_one_pairs_per_label() -> None:
    written, text = export("pairwise")
    pairs = [json.loads(line) for line in text.splitlines()]
    # 3 (K=4) + 1 (K=2) + 3 (the expert's K=4); the attention label is left out.
    assert written == len(pairs) == 7
    w1 = [p for p in pairs if p["worker"] == "w1"]
    assert {p["chosen"] for p in w1} == {"four-cand3 text"}
    assert sorted(p["rejected"] for p in w1) == [f"four-cand{i} text" for i in range(3)]
    assert all(p["prompt"] == "Query of four:" for p in w1)
    w2 = [p for p in pairs if p["worker"] == "w2"]
    assert [(p["chosen"], p["rejected"]) for p in w2] == [("two-cand0 text", "two-cand1 text")]
    assert not any(p["kind"] == "attention" for p in pairs)


def test_kway_export_keeps_canonical_order_and_label() -> None:
    written, text = export("kway")
    records = [json.loads(line) for line in text.splitlines()]
    assert written == len(records) == 3
    assert records[0]["completions"] == [f"four-cand{i} text" for i in range(4)]
    assert records[0]["label"] == 3 and records[0]["prompt"] == "Query of four:"
    assert records[0]["policies"] == ["policyA", "policyA", "policyB", "policyB"]
    assert records[2]["label"] == 1
    with pytest.raises(InvalidConfig, match="pairwise"):
        HIT.export(export_rows(), "xml", io.StringIO())


# -- simulator --------------------------------------------------------------------------------


def _sim_setup(
    kind: str = "real", best: int | None = None
) -> tuple[ComparisonSimulator, Any, dict[str, Any]]:
    record = item("sim", kind=kind, best=best, meta={"utility": [0.0, 2.0, -1.0, 0.5]})
    sim = ComparisonSimulator()
    truths = sim.truths([record])
    return sim, truths, record


def _match_rate(kind: str, item_kind: str = "real", best: int | None = None) -> float:
    sim, truths, record = _sim_setup(item_kind, best)
    texts = [c["text"] for c in record["candidates"]]
    target = best if best is not None else 1
    rng = random.Random(5)
    hits = 0
    for _ in range(2000):
        order = draw_order(4, rng)
        task = {"step": 0, "query": record["query"], "candidates": [texts[i] for i in order]}
        choice = sim.act(kind, rng, task, truths[sim.key(task)])["choice"]
        hits += order[choice] == target
    return hits / 2000


def test_simulated_kinds_behave_as_named() -> None:
    skilled, noisy, spammer = (_match_rate(k) for k in ("skilled", "noisy", "spammer"))
    assert skilled > 0.9
    assert 0.35 < noisy < 0.75
    assert 0.2 < spammer < 0.3
    # Readers follow a labelled item's best (here the worst by utility); spammers do not.
    assert _match_rate("skilled", "attention", best=2) > 0.9
    assert _match_rate("noisy", "training", best=2) > 0.5
    assert _match_rate("spammer", "attention", best=2) < 0.3


def test_position_biased_workers_mostly_pick_the_first_shown() -> None:
    sim, truths, record = _sim_setup()
    texts = [c["text"] for c in record["candidates"]]
    rng = random.Random(3)
    task = {"query": record["query"], "candidates": texts}
    truth = truths[sim.key(task)]
    picks = Counter(sim.act("position_biased", rng, task, truth)["choice"] for _ in range(2000))
    assert picks[0] / 2000 > 0.8
    # Deterministic given the rng.
    first = [sim.act("noisy", random.Random(9), task, truth) for _ in range(3)]
    assert first[0] == first[1] == first[2]


def test_simulator_finds_items_by_what_the_page_shows() -> None:
    records = [item("a"), {"id": "b", "query": "q", "candidates": ["x", "y"]}]
    sim = ComparisonSimulator()
    truths = sim.truths(records)
    shuffled = {"query": "Query of a:", "candidates": [f"a-cand{i} text" for i in (2, 0, 3, 1)]}
    assert sim.key(shuffled) == item_key("Query of a:", [f"a-cand{i} text" for i in range(4)])
    assert sim.key(shuffled) in truths
    # Without meta.utility a fixed pseudo-utility stands in, so skilled workers agree.
    truth = truths[sim.key({"query": "q", "candidates": ["y", "x"]})]
    assert set(truth.utility) == {"x", "y"} and truth.utility["x"] != truth.utility["y"]
    assert set(ComparisonSimulator.kinds) == {"skilled", "noisy", "spammer", "position_biased"}
