"""Storage: SQLAlchemy 2.x models by aggregate, the engine and sessions, Alembic migrations."""

from __future__ import annotations

from crowd.storage.accounts import ApiKey, Experimenter
from crowd.storage.base import MAX_ID, Base, utcnow
from crowd.storage.db import Database
from crowd.storage.delivery import Delivery, DeliveryStatus, WebhookSubscription
from crowd.storage.outbox import OutboxEvent
from crowd.storage.platforms import (
    CLOSED_SESSION_STATES,
    ActionStatus,
    PlatformAccount,
    PlatformAction,
    PlatformSession,
    Publication,
    RemoteTask,
    RemoteTaskStatus,
    SessionState,
)
from crowd.storage.qc import (
    AggregatedLabels,
    AuditEntry,
    Bonus,
    Decision,
    Qualification,
    Role,
    Serving,
    StudyWorker,
    User,
    WorkerBlock,
)
from crowd.storage.reports import Report
from crowd.storage.scale import (
    IdempotentReply,
    ScaleAccount,
    ScaleBatch,
    ScaleProject,
    ScaleTask,
    ScaleTaskStatus,
    ScaleTaskTag,
)
from crowd.storage.studies import Item, ItemKind, Study, StudyStatus
from crowd.storage.taboo import JudgeScore, Pairing, SeatState, TabooGame, TabooSeat
from crowd.storage.training import OPEN_RUN_STATES, RewardRun, RunStatus
from crowd.storage.work import (
    HOLDING_STATES,
    Assignment,
    AssignmentState,
    Response,
    ResponseSource,
    Worker,
    WorkerStatus,
)

__all__ = [
    "MAX_ID",
    "JudgeScore",
    "Pairing",
    "SeatState",
    "TabooGame",
    "TabooSeat",
    "OPEN_RUN_STATES",
    "RewardRun",
    "RunStatus",
    "CLOSED_SESSION_STATES",
    "ActionStatus",
    "PlatformAccount",
    "PlatformAction",
    "PlatformSession",
    "Publication",
    "RemoteTask",
    "RemoteTaskStatus",
    "SessionState",
    "AggregatedLabels",
    "AuditEntry",
    "Bonus",
    "Decision",
    "Qualification",
    "Role",
    "Serving",
    "StudyWorker",
    "User",
    "WorkerBlock",
    "HOLDING_STATES",
    "ApiKey",
    "Assignment",
    "AssignmentState",
    "Base",
    "Database",
    "Delivery",
    "DeliveryStatus",
    "Experimenter",
    "Item",
    "ItemKind",
    "OutboxEvent",
    "Report",
    "IdempotentReply",
    "ScaleAccount",
    "ScaleBatch",
    "ScaleProject",
    "ScaleTask",
    "ScaleTaskStatus",
    "ScaleTaskTag",
    "Response",
    "ResponseSource",
    "Study",
    "StudyStatus",
    "WebhookSubscription",
    "Worker",
    "WorkerStatus",
    "utcnow",
]
