"""The stopped-reading posterior: every answer and attention check of a worker at once, with one
possible switch from reading to not (qc.drift), on crowds drawn here."""

from __future__ import annotations

import random

import numpy as np
import pytest

from qc import drift
from qc.agreement import CrowdAgreement, _loglik
from qc.config import parse_qc_config
from qc.evidence import crowd_evidence

K = 4
GRID = (np.arange(400) + 0.5) / 400


def play(
    rng: random.Random, plans: dict[str, list[float]], tasks: int = 30
) -> list[tuple[str, str, int]]:
    """Every worker answers the tasks in order, right with the accuracy of their plan at that
    task (else another label), one task after another."""
    truth = [rng.randrange(K) for _ in range(tasks)]
    answers = []
    for t, z in enumerate(truth):
        for worker, plan in plans.items():
            label = z if rng.random() < plan[t] else (z + 1 + rng.randrange(K - 1)) % K
            answers.append((f"i{t}/best", worker, label))
    return answers


def careful(tasks: int = 30) -> list[float]:
    return [0.85] * tasks


def drifter(after: int, tasks: int = 30) -> list[float]:
    return [0.85] * after + [1 / K] * (tasks - after)


def test_a_reader_is_not_judged_a_guesser_a_guesser_is_and_a_drifter_is_found() -> None:
    plans = {f"c{n}": careful() for n in range(12)} | {"random": [1 / K] * 30}
    plans |= {"drifter": drifter(10)}
    model = CrowdAgreement().fit(play(random.Random(5), plans))
    for n in range(12):
        verdict = model.stopped_reading(f"c{n}")
        assert verdict.prob < 0.1 and verdict.since is None
    random_ = model.stopped_reading("random")
    assert random_.prob > 0.999 and random_.since == 0
    drifted = model.stopped_reading("drifter")
    assert drifted.prob > 0.99
    assert drifted.since is not None and 8 <= drifted.since <= 12
    assert drifted.events == 30


def test_the_switch_convicts_drifters_whose_whole_record_the_crowd_rule_cannot() -> None:
    """Careful for 14 of 30 answers, then at chance: pooled, the record is rarely credibly
    below the crowd; with the switch, most are credibly not reading by the end, and no
    careful worker is."""
    pooled = switched = 0
    for seed in range(20):
        plans = {f"c{n}": careful() for n in range(12)} | {"drifter": drifter(14)}
        model = CrowdAgreement().fit(play(random.Random(seed), plans))
        pooled += model.prob_below("drifter", model.threshold("drifter")) >= 0.95
        switched += model.stopped_reading("drifter").prob >= 0.99
        assert all(model.stopped_reading(f"c{n}").prob < 0.99 for n in range(12))
    assert pooled <= 2
    assert switched >= 10


def test_attention_checks_weigh_in_and_a_readers_slips_do_not_convict() -> None:
    plans = {f"c{n}": careful(12) for n in range(10)} | {"unsure": [0.45] * 12}
    model = CrowdAgreement().fit(play(random.Random(2), plans, tasks=12))
    alone = model.stopped_reading("unsure").prob
    failed = model.stopped_reading("unsure", [(2, False), (6, False), (9, False)]).prob
    passed = model.stopped_reading("unsure", [(2, True), (6, True), (9, True)]).prob
    assert passed < alone < failed
    # A careful reader who misses two checks in a row is still most probably reading.
    slips = model.stopped_reading("c0", [(0, False), (1, False)])
    assert slips.prob < 0.5 and slips.events == 14


