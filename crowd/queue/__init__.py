"""The job queue: RQ on Redis, fed from the database's outbox.

Every queue, worker and job fetch goes through `job_queue`, `SERIALIZER` and `fetch_job`:
jobs, their meta and their results are stored as JSON, never pickled. Jobs take plain values
(ids, text, lists and dicts of them), what one release stored the next can read, and
reading Redis never runs code.
"""

from __future__ import annotations

import time
import weakref

import redis
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

# Queue names; each job says which one it runs on where it is defined.
EVENTS = "crowd-events"
REPORTS = "crowd-reports"
# Outgoing HTTP (webhooks, callbacks): a slow receiver must not hold up events or reports.
DELIVERIES = "crowd-deliveries"
# Reward-model training and LLM evaluation: minutes of work each, so they get workers of
# their own (`crowd worker --queue crowd-models`) and never hold up answers' events.
MODELS = "crowd-models"
ALL_QUEUES = (EVENTS, REPORTS, DELIVERIES, MODELS)


def event_job_id(event_id: int) -> str:
    """The id of the EVENTS job that processes outbox event `event_id` (one job per event)."""
    return f"outbox-{event_id}"


def redis_connection(url: str) -> redis.Redis:
    """A connection to the Redis at `url`, for the queues and the after-commit enqueue."""
    # Short timeouts: a request must not hang on a dead Redis; the outbox catches up later.
    return redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)


# The after-commit enqueue on the request path: an answer is stored before it is enqueued,
# and the outbox keeps its event when Redis does not take it, so the request waits on Redis
# this long at most, and not at all for RESTING seconds after Redis failed it.
QUICK_TIMEOUT = 0.5
RESTING = 5.0


def quick_connection(url: str) -> redis.Redis:
    """A connection for enqueueing after a commit on the request path (see `resting`)."""
    return redis.Redis.from_url(url, socket_connect_timeout=QUICK_TIMEOUT,
                                socket_timeout=QUICK_TIMEOUT)  # fmt: skip


_failed_at: weakref.WeakKeyDictionary[redis.Redis, float] = weakref.WeakKeyDictionary()


def resting(connection: redis.Redis) -> bool:
    """Whether `connection` failed in the last RESTING seconds: the after-commit enqueues
    leave it alone (each try would cost a timeout) and the sweep sends their work later."""
    failed = _failed_at.get(connection)
    return failed is not None and time.monotonic() - failed < RESTING


def failed(connection: redis.Redis) -> None:
    """Note that `connection` just failed (a timeout, a refused connection)."""
    _failed_at[connection] = time.monotonic()


SERIALIZER = JSONSerializer


def job_queue(name: str, connection: redis.Redis) -> Queue:
    """The queue `name` (one of ALL_QUEUES) on `connection`, with the JSON serializer."""
    return Queue(name, connection=connection, serializer=SERIALIZER)


def fetch_job(job_id: str, connection: redis.Redis) -> Job:
    """A stored job, read with the JSON serializer (raises rq's NoSuchJobError)."""
    return Job.fetch(job_id, connection=connection, serializer=SERIALIZER)
