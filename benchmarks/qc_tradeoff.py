"""What a gold rule's credibility costs: careful workers wrongly stopped against the gold
answers a bad worker gives before the stop, computed exactly.

A rule that re-tests after every gold answer (P(accuracy < threshold) >= credibility under
the Beta(1, 1) posterior, after at least 3 gold answers) is a sequential test. For a worker
of true accuracy p this walks every path of right and wrong answers (a dynamic programme
over the count right, paths that stop removed), so its numbers have no sampling noise:
the chance a careful worker is ever stopped within N gold answers, and for a bad worker the
chance of a stop within N and the median answer it comes at. The accuracies are those the
QC benchmark's crowd shows on gold (`benchmarks/qc_bench.py --dump`): on boundary gold
(within one sentence) careful readers score 0.775 and bad kinds about 0.33; on best-of-4
comparison gold 0.757 and 0.30 (one accuracy stands for all the bad kinds, so their rows
are a guide, not a forecast of the QC table).

Beside it, a floor for any rule: the likelihood-ratio test of "bad" against "careful" at
those two accuracies (Wald's sequential test; at each number of answers the likelihood ratio
is the most powerful test there is, Neyman-Pearson, and Wald's needs the fewest answers on
average for given chances of error), its bar set so that careful workers are stopped at a
given rate, with every item a gold item. A bad worker who passes the attention checks and
copies nobody the crowd can see (a colluder whose ring shares few items, a paster alone)
shows only by being wrong: a rule that stops them much sooner than this stops careful
workers more often.

Run: `.venv/bin/python benchmarks/qc_tradeoff.py` (under a second); it rewrites its block
in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

import numpy as np
from results_md import write_block
from scipy import stats

START, END = "<!-- qc-tradeoff:start -->", "<!-- qc-tradeoff:end -->"
INTRO = "\n## What a gold rule's credibility costs (`benchmarks/qc_tradeoff.py`)\n\n"
# HIT type: (gold threshold, careful accuracy, bad accuracy), as measured in the QC benchmark.
TYPES: dict[str, tuple[float, float, float]] = {
    "boundary": (0.46, 0.775, 0.33),
    "comparison": (0.4375, 0.757, 0.30),
}
CREDIBILITY = (0.95, 0.975, 0.99, 0.999)
MIN_GOLD = 3
# Careful workers' wrong stops the floor is computed at: one in each table's careful
# worker-runs of a type (240), and rarer.
CAREFUL_RATES = (1 / 240, 1 / 1000, 1 / 7000)


def stops(p: float, threshold: float, credibility: float, n_max: int) -> np.ndarray:
    """P(the rule first stops a worker of accuracy p at gold answer n), n = 1..n_max."""
    alive = np.array([1.0])  # alive[s]: P(s right so far and not stopped)
    first = np.zeros(n_max)
    for n in range(1, n_max + 1):
        nxt = np.zeros(n + 1)
        nxt[:-1] += alive * (1 - p)
        nxt[1:] += alive * p
        if n >= MIN_GOLD:
            right = np.arange(n + 1)
            fires = stats.beta.cdf(threshold, 1 + right, 1 + n - right) >= credibility
            first[n - 1] = nxt[fires].sum()
            nxt[fires] = 0.0
        alive = nxt
    return first


def ratio_stops(p: float, careful: float, bad: float, bar: float, n_max: int) -> np.ndarray:
    """`stops` for the likelihood-ratio test: stop once log P(answers | bad) - log P(answers |
    careful) >= bar, for a worker of accuracy p."""
    right_step, wrong_step = np.log(bad / careful), np.log((1 - bad) / (1 - careful))
    alive = np.array([1.0])
    first = np.zeros(n_max)
    for n in range(1, n_max + 1):
        nxt = np.zeros(n + 1)
        nxt[:-1] += alive * (1 - p)
        nxt[1:] += alive * p
        right = np.arange(n + 1)
        fires = right * right_step + (n - right) * wrong_step >= bar - 1e-9
        first[n - 1] = nxt[fires].sum()
        nxt[fires] = 0.0
        alive = nxt
    return first


def floor_bar(careful: float, bad: float, rate: float, n_max: int) -> float:
    """The lowest bar (nats) at which careful workers are stopped at most at `rate`: the
    test's wrong stops fall in steps as the bar rises, so the bars worth trying are the
    values the log ratio takes."""
    right_step, wrong_step = np.log(bad / careful), np.log((1 - bad) / (1 - careful))
    values = sorted({k * right_step + (n - k) * wrong_step
                     for n in range(1, n_max + 1) for k in range(n + 1)} - {0.0})  # fmt: skip
    for bar in (v for v in values if v > 0):
        if ratio_stops(careful, careful, bad, bar, n_max).sum() <= rate:
            return bar
    return float("inf")


def median_stop(first: np.ndarray) -> float | None:
    """The median gold answer of a stop, among the workers stopped."""
    total = first.sum()
    if total <= 0:
        return None
    return float(np.searchsorted(np.cumsum(first) / total, 0.5) + 1)


def evidence(careful: float, bad: float) -> float:
    """The expected log likelihood ratio of one gold answer of a bad worker (the KL
    divergence of Bernoulli(bad) from Bernoulli(careful)), in nats."""
    return float(bad * np.log(bad / careful) + (1 - bad) * np.log((1 - bad) / (1 - careful)))


def block(n_max: int) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join([".venv/bin/python", "benchmarks/qc_tradeoff.py", *sys.argv[1:]])
    lines = [
        START,
        f"Computed {now} with `{command}` (exact, no sampling). Within {n_max} gold "
        f"answers, a rule stopping at P(gold accuracy < threshold) >= credibility (Beta(1, 1) "
        f"prior, at least {MIN_GOLD} gold answers, re-tested after each):",
        "",
        "| HIT type | credibility | careful workers stopped | bad workers stopped | "
        "median gold answers to the stop |",
        "|---|---|---|---|---|",
    ]
    for name, (threshold, careful, bad) in TYPES.items():
        for credibility in CREDIBILITY:
            wrong = stops(careful, threshold, credibility, n_max).sum()
            caught = stops(bad, threshold, credibility, n_max)
            median = median_stop(caught)
            lines.append(
                f"| {name} | {credibility} | {wrong:.2e} (1 in {1 / wrong:,.0f}) | "
                f"{caught.sum():.2f} | {'n/a' if median is None else f'{median:g}'} |"
                if wrong > 0
                else f"| {name} | {credibility} | 0 | {caught.sum():.2f} | "
                f"{'n/a' if median is None else f'{median:g}'} |"
            )
    lines += [
        "",
        f"The floor under any rule: the likelihood-ratio test with every item gold, its bar "
        f"set for a rate of careful workers' wrong stops (within {n_max} answers):",
        "",
        "| HIT type | careful workers stopped at most | bar (nats) | careful stopped | bad "
        "workers stopped | median answers to the stop |",
        "|---|---|---|---|---|---|",
    ]
    floor: dict[tuple[str, float], float | None] = {}
    for name, (_, careful, bad) in TYPES.items():
        for rate in CAREFUL_RATES:
            bar = floor_bar(careful, bad, rate, n_max)
            wrong = ratio_stops(careful, careful, bad, bar, n_max).sum()
            caught = ratio_stops(bad, careful, bad, bar, n_max)
            median = floor[name, rate] = median_stop(caught)
            lines.append(
                f"| {name} | 1 in {1 / rate:,.0f} | {bar:.2f} | 1 in {1 / wrong:,.0f} | "
                f"{caught.sum():.2f} | {'n/a' if median is None else f'{median:g}'} |"
            )
    nats = ", ".join(f"{name} {evidence(careful, bad):.2f}"
                     for name, (_, careful, bad) in TYPES.items())  # fmt: skip
    lines += [
        "",
        f"A bad worker's gold answer carries on average this many nats of evidence against "
        f"them: {nats}. A stop at credibility c needs about ln(c / (1 - c)) nats (2.9 at "
        "0.95, 4.6 at 0.99, 6.9 at 0.999), and the rarer a careful worker's wrong stop, the "
        "more answers a bad worker gives first. With 960 careful worker-runs in the QC "
        'table (240 a type), "no careful worker excluded in any run" asks for about 1 in '
        "1,400 per worker and per rule (even odds of a clean table), and 1 in 9,000 for "
        "nine tables in ten. The floor says what that costs at best: a bad worker who shows "
        "only by being wrong gives a median of "
        + ", ".join(f"{floor[name, 1 / 1000]:g} ({name})" for name in TYPES)
        + " answers before any test that stops 1 careful worker in 1,000 can stop them, and "
        + ", ".join(f"{floor[name, 1 / 240]:g} ({name})" for name in TYPES)
        + " at 1 in 240. Gold here counts in full, each answer drawn at one accuracy per "
        "type; the live rule weighs gold items by difficulty, which early in a study rests on "
        "few readers: `benchmarks/qc_gold_tail.py` (its block below) plays that rule on gold "
        "of mixed difficulty, and is the closer model of it.",
        END,
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gold", type=int, default=30, help="gold answers a worker gives")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    args = parser.parse_args()
    text = block(args.gold)
    print(text)
    if not args.no_write:
        write_block(START, END, text, INTRO)


if __name__ == "__main__":
    main()
