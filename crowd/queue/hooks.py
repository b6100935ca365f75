"""What the queue runs for the features: outbox event handlers, periodic sweeps, and hooks
on the database's commits.

Each feature registers its own, where it is defined, when its module is imported; the
worker and the app import the feature modules by name (crowd.plugins.load_features), so the
queue itself imports no feature. Three kinds of event handlers:

- `on_event(topic, order=...)`: runs inside the transaction that marks the outbox event
  handled, in `order` (lowest first; ties in registration order). The QC refresh of a
  worker runs at QC_REFRESH, before everything that reacts to its outcome (AFTER_QC and
  later), so that blocks its rules just made are seen by the webhooks and the Scale
  completion of the same answer. A queue job takes the other pending events of such topics
  with its own (crowd.queue.jobs: a batch, in id order, one transaction), so a handler may
  see the work of earlier events' handlers not yet committed; `batched=False` keeps a
  topic's events out of other events' batches (each is a job's worth of work).
- `after_event(topic, order=...)`: runs after that transaction committed, in a queue job,
  with the job's Redis connection; for enqueueing follow-up jobs (a report refresh, a
  judge, a training run). ANY_TOPIC registers for every event. Once per event, as a rule
  (a job cut off midway runs them again): they are safe to run twice.
- `own_transaction(topic)`: the one handler of a topic whose work must not hold a
  transaction open (a call to a crowd platform that can take seconds). It opens its own;
  the event is marked processed after it returns, and it raises to have the job retried.

`paced(*topics)` names what a topic's event is paced by (a study, for the QC refresh whose
cost the study's size sets): a worker begins a batch for one pacing key at most once every
`Settings.qc_refresh_interval` seconds (crowd.queue.jobs), and the events that arrive
meanwhile wait in the outbox for that batch.

Sweeps (`every_sweep`) run beside `crowd worker` between its jobs; `on_commit` hooks are
installed on every database whose commits enqueue work (the app's and each worker's).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
from sqlalchemy.orm import Session

from crowd.exceptions import RegistryError
from crowd.settings import Settings
from crowd.storage import Database

ANY_TOPIC = "*"
# Orders of in-transaction handlers: the QC refresh first, then what reacts to a response.
QC_REFRESH = 0
AFTER_QC = 100


@dataclass(frozen=True)
class Event:
    """An outbox event as handlers see it: plain values, read in the job's transaction."""

    id: int
    topic: str
    payload: dict[str, Any]


InTransaction = Callable[[Session, Event], None]
AfterCommit = Callable[[redis.Redis, Event], None]
OwnTransaction = Callable[[Event], str]
InTransactionT = TypeVar("InTransactionT", bound=InTransaction)
AfterCommitT = TypeVar("AfterCommitT", bound=AfterCommit)
OwnTransactionT = TypeVar("OwnTransactionT", bound=OwnTransaction)
PaceKey = Callable[[Event], Hashable | None]
PaceKeyT = TypeVar("PaceKeyT", bound=PaceKey)
SweepT = TypeVar("SweepT", bound=Callable[["SweepContext"], object])


@dataclass(frozen=True)
class _Entry:
    order: int
    serial: int
    handler: Callable[..., Any]
    batched: bool = True


_in_transaction: dict[str, list[_Entry]] = {}
_after_commit: dict[str, list[_Entry]] = {}
_own_transaction: dict[str, OwnTransaction] = {}
_pace_keys: dict[str, PaceKey] = {}
_serial = itertools.count()


