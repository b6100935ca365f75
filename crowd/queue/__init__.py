"""The job queue: RQ on Redis, fed from the database's outbox."""

from __future__ import annotations

# Queue names; each job says which one it runs on where it is defined.
EVENTS = "crowd-events"
REPORTS = "crowd-reports"
# Outgoing HTTP (webhooks, callbacks): a slow receiver must not hold up events or reports.
DELIVERIES = "crowd-deliveries"
# Reward-model training and LLM evaluation: minutes of work each, so they get workers of
# their own (`crowd worker --queue crowd-models`) and never hold up answers' events.
MODELS = "crowd-models"
ALL_QUEUES = (EVENTS, REPORTS, DELIVERIES, MODELS)
