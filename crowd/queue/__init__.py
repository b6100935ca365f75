"""The job queue: RQ on Redis, fed from the database's outbox."""

from __future__ import annotations

# Queue names; each job says which one it runs on where it is defined.
EVENTS = "crowd-events"
REPORTS = "crowd-reports"
# Outgoing HTTP (webhooks, callbacks): a slow receiver must not hold up events or reports.
DELIVERIES = "crowd-deliveries"
ALL_QUEUES = (EVENTS, REPORTS, DELIVERIES)
