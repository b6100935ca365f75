"""The job queue: RQ on Redis, fed from the database's outbox."""

from __future__ import annotations

import redis

# Queue names; each job says which one it runs on where it is defined.
EVENTS = "crowd-events"
REPORTS = "crowd-reports"
# Outgoing HTTP (webhooks, callbacks): a slow receiver must not hold up events or reports.
DELIVERIES = "crowd-deliveries"
# Reward-model training and LLM evaluation: minutes of work each, so they get workers of
# their own (`crowd worker --queue crowd-models`) and never hold up answers' events.
MODELS = "crowd-models"
ALL_QUEUES = (EVENTS, REPORTS, DELIVERIES, MODELS)


def redis_connection(url: str) -> redis.Redis:
    """A connection to the Redis at `url`, for the queues and the after-commit enqueue."""
    # Short timeouts: a request must not hang on a dead Redis; the outbox catches up later.
    return redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
