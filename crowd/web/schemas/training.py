"""Reward-model runs of a comparison study."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool

from crowd.storage import RunStatus
from crowd.web.contract import Body, Reply
from crowd.web.schemas.studies import Count, Id, Time
from models.reward.config import RewardConfig

HELP = RewardConfig.help()
# models.reward.config.LABEL_SOURCES, KINDS, POOLINGS and DEVICES (a test keeps them the same).
LabelSource = Literal["raw", "majority_vote", "dawid_skene", "bradley_terry"]
Kind = Literal["auto", "causal", "encoder"]
Pooling = Literal["auto", "last", "mean", "cls"]
Device = Literal["auto", "cpu", "cuda"]


class RewardSettings(Body):
    """RewardConfig fields that override the study's reward_model settings; the bounds are
    RewardConfig's own."""

    backbone: str = Field(
        default="minilm", max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
        description=HELP["backbone"] + " Through the API: a directory name under "
        "CROWD_DATA_DIR/backbones, never a path.",
    )  # fmt: skip
    kind: Kind = Field(default="auto", description=HELP["kind"])
    pooling: Pooling = Field(default="auto", description=HELP["pooling"])
    share_query: StrictBool = Field(default=True, description=HELP["share_query"])
    epochs: int = Field(default=1, ge=1, le=100, description=HELP["epochs"])
    learning_rate: float = Field(default=1.77e-5, gt=0, lt=1, description=HELP["learning_rate"])
    batch_size: int = Field(default=8, ge=1, le=1024, description=HELP["batch_size"])
    dropout: float = Field(default=0.0, ge=0, lt=1, description=HELP["dropout"])
    max_length: int = Field(default=128, ge=8, le=8192, description=HELP["max_length"])
    held_out: float = Field(default=0.1, ge=0, lt=1, description=HELP["held_out"])
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description=HELP["seed"])
    device: Device = Field(default="auto", description=HELP["device"])
    bf16: StrictBool | None = Field(default=None, description=HELP["bf16"])
    normalize: StrictBool = Field(default=True, description=HELP["normalize"])
    base_policy: str | None = Field(default=None, max_length=200, description=HELP["base_policy"])
    eval_batch_size: int = Field(default=32, ge=1, le=4096, description=HELP["eval_batch_size"])


class NewRewardRun(Body):
    """Queue a run: it trains from scratch on every accepted label so far."""

    labels: LabelSource | None = Field(
        default=None,
        description="raw (every accepted label) or an aggregation method's labels; default: "
        "the study's reward_model.labels",
    )
    settings: RewardSettings = Field(
        default_factory=RewardSettings,
        description="only the settings given override the study's",
    )


class RewardRun(Reply):
    """A reward-model run"""

    id: Id
    study_id: Id
    status: RunStatus
    trigger: str = Field(description="manual (CLI, API) or retrain_every")
    labels: str = Field(description="raw or the aggregation method whose labels were used")
    labels_at_request: Count
    settings: dict[str, Any] = Field(description="the RewardConfig it trains with")
    data: dict[str, Any] = Field(description="counts of the data it read")
    metrics: dict[str, Any] = Field(description="held-out accuracy and the like, once finished")
    path: str | None = Field(description="where the model was saved")
    job_id: str | None
    error: str | None
    progress: dict[str, Any] | None = Field(description="what the job last reported")
    created_at: Time
    started_at: Time | None
    finished_at: Time | None


class RewardRuns(Reply):
    """The study's runs, newest first, with their jobs' progress"""

    runs: list[RewardRun]
