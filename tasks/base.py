"""The contract every HIT type fulfils.

A HIT type knows how its items are validated on upload, what a worker's page may see
(never the expected answer), how a worker's actions advance an assignment, how an answer
is scored on the server, what its analysis computes and how its rows are exported. The
platform (crowd/) does the storage and HTTP around it; everything here is pure.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, TextIO

from crowd.exceptions import InvalidConfig

ITEM_KINDS = ("real", "gold", "attention", "training")


@dataclass(frozen=True)
class ItemSpec:
    """A validated item, split into what may be shown, what must stay secret, and metadata."""

    external_id: str
    content: dict[str, Any]
    expected: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    kind: str = "real"
    category: str | None = None
    # Serving order: a worker gets items of a lower rank first (e.g. one group after another).
    rank: int = 0
    # How many workers should answer the item; None means the study's annotations_per_item.
    target: int | None = None


@dataclass(frozen=True)
class StepResult:
    """What one worker action did: the new progress, its event, and the answer once final."""

    progress: dict[str, Any]
    event: dict[str, Any]
    answer: dict[str, Any] | None = None


@dataclass(frozen=True)
class StudyOptions:
    """Settings every HIT type shares; the type's own settings live in `extra`."""

    annotations_per_item: int = 4
    attention_rate: float = 0.1
    extra: dict[str, Any] = field(default_factory=dict)

    def to_config(self) -> dict[str, Any]:
        return {
            "annotations_per_item": self.annotations_per_item,
            "attention_rate": self.attention_rate,
            **self.extra,
        }


