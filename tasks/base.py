"""The contract every HIT type fulfils.

A HIT type knows how its items are validated on upload, what a worker's page may see
(never the expected answer), how a worker's actions advance an assignment, how an answer
is scored on the server, what its analysis computes and how its rows are exported. The
platform (crowd/) does the storage and HTTP around it; everything here is pure.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, TextIO, cast

from crowd.exceptions import InvalidConfig
from qc.config import parse_qc_config
from tasks import worker_page as pages

ITEM_KINDS = ("real", "gold", "attention", "training")
# The rater group of live workers, and of answers (imported, or older rows) that name none.
LIVE_RATER_GROUP = "crowd"


def rater_group(row: Mapping[str, Any]) -> str:
    """The rater group of an analysis row: its own, or the live crowd's where it names none."""
    return str(row.get("rater_group") or LIVE_RATER_GROUP)


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
    # The study's quality control (qc.config.QcConfig as JSON): gold, onboarding, rules.
    qc: dict[str, Any] = field(default_factory=dict)
    # What the worker's pages show (tasks.worker_page); None: the HIT type's defaults.
    worker_page: dict[str, Any] | None = None

    def to_config(self) -> dict[str, Any]:
        config = {
            "annotations_per_item": self.annotations_per_item,
            "attention_rate": self.attention_rate,
            "qc": self.qc,
            **self.extra,
        }
        if self.worker_page is not None:
            config[pages.KEY] = self.worker_page
        return config