def naive(
    loglik: np.ndarray,
    chance: np.ndarray,
    prior: np.ndarray,
    reading: np.ndarray,
    checks: list[tuple[int, bool]],
) -> float:
    """The posterior by enumerating the hypotheses one by one, as the docstring states them."""
    events = []  # (log-likelihood of p for a reader on the grid, log-likelihood for a guesser)
    for j in range(len(loglik) + 1):
        for at, passed in checks:
            if at == j:
                fail = (drift.READER_FAILS, drift.GUESSER_FAILS)
                events.append(tuple(np.log(1 - f if passed else f) for f in fail))
        if j < len(loglik):
            events.append((loglik[j], chance[j]))
    n = len(events)
    rho = prior[~reading].sum()
    weights = []
    for t in range(n + 1):
        read = np.where(reading, prior, 0) / (1 - rho)
        for reader, _ in events[:t]:
            read = read * np.exp(reader)
        like = read.sum() * np.exp(sum(guess for _, guess in events[t:]))
        if t == 0:
            p = rho * (1 - drift.SWITCH_PRIOR)
        elif t == n:
            p = (1 - rho) * (1 - drift.SWITCH_PRIOR)
        else:
            p = drift.SWITCH_PRIOR / (n - 1)
        weights.append(p * like)
    return float(sum(weights[:n]) / sum(weights))


def test_the_posterior_is_the_one_the_hypotheses_give_enumerated_one_by_one() -> None:
    plans = {f"c{n}": careful(12) for n in range(8)} | {"d": drifter(5, 12)}
    model = CrowdAgreement().fit(play(random.Random(4), plans, tasks=12))
    evidence = model._evidence["d"]
    loglik = _loglik(evidence[:, 0], evidence[:, 1])
    chance = np.log(evidence[:, 1])
    reading = model.threshold("d") <= GRID
    checks = [(0, True), (6, False), (6, True), (12, False)]
    got = drift.stopped_reading(loglik, chance, model.prior_, reading, checks)
    assert got.prob == pytest.approx(naive(loglik, chance, model.prior_, reading, checks))
    assert got.prob == pytest.approx(model.stopped_reading("d", [(0, True)] + [
        (model.positions_["d"][6], False), (model.positions_["d"][6], True), (10**6, False)
    ]).prob)  # fmt: skip


def test_checks_are_placed_among_the_answers_by_when_they_came() -> None:
    """The same two failed checks say more about "not reading now" after the answers than
    before them: a switch needs the bad events at the end."""
    plans = {f"c{n}": careful(10) for n in range(10)}
    answers = play(random.Random(6), plans, tasks=10)
    model = CrowdAgreement().fit(answers)
    last = len(answers)
    early = model.stopped_reading("c3", [(0, False), (0, False)])
    late = model.stopped_reading("c3", [(last, False), (last, False)])
    assert late.prob > early.prob
    assert late.since == 10 and early.since in (None, 0)


def test_crowd_evidence_reports_the_posterior_with_the_checks() -> None:
    plans = {f"c{n}": careful(16) for n in range(8)} | {"random": [1 / K] * 16}
    answers = play(random.Random(9), plans, tasks=16)
    checks = [(len(answers), "random", False), (len(answers), "only-checks", True)]
    out = crowd_evidence(answers, parse_qc_config(None), checks=checks)
    assert out["random"]["stopped_reading_prob"] > 0.99
    assert out["random"]["stopped_reading_n"] == 17
    assert out["random"]["stopped_reading_since"] == 0
    assert out["c0"]["stopped_reading_prob"] < 0.05
    # The doubted worker meets extra attention checks at doubt_checks x the posterior; a
    # reader at the study's rate alone, and the setting turns it off.
    assert out["random"]["check_rate"] == pytest.approx(
        0.8 * out["random"]["stopped_reading_prob"], abs=1e-4
    )
    assert out["c0"]["check_rate"] == 0.0
    quiet = crowd_evidence(
        answers, parse_qc_config({"crowd": {"doubt_checks": 0}}), checks=checks, focus=["random"]
    )
    assert quiet["random"]["check_rate"] == 0.0
    # A worker seen only in checks is judged on them (one pass: most probably reading).
    assert out["only-checks"]["stopped_reading_n"] == 1
    assert out["only-checks"]["stopped_reading_prob"] < 0.5
    # Refreshing one worker judges that worker only (and the group they are in).
    one = crowd_evidence(answers, parse_qc_config(None), checks=checks, focus=["random"])
    assert one["random"]["stopped_reading_prob"] == out["random"]["stopped_reading_prob"]
    assert one["c0"]["stopped_reading_prob"] is None and one["c0"]["stopped_reading_n"] == 0