class Simulator(ABC):
    """Simulated workers of one HIT type: worker kinds that answer from a hidden truth.

    The truth comes from the experimenter's item records (`truths`), keyed by something the
    page shows (`key`), so simulated workers play through HTTP like people and the analyses
    and QC can be measured against what was true.
    """

    kinds: ClassVar[tuple[str, ...]]

    @abstractmethod
    def truths(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        """The truth of each item record, keyed as `key` keys a page view."""

    @abstractmethod
    def key(self, task: Mapping[str, Any]) -> str:
        """The truth key of the item a page view (`view()["task"]`) shows."""

    @abstractmethod
    def act(
        self, kind: str, rng: random.Random, task: Mapping[str, Any], truth: Any
    ) -> dict[str, Any]:
        """The body of the next step request (without "step") a worker of `kind` sends."""

    def followup(
        self, kind: str, rng: random.Random, task: Mapping[str, Any], truth: Any
    ) -> dict[str, Any]:
        """The body of the follow-up (explanation) request, when the type asks for one."""
        return {}


class HitType(ABC):
    """One kind of HIT. Subclasses set `name`, `title`, `template` and implement the rest."""

    name: ClassVar[str]
    title: ClassVar[str]
    # Jinja template (in the type's templates/ folder) that renders the worker page.
    template: ClassVar[str]
    export_formats: ClassVar[tuple[str, ...]] = ("jsonl", "csv")
    default_annotations_per_item: ClassVar[int] = 3

    # -- configuration and items ------------------------------------------------------------
    def validate_config(self, config: Mapping[str, Any] | None) -> StudyOptions:
        """Check a study config; unknown keys are errors so typos do not pass silently."""
        config = dict(config or {})
        per_item = config.pop("annotations_per_item", self.default_annotations_per_item)
        rate = config.pop("attention_rate", 0.0)
        if not isinstance(per_item, int) or isinstance(per_item, bool) or not 1 <= per_item <= 1000:
            raise InvalidConfig("must be an integer from 1 to 1000", "annotations_per_item")
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not 0 <= rate < 1:
            raise InvalidConfig("must be a number from 0 (none) to below 1", "attention_rate")
        extra = self.validate_extra_config(config)
        return StudyOptions(annotations_per_item=per_item, attention_rate=float(rate), extra=extra)

    def validate_extra_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """Validate the type's own config keys (those left after the shared ones)."""
        if config:
            raise InvalidConfig(f"unknown config keys {sorted(config)} for {self.name} studies")
        return {}

    @abstractmethod
    def validate_item(self, raw: Mapping[str, Any], where: str = "item") -> ItemSpec:
        """Validate one uploaded item; raise InvalidItem naming `where` and the field."""

    def plan_items(self, specs: list[ItemSpec], options: StudyOptions) -> list[ItemSpec]:
        """Set each imported item's serving rank and target from the study's options.

        E.g. one group of texts after another (ranks), or a share of items for many
        workers (targets). Called with the whole import, after every item validated.
        """
        return specs

    def shuffle_items(self, config: Mapping[str, Any]) -> bool:
        """Whether items of the same rank are served in random order rather than by id."""
        return False

    # -- the worker's flow -------------------------------------------------------------------
    @abstractmethod
    def start(
        self, content: Mapping[str, Any], now: datetime, config: Mapping[str, Any]
    ) -> StepResult:
        """The progress and first event of a new assignment (e.g. a random candidate order)."""

    def current_step(self, progress: Mapping[str, Any]) -> int:
        """The index of the step the worker is on; actions name it so retries are harmless."""
        return int(progress.get("step", 0))

    @abstractmethod
    def view(
        self, content: Mapping[str, Any], progress: Mapping[str, Any], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        """What the worker's page may see now, with a "step"; never the expected answer."""

    @abstractmethod
    def step(
        self,
        content: Mapping[str, Any],
        progress: Mapping[str, Any],
        action: Mapping[str, Any],
        now: datetime,
        config: Mapping[str, Any],
    ) -> StepResult:
        """Apply one worker action; raise InvalidAction on a bad one."""

    @abstractmethod
    def score(self, expected: Mapping[str, Any], answer: Mapping[str, Any]) -> float | None:
        """Points for an answer, computed on the server."""

    @abstractmethod
    def passed_attention(self, expected: Mapping[str, Any], answer: Mapping[str, Any]) -> bool:
        """Whether an answer to an attention-check item is the one it asked for."""

    def needs_followup(self, answer: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
        """Whether the worker must add something (an explanation) before the feedback."""
        return False

    def followup(
        self, answer: Mapping[str, Any], action: Mapping[str, Any], config: Mapping[str, Any]
    ) -> tuple[str | None, list[str]]:
        """Validate the follow-up (explanation text, reason tags) to an answer."""
        return None, []

    @abstractmethod
    def feedback(
        self,
        content: Mapping[str, Any],
        expected: Mapping[str, Any],
        answer: Mapping[str, Any],
        kind: str,
        config: Mapping[str, Any],
    ) -> dict[str, Any]:
        """What the worker learns once the answer is stored (the reveal), by item kind."""

    # -- answers gathered elsewhere ----------------------------------------------------------
    @abstractmethod
    def import_answer(
        self, content: Mapping[str, Any], raw: Mapping[str, Any], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Turn an answer collected on another platform into the answer a live worker stores.

        `raw` is the record's answer object (JSONL) or its non-standard columns (CSV), with
        text values; raise InvalidItem naming the field on a bad one.
        """

    @abstractmethod
    def simulator(self) -> Simulator:
        """How simulated workers of this type answer (see crowd.providers.sim)."""

    # -- analysis and export -----------------------------------------------------------------
    @abstractmethod
    def analysis_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """Flatten one stored response (platform row) into the type's analysis row."""

    @abstractmethod
    def analyze(
        self,
        rows: list[dict[str, Any]],
        excluded_workers: set[str],
        config: Mapping[str, Any],
    ) -> dict[str, Any]:
        """Every number of the type's report, on the full and the filtered set.

        `config` is the study's config (e.g. which rater groups count as experts).
        """

    @abstractmethod
    def render_report(self, data: dict[str, Any], out_dir: Path, title: str) -> str:
        """Write plots to out_dir and return the HTML report."""

    @abstractmethod
    def export(self, rows: list[dict[str, Any]], fmt: str, handle: TextIO) -> int:
        """Write analysis rows in `fmt` to handle; return how many rows were written."""