class Simulator(ABC):
    """Simulated workers of one HIT type: worker kinds that answer from a hidden truth.

    The truth comes from the experimenter's item records (`truths`), keyed by something the
    page shows (`key`), so simulated workers play through HTTP like people and the analyses
    and QC can be measured against what was true.
    """

    kinds: ClassVar[tuple[str, ...]]
    # Kinds that answer without reading: about a second per step, whatever the text.
    skimmers: ClassVar[frozenset[str]] = frozenset()

    def seconds(self, kind: str, rng: random.Random, new_chars: int) -> float:
        """Simulated time a worker of `kind` spends on a step that showed `new_chars` new chars.

        Readers take a second and a half plus the text at 12 to 25 characters a second (a
        fast but human reading speed); skimmers take 0.4 to 1.5 seconds.
        """
        if kind in self.skimmers:
            return rng.uniform(0.4, 1.5)
        return 1.5 + new_chars / rng.uniform(12.0, 25.0)

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
    # Types played as games between players (taboo): reports and exports read one record
    # per game (the live package's `records`), agents' games included, not one per response.
    played_as_games: ClassVar[bool] = False
    # The fields a worker's step and follow-up (explanation) send, beside "step" and "typing":
    # the worker API refuses the others.
    step_fields: ClassVar[tuple[str, ...]] = ()
    followup_fields: ClassVar[tuple[str, ...]] = ()
    # The module path of the type's live package: the platform side of a type played live
    # (its blueprint, CLI group, jobs, sweeps and game records; see crowd.plugins). A string,
    # so that the pure code here never imports it; None for types served step by step.
    live: ClassVar[str | None] = None

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
        qc = self.validate_qc_config(config.pop("qc", None))
        page = pages.parse_worker_page(config.pop(pages.KEY, None))
        extra = self.validate_extra_config(config)
        return StudyOptions(annotations_per_item=per_item, attention_rate=float(rate),
                            extra=extra, qc=qc, worker_page=page)  # fmt: skip

    def validate_qc_config(self, raw: Any) -> dict[str, Any]:
        """The study's QC settings, completed with defaults (the gold threshold, credibility
        and chance and the early crowd rule's answers are the type's)."""
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise InvalidConfig("must be an object of QC settings (gold, qualification, ...)", "qc")
        gold = raw.get("gold")
        if gold is None or isinstance(gold, Mapping):
            defaults = {
                "threshold": self.gold_threshold,
                "credibility": self.gold_credibility,
                "chance": self.gold_chance,
            }
            raw = {**raw, "gold": {**defaults, **(gold or {})}}
        crowd = raw.get("crowd")
        if crowd is None or isinstance(crowd, Mapping):
            own = {"early_answers": self.crowd_early_answers,
                   "min_answers": self.crowd_min_answers,
                   "min_items": self.crowd_min_items,
                   "real_difficulty": self.crowd_real_difficulty}  # fmt: skip
            own = {k: v for k, v in own.items() if v is not None and v is not False}
            raw = {**raw, "crowd": {**own, **(crowd or {})}}
        try:
            parsed = parse_qc_config(raw)
        except ValueError as error:
            raise InvalidConfig(str(error), "qc") from None
        gold = parsed.gold
        # A random clicker's gold accuracy at or above the threshold would never be credibly
        # below it: the gold rule could not stop one. Stored studies are read as they are.
        if gold.chance is not None and gold.threshold <= gold.chance:
            raise InvalidConfig(
                f"qc.gold.threshold ({gold.threshold}) must be above qc.gold.chance "
                f"({gold.chance}), a random answer's gold accuracy in {self.name} studies, "
                "or the gold rule never stops a random clicker",
                "qc",
            )
        return parsed.to_json()

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
    def instructions(self, config: Mapping[str, Any]) -> str:
        """The type's own instructions for a study (its config's), shown before the first item."""
        return str(config.get("instructions") or "")

    def public_page(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """What the worker's pages show of a study: title, description, consent, instructions
        and examples (tasks.worker_page), never the experimenter's internal study name."""
        return pages.public_page(config, self.title, self.instructions(config))

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

    # -- quality control ---------------------------------------------------------------------
    # Default threshold of gold accuracy (qc.gold) below which a worker is filtered, when the
    # study's qc config does not set one: each type's chance level differs.
    gold_threshold: ClassVar[float] = 0.5
    # The gold accuracy of a uniform random answer, where the type knows it; types that set it
    # derive gold_threshold from it (qc.gold.threshold_from_chance).
    gold_chance: ClassVar[float | None] = None
    # Default posterior probability the rules need (qc.gold.credibility): it sets the gold,
    # attention, crowd and drift rules alike (qc.rules.default_rules; the gold rule never
    # below qc.rules.GOLD_CREDIBILITY, 0.98). A type whose careful
    # readers' evidence swings more (guesses right within one step) sets it firmer.
    gold_credibility: ClassVar[float] = 0.95
    # Judged answers after which a worker credibly (qc.crowd.early_credibility, 0.99) below
    # the crowd is stopped, before below_crowd's min_answers (qc.config.CrowdPolicy
    # .early_answers); None: not before. Set where careful workers' early posteriors stay
    # well clear of it.
    crowd_early_answers: ClassVar[int | None] = None
    # Judged tasks below_crowd waits for (qc.config.CrowdPolicy.min_answers); None: 10.
    crowd_min_answers: ClassVar[int | None] = None
    # Judged items (not tasks: a form's fields, a Likert item's attributes) below_crowd also
    # waits for, beside its tasks (qc.config.CrowdPolicy.min_items); None: the tasks alone.
    crowd_min_items: ClassVar[int | None] = None
    # Whether agreement with the crowd weighs each real task by how hard readers find it
    # (qc.config.CrowdPolicy.real_difficulty); on where the QC benchmark measured it.
    crowd_real_difficulty: ClassVar[bool] = False
    # Whether labels are points on a scale (ratings, boundary guesses): one step off the truth
    # then counts as right against the crowd (qc.agreement), and collusion reads a worker's
    # habits as offsets from the consensus, so two lenient raters are no pair.
    ordinal_labels: ClassVar[bool] = False
    # How repeated labels are aggregated (qc.aggregation methods over answer_labels).
    aggregation_methods: ClassVar[tuple[str, ...]] = ("majority_vote", "dawid_skene", "mace")
    # Whether each method is fitted to each question on its own: a type whose questions differ
    # in kind (a form's rating, category and rank fields) must not let them share classes or
    # the workers' confusion; one model over every question suits questions of one kind.
    aggregate_per_question: ClassVar[bool] = False
    # Types whose answer is one whole number: (its field in the answer, its field in the
    # expected answer). The three label methods below follow from it; other types override.
    single_label: ClassVar[tuple[str, str] | None] = None

    def _single_label(self) -> tuple[str, str]:
        if self.single_label is None:
            raise TypeError(f"{self.name} must set single_label or override the label methods")
        return self.single_label

    def label_applies(self, method: str, question: str, config: Mapping[str, Any]) -> bool:
        """Whether aggregation `method` runs on the labels of `question` (an answer_labels key).

        Every method fits every question by default; a type whose questions differ in kind
        (a form's ratings beside its categories) keeps ordinal methods to ordinal questions.
        """
        return True

    def answer_labels(self, answer: Mapping[str, Any]) -> dict[str, Hashable]:
        """The answer as categorical labels, one per question the item asks.

        Aggregation (majority vote, Dawid-Skene, MACE) runs per (item, question), and gold
        items promoted from agreement store these labels back via `expected_from_labels`.
        """
        answer_field, expected_field = self._single_label()
        return {expected_field: int(answer[answer_field])}

    def expected_labels(self, expected: Mapping[str, Any]) -> dict[str, Hashable]:
        """A gold or training item's expected answer as the same labels; {} when it has none."""
        _, expected_field = self._single_label()
        value = expected.get(expected_field)
        return {} if value is None else {expected_field: int(value)}

    def expected_from_labels(self, labels: Mapping[str, Hashable]) -> dict[str, Any]:
        """The expected answer of a gold item promoted from labels trusted workers agree on."""
        _, expected_field = self._single_label()
        return {expected_field: int(cast(int, labels[expected_field]))}

    def gold_accuracy(self, expected: Mapping[str, Any], answer: Mapping[str, Any]) -> float | None:
        """How well an answer matches a gold or training item, from 0 to 1 (None: no answer key).

        By default the share of the expected labels the answer gives exactly.
        """
        wanted = self.expected_labels(expected)
        if not wanted:
            return None
        given = self.answer_labels(answer)
        return sum(1 for key, value in wanted.items() if given.get(key) == value) / len(wanted)

    @abstractmethod
    def surface(self, answer: Mapping[str, Any]) -> str | None:
        """The answer as the page showed it (e.g. "position 1"): constant answers and runs."""

    def describe_answer(
        self, answer: Mapping[str, Any], content: Mapping[str, Any], config: Mapping[str, Any]
    ) -> str:
        """The answer in the type's terms, for a reviewer (e.g. "fluency: 4/5 · coherence: 3/5").

        By default its labels, "question: value" each; types whose labels are indexes say what
        the index points at, in the numbering the worker saw.
        """
        labels = self.answer_labels(answer)
        if labels:
            return " · ".join(f"{name}: {value}" for name, value in labels.items())
        return self.surface(answer) or "no answer"

    def describe_expected(
        self, expected: Mapping[str, Any], content: Mapping[str, Any], config: Mapping[str, Any]
    ) -> str | None:
        """A gold, attention or training item's expected answer in the terms of
        `describe_answer`; None when the item has none."""
        labels = self.expected_labels(expected)
        if not labels:
            return None
        return " · ".join(f"{name}: {value}" for name, value in labels.items())

    @abstractmethod
    def chars_shown(self, content: Mapping[str, Any], answer: Mapping[str, Any]) -> int:
        """How many characters the worker had to read before this answer (too-fast answers)."""

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
        """How simulated workers of this type answer (see crowd.platforms.providers.sim)."""

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

    # Answer fields (name -> int) a report reads as columns (crowd.studies.frame) rather than
    # as a dict per response; a type that names any implements analyze_frame, which gives
    # what `analyze` gives on the rows of the same responses.
    frame_answer_fields: ClassVar[dict[str, type]] = {}

    def analyze_frame(
        self, frame: Any, excluded_workers: set[str], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        """`analyze` on the study's responses as columns (crowd.studies.frame.StudyFrame);
        only for a type that names frame_answer_fields (the report reads the others as rows)."""
        raise TypeError(f"{self.name} reports from rows: it names no frame_answer_fields")

    @abstractmethod
    def render_report(self, data: dict[str, Any], out_dir: Path, title: str) -> str:
        """Write plots to out_dir and return the HTML report."""

    @abstractmethod
    def export(self, rows: list[dict[str, Any]], fmt: str, handle: TextIO) -> int:
        """Write analysis rows in `fmt` to handle; return how many rows were written."""