def test_checks_passed_while_answering_at_chance_give_way_to_gold() -> None:
    """A worker at chance who passes every check (a ring copying one answer, a paster) will
    not be decided by more checks: the extra check rate falls with each pass since the
    switch, and a failure raises it again (by 6, up to the full rate). A drifter's passes
    from before the switch do not count against the checks that will catch them."""
    plans = {f"c{n}": careful(20) for n in range(10)}
    plans |= {"obeys": [1 / K] * 20, "fails": [1 / K] * 20, "drifter": drifter(10, 20)}
    answers = play(random.Random(12), plans, tasks=20)
    per_task = len(plans)
    at = [per_task * t for t in (3, 6, 9, 15)]  # checks after the 3rd, 6th, 9th, 15th task
    checks = [(a, "obeys", True) for a in at] + [(a, "fails", a < at[3]) for a in at]
    checks += [(a, "drifter", a < at[3]) for a in at]
    checks.sort()
    out = crowd_evidence(answers, parse_qc_config(None), checks=checks)
    obeys, fails, drifted = out["obeys"], out["fails"], out["drifter"]
    assert obeys["stopped_reading_prob"] > 0.9 and fails["stopped_reading_prob"] > 0.9
    # Four passes: 0.8 x the posterior x 0.44^4 (about 0.04 of it).
    assert obeys["check_rate"] == pytest.approx(
        0.8 * obeys["stopped_reading_prob"] * (0.4 / 0.9) ** 4, abs=1e-4
    )
    # Three passes and a failure: 0.44^3 x 6 = 0.53 of the full rate.
    assert fails["check_rate"] == pytest.approx(
        0.8 * fails["stopped_reading_prob"] * (0.4 / 0.9) ** 3 * 6, abs=1e-4
    )
    assert obeys["check_rate"] < fails["check_rate"] / 10
    # The drifter passed three checks while reading and failed the one after the switch.
    assert drifted["stopped_reading_since"] is not None
    assert 6 <= drifted["stopped_reading_since"] <= 14
    assert drifted["check_rate"] == pytest.approx(0.8 * drifted["stopped_reading_prob"], abs=1e-4)


def test_checks_since_the_switch_are_those_after_its_most_probable_place() -> None:
    """Right 8 times, then a failed check, then at chance with a passed check: the switch is
    after the 8 answers and the pass before them (9 events in all before it), so the checks
    since it are the failure that opens the bad run and the pass within it."""
    right, wrong = np.log(GRID), np.log((1 - GRID) / 3)
    rows = np.array([right] * 8 + [wrong] * 6)
    checks = [(4, True), (8, False), (12, True)]
    verdict = drift.stopped_reading(
        rows, np.full(len(rows), np.log(0.25)), np.full(400, 1 / 400), GRID >= 0.6, checks
    )
    assert verdict.prob > 0.9
    assert verdict.since == 9
    assert verdict.checks_since == (1, 1)


def test_no_events_no_verdict() -> None:
    verdict = drift.stopped_reading(
        np.zeros((0, 400)), np.zeros(0), np.full(400, 1 / 400), np.ones(400, bool)
    )
    assert verdict == drift.Verdict(0.0, None, 0)
    assert verdict.checks_since == (0, 0)


def test_a_threshold_no_accuracy_reaches_gives_no_verdict_rather_than_nan() -> None:
    # Every grid point below the threshold (a record whose chance level is 1): nothing tells a
    # reader from a guesser, and the posterior must not be 0 / 0 (NaN in stored evidence).
    grid = 400
    loglik = np.zeros((4, grid))
    verdict = drift.stopped_reading(
        loglik, np.zeros(4), np.full(grid, 1 / grid), np.zeros(grid, dtype=bool), [(1, False)]
    )
    assert verdict.prob == 0.0 and verdict.since is None
