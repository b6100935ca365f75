"""The QC benchmark's simulated crowd (benchmarks/qc_crowd.py) draws what a worker does on an
item from the worker and the item alone, so a QC study and its control are paired."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
qc_crowd = importlib.import_module("qc_crowd")

ITEMS = 8
RECORDS = [
    {"query": f"question {i}", "candidates": [f"answer {i}.{j}" for j in range(4)],
     "meta": {"utility": [0.0, 0.6, 0.8, 0.2]}}
    for i in range(ITEMS)
]  # fmt: skip
MIX = {"careful": 2, "noisy": 1, "slow_random": 2, "colluder": 2, "paster": 1}


def crowd(seed: int) -> Any:
    return qc_crowd.BenchCrowd("http://127.0.0.1:9", "key", 1, "comparison", RECORDS, MIX, seed)


def picks(bench: Any, items: list[int], order: list[int]) -> dict[tuple[str, int], str]:
    """Each worker's chosen text per item, the items played in `items`' order on pages that
    show the candidates in `order`."""
    out = {}
    for i in items:
        for worker in bench.workers:
            task = {"query": f"question {i}", "candidates": [f"answer {i}.{j}" for j in order]}
            key = qc_crowd.page_key("comparison", task)
            play = bench.play(worker, key, bench.truths[key])
            choice = bench.plan(play)(task)["choice"]
            out[(worker.external_id, i)] = task["candidates"][choice]
            worker.items += 1
    return out


def test_a_worker_picks_the_same_text_whatever_came_before_and_however_the_page_is_shuffled() -> (
    None
):
    qc_arm = picks(crowd(5), list(range(ITEMS)), [0, 1, 2, 3])
    control = crowd(5)
    control.workers.reverse()  # the ring's other member reaches each item first
    assert picks(control, list(reversed(range(ITEMS))), [2, 0, 3, 1]) == qc_arm
    # The ring shares one pick per item; readers mostly pick the best candidate.
    assert all(
        qc_arm[("bench-colluder-00", i)] == qc_arm[("bench-colluder-01", i)] for i in range(ITEMS)
    )
    careful = [qc_arm[(f"bench-careful-0{n}", i)] for n in range(2) for i in range(ITEMS)]
    assert sum(text.endswith(".2") for text in careful) > len(careful) / 2


def test_another_seed_is_another_crowd() -> None:
    one = picks(crowd(5), list(range(ITEMS)), [0, 1, 2, 3])
    other = picks(crowd(6), list(range(ITEMS)), [0, 1, 2, 3])
    random_kinds = [key for key in one if "slow_random" in key[0] or "colluder" in key[0]]
    assert sum(one[key] != other[key] for key in random_kinds) >= len(random_kinds) / 2
