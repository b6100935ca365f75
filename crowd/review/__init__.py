"""Reviewing workers: the actions people take on them (actions), what they look at (workers)
and how the evidence, answers and audit log read to a person (text)."""

from __future__ import annotations

from crowd.review.actions import (
    ACTIONS,
    ALLOWED,
    BULK_ACTIONS,
    DESTRUCTIVE,
    MAX_BONUS,
    MAX_TEXT,
    Outcome,
    Reviewer,
    act,
    bonus_token,
    bulk,
    check_allowed,
    check_decision,
    parse_amount,
)
from crowd.review.workers import (
    SORT_KEYS,
    answered_items,
    audit_log,
    audit_row,
    rule_targets,
    submitted_assignments,
    worker_history,
    worker_in_study,
    worker_names,
    worker_table,
)

__all__ = [
    "ACTIONS", "ALLOWED", "BULK_ACTIONS", "DESTRUCTIVE", "MAX_BONUS", "MAX_TEXT", "SORT_KEYS",
    "Outcome", "Reviewer", "act", "answered_items", "audit_log", "audit_row", "bonus_token",
    "bulk", "check_allowed", "check_decision", "parse_amount", "rule_targets",
    "submitted_assignments", "worker_history", "worker_in_study", "worker_names", "worker_table",
]  # fmt: skip
