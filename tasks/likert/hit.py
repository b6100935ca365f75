"""The Likert HIT: a text rated on one attribute per step, each on its own labelled scale.

One question per page keeps raters from anchoring one attribute on another, and lets the
prompt appear only with the question that needs it (relevance), as Chiang & Lee (2023) did.
The item's group (human or model, which attack) never reaches the page.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Hashable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, TextIO, cast

from crowd.exceptions import InvalidAction, InvalidConfig, InvalidItem
from qc.gold import threshold_from_chance
from tasks.base import HitType, ItemSpec, Simulator, StepResult, StudyOptions, rater_group
from tasks.likert import analysis, report, simulate
from tasks.likert.config import check_item_fits, validate_item_record, validate_study_config

EXPORT_COLUMNS = (
    "response_id", "worker", "rater_group", "item", "item_group", "kind", "attribute",
    "rating", "scale_low", "scale_high", "created_at", "source",
)  # fmt: skip
MISSING_WORDS = frozenset({"", "na", "n/a", "nan", "none", "null"})
THANKS = "Thank you! Your ratings are saved."


def attributes_of(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The study's attributes; a config without them (never validated) gets the default's."""
    attributes = config.get("attributes")
    if attributes is None:
        attributes = validate_study_config({})["attributes"]
    return list(attributes)


def scales_of(config: Mapping[str, Any]) -> dict[str, list[int]]:
    return {attribute["name"]: list(attribute["scale"]) for attribute in attributes_of(config)}


def _parse_rating(value: Any, low: int, high: int, where: str) -> int | float | None:
    """A rating from an import: a whole or half number within the scale, or None if missing."""
    how = f"give a number from {low} to {high} (halves like 3.5 allowed) or leave it empty"
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidItem(f"a rating must be a number, not {value!r}: {how}", where)
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in MISSING_WORDS:
            return None
        try:
            value = float(text)
        except ValueError:
            raise InvalidItem(f"{value!r} is not a number: {how}", where) from None
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidItem(f"{value!r} is not a rating: {how}", where)
    if (2 * value) != int(2 * value):
        raise InvalidItem(f"{value} is neither a whole nor a half number: {how}", where)
    if not low <= value <= high:
        raise InvalidItem(f"{value} is outside the scale: {how}", where)
    return int(value) if value == int(value) else float(value)


