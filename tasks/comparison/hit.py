"""The best-of-K comparison HIT: a worker picks the best of K candidates shown in random order.

The order is drawn per assignment on the server and kept in the assignment's progress; the
page sends the position it showed, and the server maps it back to the canonical index. The
page never sees which policy wrote a candidate nor the experimenter's label, and the label of a
training example is revealed only after the worker's answer is stored.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, TextIO

from crowd.exceptions import InvalidAction, InvalidItem
from qc.gold import threshold_from_chance
from tasks.base import HitType, ItemSpec, Simulator, StepResult, StudyOptions, rater_group
from tasks.comparison import analysis, export, items, report, simulate

THANKS = "Thank you! Your choice is saved."
# A system source of randomness: the order must not be predictable from earlier orders.
_ORDER_RANDOM = random.SystemRandom()


def draw_order(k: int, rng: random.Random = _ORDER_RANDOM) -> list[int]:
    """A uniformly random display order: the candidate shown at position p is order[p]."""
    order = list(range(k))
    rng.shuffle(order)
    return order


def candidate(content: Mapping[str, Any], index: int, width: int = 80) -> str:
    """A candidate as a reviewer reads it: its number from 1, and its text cut to `width`.

    >>> candidate({"candidates": ["a short one", "another"]}, 1)
    'candidate 2 of 2: “another”'
    """
    texts = content["candidates"]
    text = " ".join(str(texts[index]).split())
    if len(text) > width:
        text = text[: width - 1].rstrip() + "…"
    return f"candidate {index + 1} of {len(texts)}: “{text}”"


class ComparisonHit(HitType):
    name: ClassVar[str] = "comparison"
    title: ClassVar[str] = "Pick the best"
    template: ClassVar[str] = "comparison/task.html"
    step_fields: ClassVar[tuple[str, ...]] = ("choice",)
    export_formats: ClassVar[tuple[str, ...]] = export.FORMATS
    # One label per item; a share of items gets `overlap_workers` labels (see plan_items).
    default_annotations_per_item: ClassVar[int] = 1

    # -- configuration and items ------------------------------------------------------------
    def validate_extra_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return items.validate_extra_config(config)

    def validate_item(self, raw: Mapping[str, Any], where: str = "item") -> ItemSpec:
        return items.validate_item(raw, where)

    def plan_items(self, specs: list[ItemSpec], options: StudyOptions) -> list[ItemSpec]:
        return items.plan_overlap(specs, options)

    # -- the worker's flow -------------------------------------------------------------------
    def instructions(self, config: Mapping[str, Any]) -> str:
        return items.instructions_for(config)

    def start(
        self, content: Mapping[str, Any], now: datetime, config: Mapping[str, Any]
    ) -> StepResult:
        order = draw_order(len(content["candidates"]))
        return StepResult(
            progress={"step": 0, "order": order},
            event={"type": "shown", "order": order, "at": now.isoformat()},
        )

    def view(
        self, content: Mapping[str, Any], progress: Mapping[str, Any], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        texts = content["candidates"]
        return {
            "step": int(progress.get("step", 0)),
            "k": len(texts),
            "instructions": items.instructions_for(config),
            "query": content["query"],
            "candidates": [texts[index] for index in progress["order"]],
        }

    def step(
        self,
        content: Mapping[str, Any],
        progress: Mapping[str, Any],
        action: Mapping[str, Any],
        now: datetime,
        config: Mapping[str, Any],
    ) -> StepResult:
        order = [int(index) for index in progress["order"]]
        choice: Any = action.get("choice")
        try:
            best = items.canonical_index(order, choice)
        except ValueError:
            raise InvalidAction(
                f"'choice' must be the position of the candidate you pick, 0 to {len(order) - 1}"
            ) from None
        return StepResult(
            progress={**progress, "step": 1},
            event={"type": "choice", "shown": choice, "at": now.isoformat()},
            answer={"best": best, "shown": choice, "order": order},
        )

    def score(self, expected: Mapping[str, Any], answer: Mapping[str, Any]) -> float | None:
        if expected.get("best") is None:
            return None
        return 1.0 if int(answer["best"]) == int(expected["best"]) else 0.0

    def passed_attention(self, expected: Mapping[str, Any], answer: Mapping[str, Any]) -> bool:
        return int(answer["best"]) == int(expected["best"])

    # -- quality control ---------------------------------------------------------------------
    # A uniform pick among K = 4 candidates is right a quarter of the time (set the study's
    # qc.gold.threshold to 0.625 for K = 2: threshold_from_chance(0.5)).
    gold_chance: ClassVar[float] = 0.25
    gold_threshold: ClassVar[float] = threshold_from_chance(gold_chance)
    # No early crowd rule (qc.crowd.early_answers; until 2026-11-29 it was 6, at 0.99): on
    # the QC benchmark's seeds 17 and 18 it stopped a careful worker whose posterior reached
    # 0.992 after 6 judged answers (3 gold items missed) and the median before a stop was 10
    # with it and without; on seeds 15 and 16 it was 9 with it, 11 without. Without it no
    # careful worker of 480 was lost (benchmarks/RESULTS.md, thirteenth look): a worker
    # wrongly stopped is a person, a bad worker's extra answer is money. A study can set it.
    # below_crowd from 8 judged answers, not 10: on flag-only replays of the QC benchmark
    # (48 studies, seeds 83-90, 960 careful workers; benchmarks/RESULTS.md, twenty-second
    # look) careful workers' highest P(below the crowd) where gold did not vouch was 0.92
    # after 8 judged answers and 0.90 after 9, under the 0.945 after 10 and 0.958 after 12
    # that the rule already lives with (after 7: 0.972, which would stop one). It stopped no
    # careful worker the rule at 10 did not, and bad workers stopped within 10 answers went
    # from 173 to 205 of 379 and from 182 to 217 of 378 (colluders and pasters, who pass
    # every check, wait on this rule).
    crowd_min_answers: ClassVar[int | None] = 8
    # Readers split on an item whose best two candidates are close and agree on one with a
    # clear best: weighing each item by that (qc.agreement `_Question.weigh_real`), the QC
    # benchmark's comparison studies (seeds 15 and 16) lost no careful worker of 240 instead
    # of 2, with the same median of 9 answers before a stop, and QC's labels were at least
    # as accurate as the control's in 24 cells of 24 instead of 19; colluders and drifters
    # were caught 0.94 of the time instead of all (benchmarks/RESULTS.md, twelfth look).
    crowd_real_difficulty: ClassVar[bool] = True
    aggregation_methods: ClassVar[tuple[str, ...]] = (
        "majority_vote", "dawid_skene", "mace", "bradley_terry",
    )  # fmt: skip

    single_label: ClassVar[tuple[str, str] | None] = ("best", "best")

    def surface(self, answer: Mapping[str, Any]) -> str | None:
        # Where the worker clicked, not which text: a worker who always clicks the first
        # candidate picks different texts, since the order is random.
        shown = answer.get("shown")
        return None if shown is None else f"position {int(shown)}"

    def describe_answer(
        self, answer: Mapping[str, Any], content: Mapping[str, Any], config: Mapping[str, Any]
    ) -> str:
        picked = candidate(content, int(answer["best"]))
        shown = answer.get("shown")
        # Positions and candidates count from 1 for people; the page's order was random.
        return picked if shown is None else f"{picked}, shown at position {int(shown) + 1}"

    def describe_expected(
        self, expected: Mapping[str, Any], content: Mapping[str, Any], config: Mapping[str, Any]
    ) -> str | None:
        best = expected.get("best")
        return None if best is None else candidate(content, int(best))

    def chars_shown(self, content: Mapping[str, Any], answer: Mapping[str, Any]) -> int:
        return len(content["query"]) + sum(len(text) for text in content["candidates"])

    def feedback(
        self,
        content: Mapping[str, Any],
        expected: Mapping[str, Any],
        answer: Mapping[str, Any],
        kind: str,
        config: Mapping[str, Any],
    ) -> dict[str, Any]:
        # Gold and attention items must look exactly like real ones, before and after.
        if kind != "training" or expected.get("best") is None:
            return {"message": THANKS}
        texts = content["candidates"]
        right, chosen = int(expected["best"]), int(answer["best"])
        correct = right == chosen
        return {
            "message": (
                "Right: you picked the same candidate as the experimenter."
                if correct
                else "Not quite: the experimenter picked another candidate."
            ),
            "training": True,
            "correct": correct,
            "right_text": texts[right],
            "chosen_text": texts[chosen],
        }

    # -- answers gathered elsewhere ----------------------------------------------------------
    def import_answer(
        self, content: Mapping[str, Any], raw: Mapping[str, Any], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        """`best`: the canonical 0-based index of the chosen candidate, or `best_text`: its text."""
        texts = list(content["candidates"])
        k = len(texts)
        best: int | None = None
        value = raw.get("best")
        if value is not None and str(value).strip() != "":
            try:
                best = int(str(value).strip())
            except ValueError:
                raise InvalidItem(
                    f"'best' must be the 0-based index of the chosen candidate (0 to {k - 1}), "
                    f"got {value!r}",
                    "best",
                ) from None
            if not 0 <= best < k:
                raise InvalidItem(f"'best' {best} is outside 0..{k - 1} for this item", "best")
        text = raw.get("best_text")
        if text is not None and str(text).strip() != "":
            stripped = str(text).strip()
            if stripped not in texts:
                raise InvalidItem(
                    "'best_text' must be the exact text of one of the item's candidates",
                    "best_text",
                )
            by_text = texts.index(stripped)
            if best is not None and best != by_text:
                raise InvalidItem(
                    f"'best' {best} and 'best_text' (candidate {by_text}) disagree: give one",
                    "best",
                )
            best = by_text
        if best is None:
            raise InvalidItem(
                "give 'best' (the 0-based index of the chosen candidate) or 'best_text'", "best"
            )
        return {"best": best, "shown": None, "order": None}

    def simulator(self) -> Simulator:
        return simulate.ComparisonSimulator()

    # -- analysis and export -----------------------------------------------------------------
    def analysis_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        content = row["content"]
        meta = row.get("meta") or {}
        answer = row["answer"]
        expected = row.get("expected") or {}
        texts = list(content["candidates"])
        policies = list(meta.get("policies") or [None] * len(texts))
        flags = row.get("qc_flags") or {}
        return {
            "response_id": row["response_id"],
            "worker": row["worker"],
            "rater_group": rater_group(row),
            "item": row["item"],
            "kind": row["kind"],
            "category": row.get("category"),
            "query": content["query"],
            "candidates": texts,
            "policies": policies,
            "k": len(texts),
            "best": int(answer["best"]),
            "shown": answer.get("shown"),
            "order": answer.get("order"),
            "expected_best": expected.get("best"),
            "score": row.get("score"),
            "attention_passed": flags.get("attention_passed"),
            "position": row.get("position"),
            "created_at": row.get("created_at"),
            "source": row.get("source", "live"),
        }

    def analyze(
        self,
        rows: list[dict[str, Any]],
        excluded_workers: set[str],
        config: Mapping[str, Any],
    ) -> dict[str, Any]:
        groups = config.get("expert_groups", analysis.DEFAULT_EXPERT_GROUPS)
        return analysis.analyze(rows, excluded_workers, groups)

    def render_report(self, data: dict[str, Any], out_dir: Path, title: str) -> str:
        return report.render_report(data, out_dir, title)

    def export(self, rows: list[dict[str, Any]], fmt: str, handle: TextIO) -> int:
        return export.write(rows, fmt, handle)
