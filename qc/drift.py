"""Has a worker stopped reading? One posterior from all their evidence, with a change point.

The separate rules each wait for their own credible evidence: two failed attention checks,
four gold answers at chance and ten answers against the crowd are each short of a verdict,
together plenty. And a worker who read for a while and then stopped pools a good start with a
bad end. So we model each worker as reading (accuracy p above the crowd's threshold) or
answering at random, with one possible switch from reading to random, and ask where they
are now.

A worker's events, in answer order, are answers judged against the crowd or a known answer
(`qc.agreement`: the log-likelihood of p on its grid) and attention checks (passed or failed;
a reader fails with READER_FAILS, a worker who does not read with GUESSER_FAILS, whatever p).
The hypotheses, for n events:

- H_n: reading throughout, p ~ the crowd's prior above the threshold;
- H_0: not reading from the start: every answer at random (the chance level);
- H_t (0 < t < n): reading for the first t events, then answering at random.

A worker who does not read is one who answers at random (a guess, a fixed position of
shuffled options): a point hypothesis, sharp where "below the threshold" would be vague. A
worker between chance and the crowd is neither; `below_crowd` judges the whole record there.

Their prior: the crowd's own mass below the threshold (rho) for H_0 and above it for H_n,
SWITCH_PRIOR for "switched somewhere", spread evenly over the t: a long record does not make
a switch more likely a priori, and a switch must earn its place against the hypotheses with
fewer parameters (the Bayesian Occam factor of averaging over t). The posterior of "not
reading now" is the sum over H_0 ... H_{n-1}.

Example (a worker right 8 times, then at chance, with a failed check):
    >>> grid = (np.arange(400) + 0.5) / 400
    >>> right, wrong = np.log(grid), np.log((1 - grid) / 3)
    >>> rows = [right] * 8 + [wrong, right, wrong, wrong, wrong, wrong]
    >>> at_chance = np.full(len(rows), np.log(0.25))  # a random answer is right 1 in 4
    >>> prior = np.full(400, 1 / 400)
    >>> above = grid >= 0.6
    >>> out = stopped_reading(np.array(rows), at_chance, prior, above, [(12, False)])
    >>> round(out.prob, 3), out.since
    (0.995, 8)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

# A careful reader misses an attention check now and then (one in 30 in the QC benchmark's
# crowd); we allow three times that, so a reader's slip weighs little.
READER_FAILS = 0.1
# A worker who does not read fails most checks (a random answer passes about one in K); we
# assume fewer, so failures convict only at a pace any guesser keeps.
GUESSER_FAILS = 0.6
# The prior chance that a worker switches from reading to not somewhere in their record.
SWITCH_PRIOR = 0.2


@dataclass(frozen=True)
class Verdict:
    """prob: P(not reading now); since: the events read before the most probable switch (0:
    never read; None: most probably reading); events: how many events it rests on;
    checks_since: the attention checks (passed, failed) after that switch (all of them while
    most probably reading)."""

    prob: float
    since: int | None
    events: int
    checks_since: tuple[int, int] = (0, 0)


def stopped_reading(
    loglik: np.ndarray,
    chance: np.ndarray,
    prior: np.ndarray,
    reading: np.ndarray,
    checks: Sequence[tuple[int, bool]] = (),
) -> Verdict:
    """The posterior that a worker is not reading now (module docstring).

    loglik: (m, G) log-likelihoods of the accuracy on the grid, one row per judged answer in
    answer order; chance: (m,) each answer's log-likelihood for a random answer (the grid's
    row at the chance level); prior: the crowd's prior of an accuracy on the grid; reading:
    the grid's points at or above the worker's threshold; checks: (judged answers before it,
    passed) per attention check, in order.
    """
    grid = prior.shape[0]
    if not reading.any():  # no accuracy would count as reading: the record cannot tell
        return Verdict(0.0, None, 0)
    # Answer j comes after j answers; a check placed at j comes before it.
    rows = [(j, 1, j) for j in range(loglik.shape[0])]
    rows += [(int(at), 0, c) for c, (at, _) in enumerate(checks)]
    rows.sort()
    n = len(rows)
    if n == 0:
        return Verdict(0.0, None, 0)
    # Per event, the log-likelihood of p for a reader, and the log-likelihood for a worker who
    # does not read: an answer at chance, a check failed at GUESSER_FAILS.
    as_reader = np.empty((n, grid))
    as_guesser = np.empty(n)
    for e, (_, kind, index) in enumerate(rows):
        if kind == 1:
            as_reader[e] = loglik[index]
            as_guesser[e] = chance[index]
        else:
            passed = checks[index][1]
            as_reader[e] = np.log(1 - READER_FAILS if passed else READER_FAILS)
            as_guesser[e] = np.log(1 - GUESSER_FAILS if passed else GUESSER_FAILS)
    rho = min(max(float(prior[~reading].sum()), 1e-6), 1 - 1e-6)
    with np.errstate(divide="ignore"):
        log_read = np.log(np.where(reading, prior, 0.0) / (1 - rho))
    # before[t]: the log evidence of the first t events for a reader (p integrated over the
    # crowd's prior above the threshold); after[t]: of the events from t on for a guesser.
    before = logsumexp(
        np.vstack([np.zeros((1, grid)), np.cumsum(as_reader, axis=0)]) + log_read, axis=1
    )
    after = np.append(np.cumsum(as_guesser[::-1])[::-1], 0.0)
    switch = SWITCH_PRIOR if n > 1 else 0.0
    log_prior = np.full(n + 1, -np.inf)
    log_prior[0] = np.log(rho * (1 - switch))
    log_prior[n] = np.log((1 - rho) * (1 - switch))
    if switch > 0:
        log_prior[1:n] = np.log(switch / (n - 1))
    log_post = before + after + log_prior
    post = np.exp(log_post - logsumexp(log_post))
    prob = float(post[:n].sum())
    since = int(np.argmax(post[:n])) if prob > post[n] else None
    after_switch = [checks[index][1] for _, kind, index in rows[since or 0 :] if kind == 0]
    obeyed = sum(1 for ok in after_switch if ok)
    return Verdict(min(prob, 1.0), since, n, (obeyed, len(after_switch) - obeyed))