def _name(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def _add(
    table: dict[str, list[_Entry]],
    topics: tuple[str, ...],
    order: int,
    fn: Any,
    batched: bool = True,
) -> None:
    if not topics:
        raise RegistryError(f"{_name(fn)} names no outbox topic to handle")
    for topic in topics:
        # A module imported again (importlib.reload) replaces its own handlers.
        entries = [e for e in table.get(topic, []) if _name(e.handler) != _name(fn)]
        entries.append(_Entry(order, next(_serial), fn, batched))
        table[topic] = sorted(entries, key=lambda entry: (entry.order, entry.serial))


def on_event(
    *topics: str, order: int = AFTER_QC, batched: bool = True
) -> Callable[[InTransactionT], InTransactionT]:
    """Register `fn(session, event)` for `topics`, inside the event's transaction; with
    `batched=False` the topics' events never join another event's batch."""

    def register(fn: InTransactionT) -> InTransactionT:
        if ANY_TOPIC in topics:
            raise RegistryError("in-transaction handlers name their topics")
        _add(_in_transaction, topics, order, fn, batched)
        return fn

    return register


def after_event(*topics: str, order: int = 0) -> Callable[[AfterCommitT], AfterCommitT]:
    """Register `fn(connection, event)` for `topics` (or ANY_TOPIC), after the commit."""

    def register(fn: AfterCommitT) -> AfterCommitT:
        _add(_after_commit, topics, order, fn)
        return fn

    return register


def own_transaction(topic: str) -> Callable[[OwnTransactionT], OwnTransactionT]:
    """Register `fn(event) -> outcome` as the only handler of `topic`; it opens its own
    transactions and raises to have the job retried."""

    def register(fn: OwnTransactionT) -> OwnTransactionT:
        existing = _own_transaction.get(topic)
        if existing is not None and _name(existing) != _name(fn):
            raise RegistryError(f"outbox topic {topic!r} is already handled by {_name(existing)}")
        if topic in _in_transaction or topic in _after_commit:
            raise RegistryError(f"outbox topic {topic!r} already has handlers in a transaction")
        _own_transaction[topic] = fn
        return fn

    return register


def paced(*topics: str) -> Callable[[PaceKeyT], PaceKeyT]:
    """Register `fn(event) -> key` for `topics`: a worker begins a batch for one key (None:
    the event is not paced) at most once per `Settings.qc_refresh_interval` seconds."""

    def register(fn: PaceKeyT) -> PaceKeyT:
        if not topics or ANY_TOPIC in topics:
            raise RegistryError(f"{_name(fn)} must name the topics it paces")
        for topic in topics:
            existing = _pace_keys.get(topic)
            if existing is not None and _name(existing) != _name(fn):
                raise RegistryError(f"outbox topic {topic!r} is already paced by {_name(existing)}")
            _pace_keys[topic] = fn
        return fn

    return register


def pace_key(event: Event) -> Hashable | None:
    """What the event is paced by (`paced`), or None."""
    key_of = _pace_keys.get(event.topic)
    return None if key_of is None else key_of(event)


def in_transaction_handlers(topic: str) -> list[InTransaction]:
    return [entry.handler for entry in _in_transaction.get(topic, [])]


def after_commit_handlers(topic: str) -> list[AfterCommit]:
    entries = [*_after_commit.get(topic, []), *_after_commit.get(ANY_TOPIC, [])]
    return [entry.handler for entry in sorted(entries, key=lambda e: (e.order, e.serial))]


def own_transaction_handler(topic: str) -> OwnTransaction | None:
    return _own_transaction.get(topic)


def batched_topics() -> list[str]:
    """The topics whose events a job may take into its batch: those with handlers in the
    transaction, every one of them batched, and no handler of their own transactions."""
    return sorted(
        topic
        for topic, entries in _in_transaction.items()
        if entries and all(entry.batched for entry in entries) and topic not in _own_transaction
    )


def known_topic(topic: str) -> bool:
    """Whether any feature handles `topic` (handlers of every topic aside)."""
    return topic in _in_transaction or topic in _after_commit or topic in _own_transaction


# -- sweeps ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepContext:
    settings: Settings
    db: Database
    connection: redis.Redis
    burst: bool = False


@dataclass(frozen=True)
class Sweep:
    """A periodic task of `crowd worker`: `run` every sweep round (`every` None) or at most
    once per `every(settings)` seconds; `burst` sweeps also run between the rounds of a
    burst worker (`crowd worker --burst`, the demo, tests)."""

    name: str
    run: Callable[[SweepContext], object]
    order: int
    every: Callable[[Settings], float] | None = None
    burst: bool = False
    # Sweeps of one lane run in turn, in one thread of `crowd worker`; lanes run side by
    # side, so a slow platform sync never holds up the queue's own sweeps.
    lane: str = "features"
    serial: int = field(default_factory=lambda: next(_serial))


_sweeps: dict[str, Sweep] = {}


def every_sweep(
    name: str,
    order: int = 0,
    every: Callable[[Settings], float] | None = None,
    burst: bool = False,
    lane: str = "features",
) -> Callable[[SweepT], SweepT]:
    """Register `fn(context)` as the sweep `name`, run in `order` (lowest first) within
    its `lane`."""

    def register(fn: SweepT) -> SweepT:
        existing = _sweeps.get(name)
        if existing is not None and _name(existing.run) != _name(fn):
            raise RegistryError(f"sweep {name!r} is already registered: {_name(existing.run)}")
        _sweeps[name] = Sweep(name, fn, order, every, burst, lane)
        return fn

    return register


QUEUE_LANE = "queue"


def sweeps(lane: str | None = None) -> list[Sweep]:
    """The registered sweeps (of `lane`, or all), in their order."""
    chosen = [sweep for sweep in _sweeps.values() if lane is None or sweep.lane == lane]
    return sorted(chosen, key=lambda sweep: (sweep.order, sweep.serial))


# -- hooks on commits ------------------------------------------------------------------------
CommitHook = Callable[[Database, redis.Redis], None]
_commit_hooks: list[CommitHook] = []


def on_commit(fn: CommitHook) -> CommitHook:
    """Register `fn(db, connection)`, which installs a hook on `db`'s commits (e.g. enqueue
    the first attempt of a delivery), for the app's database and each worker's."""
    _commit_hooks[:] = [hook for hook in _commit_hooks if _name(hook) != _name(fn)]
    _commit_hooks.append(fn)
    return fn


def install_commit_hooks(db: Database, connection: redis.Redis) -> None:
    for install in _commit_hooks:
        install(db, connection)
