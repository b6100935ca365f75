"""How often the gold rule stops a careful best-of-4 reader when gold items differ in
difficulty, at each credibility: a Monte Carlo through the real `qc.gold.GoldConfidence`.

`benchmarks/qc_tradeoff.py` counts every gold answer in full, with one accuracy for every
item; the live rule weighs each answer by its item's difficulty as the study's readers show
it, and so should stop careful readers less often, yet the QC benchmark stopped careful
comparison workers by gold about once in 1,400 (4 of about 5,600 in its runs files). A
study's 40 gold items are drawn as the benchmark draws them (four candidates of utility
N(0, 1); a careful reader picks the best of the utilities plus N(0, 0.5) noise), so a few
are nearly coin flips between two candidates, and early in a study each item's difficulty
rests on the few readers who met it so far. Here 16 careful readers and 24 random ones
answer one unseen gold item of the study's each per round for 12 rounds; after every round
the gold model is fitted on every answer so far, weighed by difficulty as the live rule
weighs them (`fit_items`), and each worker's P(accuracy < 0.4375) is read. A careful
reader counts as stopped at a credibility if that probability ever reached it (after 3 gold
answers); a random one by the gold answers it took.

Run: `.venv/bin/python benchmarks/qc_gold_tail.py` (about two minutes for 2,500 studies);
it rewrites its block in benchmarks/RESULTS.md unless `--no-write`.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from qc_crowd import READERS
from results_md import write_block

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qc.gold import GoldConfidence, threshold_from_chance  # noqa: E402

START, END = "<!-- qc-gold-tail:start -->", "<!-- qc-gold-tail:end -->"
INTRO = "\n## The gold rule on gold of mixed difficulty (`benchmarks/qc_gold_tail.py`)\n\n"
CHANCE = 0.25
THRESHOLD = threshold_from_chance(CHANCE)
GOLD_ITEMS, CAREFUL, RANDOM, ROUNDS, MIN_GOLD = 40, 16, 24, 12, 3
CREDIBILITY = (0.95, 0.97, 0.98, 0.99)
READING_NOISE = READERS["careful"].utility_sd  # the QC benchmark's careful reader's


@dataclass(frozen=True)
class Row:
    credibility: float
    careful: int  # careful readers whose P(below) ever reached it
    random_stopped: int  # random ones stopped within ROUNDS gold answers
    random_within_6: int
    random_median: int | None


@dataclass(frozen=True)
class Found:
    careful_n: int
    random_n: int
    rows: list[Row]


def item_accuracies(rng: np.random.Generator, n: int, draws: int = 400) -> np.ndarray:
    """A careful reader's chance of picking the best of each of n best-of-4 items."""
    utility = rng.normal(size=(n, 4))
    noisy = utility[:, None, :] + rng.normal(scale=READING_NOISE, size=(n, draws, 4))
    return (noisy.argmax(axis=2) == utility.argmax(axis=1)[:, None]).mean(axis=1)


def study(seed: int) -> dict[str, list[float]]:
    """Each worker's P(accuracy < THRESHOLD) after each round (0 before MIN_GOLD answers)."""
    draw, pick = np.random.default_rng(seed), random.Random(seed)
    accuracy = item_accuracies(draw, GOLD_ITEMS)
    workers = [f"careful{i}" for i in range(CAREFUL)] + [f"random{i}" for i in range(RANDOM)]
    unseen = {w: list(range(GOLD_ITEMS)) for w in workers}
    answers: list[tuple[str, int, float]] = []
    trace: dict[str, list[float]] = {w: [] for w in workers}
    for done in range(1, ROUNDS + 1):
        for worker in workers:
            item = unseen[worker].pop(pick.randrange(len(unseen[worker])))
            right = accuracy[item] if worker.startswith("careful") else CHANCE
            answers.append((worker, item, float(pick.random() < right)))
        model = GoldConfidence(chance=CHANCE).fit_items(answers)
        for worker in workers:
            below = model.prob_below(worker, THRESHOLD) if done >= MIN_GOLD else 0.0
            trace[worker].append(below)
    return trace


def run(studies: int, seed: int) -> Found:
    careful: list[float] = []
    first: dict[float, list[int | None]] = {c: [] for c in CREDIBILITY}
    for n in range(studies):
        for worker, trace in study(seed + n).items():
            if worker.startswith("careful"):
                careful.append(max(trace))
                continue
            for credibility in CREDIBILITY:
                hit = next((k + 1 for k, p in enumerate(trace) if p >= credibility), None)
                first[credibility].append(hit)
    peaks = np.array(careful)
    rows = []
    for credibility in CREDIBILITY:
        got = sorted(k for k in first[credibility] if k is not None)
        rows.append(Row(credibility, int((peaks >= credibility).sum()), len(got),
                        sum(k <= 6 for k in got), got[len(got) // 2] if got else None))
    return Found(len(careful), len(first[CREDIBILITY[0]]), rows)


def block(found: Found, studies: int, seed: int) -> str:
    careful_n, random_n = found.careful_n, found.random_n
    lines = [
        START,
        f"Measured {datetime.now(UTC):%Y-%m-%d}: {studies} simulated comparison studies (seed "
        f"{seed}), {careful_n} careful readers and {random_n} random ones, 12 gold answers "
        f"each, judged after every round on the study's gold weighed by difficulty "
        f"(threshold {THRESHOLD}).",
        "",
        "| credibility | careful readers ever at it | random stopped within 12 gold | "
        "within 6 | median gold answers to the stop |",
        "|---|---|---|---|---|",
    ]
    for row in found.rows:
        rate = f" (1 in {careful_n // row.careful:,})" if row.careful else ""
        lines.append(
            f"| {row.credibility} | {row.careful}{rate} | {row.random_stopped}/{random_n} | "
            f"{row.random_within_6} | {row.random_median} |"
        )
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=2500)
    parser.add_argument("--seed", type=int, default=5000)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    args = parser.parse_args()
    text = block(run(args.studies, args.seed), args.studies, args.seed)
    print(text)
    if not args.no_write:
        write_block(START, END, text, INTRO)


if __name__ == "__main__":
    main()