def describe_ratings(ratings: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """Ratings as a reviewer reads them: by attribute in the study's order, each on its scale,
    with the scale's label where the rating is an end that has one.

    >>> attributes = [{"name": "fluency", "question": "?", "scale": [1, 5],
    ...                "labels": ["broken", "flawless"]},
    ...               {"name": "coherence", "question": "?", "scale": [-2, 2], "labels": ["", ""]}]
    >>> describe_ratings({"coherence": 0, "fluency": 5}, {"attributes": attributes})
    'fluency: 5/5 (flawless) · coherence: 0 (-2 to 2)'
    """
    attributes = {attribute["name"]: attribute for attribute in attributes_of(config)}
    names = [name for name in attributes if name in ratings]
    names += [name for name in ratings if name not in attributes]
    parts = []
    for name in names:
        value, attribute = ratings[name], attributes.get(name)
        if value is None or attribute is None:
            parts.append(f"{name}: {'–' if value is None else value}")
            continue
        (low, high), labels = attribute["scale"], attribute.get("labels") or ["", ""]
        text = f"{value:g}" + (f"/{high}" if low in (0, 1) else f" ({low} to {high})")
        label = labels[0] if value == low else labels[1] if value == high else ""
        parts.append(f"{name}: {text}" + (f" ({label})" if label else ""))
    return " · ".join(parts) or "no rating"


class LikertHit(HitType):
    name: ClassVar[str] = "likert"
    title: ClassVar[str] = "Rate a text"
    template: ClassVar[str] = "likert/task.html"
    step_fields: ClassVar[tuple[str, ...]] = ("rating",)
    export_formats: ClassVar[tuple[str, ...]] = ("jsonl", "csv")
    default_annotations_per_item: ClassVar[int] = 3

    # -- configuration and items ------------------------------------------------------------
    def validate_extra_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return validate_study_config(config)

    def validate_item(self, raw: Mapping[str, Any], where: str = "item") -> ItemSpec:
        parts = validate_item_record(raw, where)
        return ItemSpec(
            external_id=parts["id"],
            content=parts["content"],
            expected=parts["expected"],
            meta=parts["meta"],
            kind=parts["kind"],
        )

    def plan_items(self, specs: list[ItemSpec], options: StudyOptions) -> list[ItemSpec]:
        """Check items against the attributes; for "sequential" rank them group by group.

        The rank is the group's place in the config's `groups`, the same in every import.
        The order is the study's, not each worker's: a worker who arrives once the first
        group's items are full starts with the next group.
        """
        config = options.extra
        attributes = attributes_of(config)
        for spec in specs:
            check_item_fits(spec.content, spec.expected, attributes, f"item {spec.external_id}")
        if config.get("group_order", "mixed") != "sequential":
            return specs
        order: list[str] = list(config["groups"])
        planned = []
        for spec in specs:
            group = spec.meta.get("group")
            if spec.kind == "attention":  # served on their own schedule, rank does not apply
                planned.append(spec)
                continue
            if group not in order:
                raise InvalidItem(
                    f"group {group!r} is not in the study's 'groups' {order}: give every "
                    "item one of those groups, or add the group to the list",
                    f"item {spec.external_id}",
                )
            planned.append(dataclasses.replace(spec, rank=order.index(group)))
        return planned

    def shuffle_items(self, config: Mapping[str, Any]) -> bool:
        # Random order within a rank in both designs: "mixed" has one rank, so groups
        # interleave; "sequential" ranks by group, and within a group order effects are
        # spread evenly over the items.
        return True

    # -- the worker's flow -------------------------------------------------------------------
    def start(
        self, content: Mapping[str, Any], now: datetime, config: Mapping[str, Any]
    ) -> StepResult:
        first = attributes_of(config)[0]["name"]
        return StepResult(
            progress={"step": 0, "ratings": {}},
            event={"type": "show", "attribute": first, "at": now.isoformat()},
        )

    def view(
        self, content: Mapping[str, Any], progress: Mapping[str, Any], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        attributes = attributes_of(config)
        step = min(int(progress.get("step", 0)), len(attributes) - 1)
        attribute = attributes[step]
        view: dict[str, Any] = {
            "step": step,
            "n_steps": len(attributes),
            "instructions": config.get("instructions") or "",
            "text": content["text"],
            "attribute": {
                "name": attribute["name"],
                "question": attribute["question"],
                "scale": list(attribute["scale"]),
                "labels": list(attribute["labels"]),
            },
        }
        if attribute["show_prompt"] and "prompt" in content:
            view["prompt"] = content["prompt"]
        if attribute["show_reference"] and "reference" in content:
            view["reference"] = content["reference"]
        return view

    def step(
        self,
        content: Mapping[str, Any],
        progress: Mapping[str, Any],
        action: Mapping[str, Any],
        now: datetime,
        config: Mapping[str, Any],
    ) -> StepResult:
        attributes = attributes_of(config)
        step = int(progress.get("step", 0))
        if step >= len(attributes):
            raise InvalidAction("every question of this text is answered: ask for the next text")
        attribute = attributes[step]
        low, high = attribute["scale"]
        rating = action.get("rating")
        if not isinstance(rating, int) or isinstance(rating, bool) or not low <= rating <= high:
            raise InvalidAction(
                f"'rating' must be a whole number from {low} to {high} for "
                f"'{attribute['name']}', got {rating!r}"
            )
        ratings = {**progress.get("ratings", {}), attribute["name"]: rating}
        event = {
            "type": "rating",
            "attribute": attribute["name"],
            "rating": rating,
            "at": now.isoformat(),
        }
        progress = {**progress, "step": step + 1, "ratings": ratings}
        if step + 1 < len(attributes):
            return StepResult(progress=progress, event=event)
        answer = {
            "ratings": {a["name"]: ratings.get(a["name"]) for a in attributes},
            "scales": scales_of(config),
        }
        return StepResult(progress=progress, event=event, answer=answer)

    def score(self, expected: Mapping[str, Any], answer: Mapping[str, Any]) -> float | None:
        """Gold items: minus the mean absolute error over the rated attributes (0 is best).

        Real and attention items have no right answer to score against, so None.
        """
        wanted = expected.get("expected_ratings")
        if not wanted:
            return None
        ratings = answer.get("ratings") or {}
        errors = [
            abs(float(ratings[name]) - float(value))
            for name, value in wanted.items()
            if ratings.get(name) is not None
        ]
        return -sum(errors) / len(errors) if errors else None

    def passed_attention(self, expected: Mapping[str, Any], answer: Mapping[str, Any]) -> bool:
        """Every attribute got the number the item's text asked for (a missing one fails)."""
        wanted = expected.get("expected_rating")
        ratings = list((answer.get("ratings") or {}).values())
        return wanted is not None and bool(ratings) and all(r == wanted for r in ratings)

    # -- quality control ---------------------------------------------------------------------
    # Within one point of the expected rating: careful raters land there ~90% of the time on
    # a 5-point scale, a uniform guess 52% of the time (13 of the 25 pairs of ratings).
    gold_chance: ClassVar[float] = 0.52
    gold_threshold: ClassVar[float] = threshold_from_chance(gold_chance)
    ordinal_labels: ClassVar[bool] = True
    # Ratings are ordinal: their rounded mean beats any categorical vote (benchmarks/).
    aggregation_methods: ClassVar[tuple[str, ...]] = (
        "majority_vote", "dawid_skene", "mace", "ordinal_mean",
    )  # fmt: skip

    def answer_labels(self, answer: Mapping[str, Any]) -> dict[str, Hashable]:
        ratings = answer.get("ratings") or {}
        return {name: value for name, value in ratings.items() if value is not None}

    def expected_labels(self, expected: Mapping[str, Any]) -> dict[str, Hashable]:
        return dict(expected.get("expected_ratings") or {})

    def expected_from_labels(self, labels: Mapping[str, Hashable]) -> dict[str, Any]:
        return {"expected_ratings": {name: cast(int, value) for name, value in labels.items()}}

    def gold_accuracy(self, expected: Mapping[str, Any], answer: Mapping[str, Any]) -> float | None:
        """The share of expected attributes rated within one point of the expected rating."""
        wanted = self.expected_labels(expected)
        if not wanted:
            return None
        given = self.answer_labels(answer)
        close = 0
        for name, value in wanted.items():
            rating = cast(float | None, given.get(name))
            if rating is not None and abs(float(rating) - float(cast(float, value))) <= 1:
                close += 1
        return close / len(wanted)

    def surface(self, answer: Mapping[str, Any]) -> str | None:
        ratings = answer.get("ratings") or {}
        return ",".join("-" if value is None else str(value) for value in ratings.values())

    def describe_answer(
        self, answer: Mapping[str, Any], content: Mapping[str, Any], config: Mapping[str, Any]
    ) -> str:
        return describe_ratings(answer.get("ratings") or {}, config)

    def describe_expected(
        self, expected: Mapping[str, Any], content: Mapping[str, Any], config: Mapping[str, Any]
    ) -> str | None:
        if expected.get("expected_rating") is not None:  # an attention check's one number
            return f"{expected['expected_rating']} on every question"
        ratings = self.expected_labels(expected)
        return describe_ratings(ratings, config) if ratings else None

    def chars_shown(self, content: Mapping[str, Any], answer: Mapping[str, Any]) -> int:
        return sum(len(str(content.get(part) or "")) for part in ("text", "prompt", "reference"))

    def feedback(
        self,
        content: Mapping[str, Any],
        expected: Mapping[str, Any],
        answer: Mapping[str, Any],
        kind: str,
        config: Mapping[str, Any],
    ) -> dict[str, Any]:
        # The same thanks for every kind: revealing expected ratings would tell workers which
        # items are gold, and a different message would give attention checks away.
        return {"message": THANKS, "ratings": dict(answer.get("ratings") or {})}

    # -- answers gathered elsewhere ----------------------------------------------------------
    def import_answer(
        self, content: Mapping[str, Any], raw: Mapping[str, Any], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        """`{"ratings": {attribute: value}}` (JSONL) or one column per attribute (CSV).

        Values may be whole or half numbers, numeric text, or empty/None for a missing rating
        (an LLM answer without a number is missing, never 0). Attributes not given are missing.
        """
        scales = scales_of(config)
        if "ratings" in raw:
            extra = sorted(set(raw) - {"ratings", "scales"})
            if extra:
                raise InvalidItem(
                    f"unknown answer keys {extra}: give {{'ratings': {{attribute: value}}}}",
                    "answer",
                )
            values = raw["ratings"]
            prefix = "ratings."
            if not isinstance(values, Mapping):
                raise InvalidItem("'ratings' must be an object {attribute: value}", "ratings")
        else:
            values, prefix = raw, ""
        unknown = sorted(set(values) - set(scales))
        if unknown:
            raise InvalidItem(
                f"unknown attribute {unknown[0]!r}: this study rates {', '.join(scales)}",
                f"{prefix}{unknown[0]}",
            )
        ratings = {
            name: _parse_rating(values.get(name), low, high, f"{prefix}{name}")
            for name, (low, high) in scales.items()
        }
        if all(value is None for value in ratings.values()):
            # A row with no rating at all is a blank line of a form, not an answer.
            raise InvalidItem(
                f"no rating given: rate at least one of {', '.join(scales)}", prefix + "ratings"
            )
        return {"ratings": ratings, "scales": scales}

    def simulator(self) -> Simulator:
        return simulate.LikertSimulator()

    # -- analysis and export -----------------------------------------------------------------
    def analysis_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        answer = row.get("answer") or {}
        meta = row.get("meta") or {}
        flags = row.get("qc_flags") or {}
        expected = row.get("expected") or {}
        return {
            "response_id": row["response_id"],
            "worker": row["worker"],
            "rater_group": rater_group(row),
            "item": row["item"],
            "item_group": meta.get("group"),
            "kind": row["kind"],
            "ratings": dict(answer.get("ratings") or {}),
            # The scale travels with the answer, so exports and reports need no study config.
            "scales": dict(answer.get("scales") or {}),
            "expected_rating": expected.get("expected_rating"),
            "attention_passed": flags.get("attention_passed"),
            "score": row.get("score"),
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
        return analysis.analyze(rows, excluded_workers)

    def render_report(self, data: dict[str, Any], out_dir: Path, title: str) -> str:
        return report.render_report(data, out_dir, title)

    def export(self, rows: list[dict[str, Any]], fmt: str, handle: TextIO) -> int:
        """One row per rating (a missing rating is a row with an empty rating)."""
        if fmt not in self.export_formats:
            raise InvalidConfig(f"unknown export format {fmt!r}: use one of {self.export_formats}")
        writer = csv.DictWriter(handle, fieldnames=list(EXPORT_COLUMNS)) if fmt == "csv" else None
        if writer is not None:
            writer.writeheader()
        written = 0
        for line in rating_rows(rows):
            if writer is not None:
                writer.writerow(line)
            else:
                handle.write(json.dumps(line, sort_keys=True) + "\n")
            written += 1
        return written


def rating_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Analysis rows (one per response) as export rows (one per attribute rated)."""
    lines = []
    for row in rows:
        scales = row.get("scales") or {}
        for attribute, rating in (row.get("ratings") or {}).items():
            low, high = scales.get(attribute) or (None, None)
            lines.append(
                {
                    "response_id": row["response_id"],
                    "worker": row["worker"],
                    "rater_group": row.get("rater_group"),
                    "item": row["item"],
                    "item_group": row.get("item_group"),
                    "kind": row["kind"],
                    "attribute": attribute,
                    "rating": rating,
                    "scale_low": low,
                    "scale_high": high,
                    "created_at": row.get("created_at"),
                    "source": row.get("source"),
                }
            )
    return lines
