"""How simulated workers fill in a form, given each item's true answers.

An item's truth is its record's `meta.truth` ({field_id: value}, in the answer's shape: a
rating, a category's value or values, a text, a rank's indexes best first); gold and
training items fall back on their `expected`. Workers who read the instructions (careful,
noisy) answer an attention check as it asks (its `expected`); the others do not.

- careful: the truth, a rating now and then one point off;
- noisy: ratings with a wide spread, a wrong category or a swapped pair in a rank fairly often;
- random_clicker: any valid answer, without reading (skips optional fields half the time);
- attention_failer: answers real items like a careful worker but never reads what an
  attention check asks.
The page's rules hold for every kind (only shown fields, min/max choices, lengths, a rank
sent as positions in the order the view shows its things), so every simulated answer goes
through the worker API as a page's would.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tasks.base import Simulator
from tasks.form.answers import condition_met
from tasks.form.config import is_int, value_text
from tasks.form.items import rank_size, validate_attachments


@dataclass(frozen=True)
class Behaviour:
    rating_sd: float
    slip: float  # chance of a wrong category, or of one swapped pair in a rank
    reads: bool = True
    random: bool = False


BEHAVIOURS: dict[str, Behaviour] = {
    "careful": Behaviour(rating_sd=0.35, slip=0.05),
    "noisy": Behaviour(rating_sd=1.1, slip=0.35),
    "random_clicker": Behaviour(rating_sd=0.0, slip=1.0, reads=False, random=True),
    "attention_failer": Behaviour(rating_sd=0.35, slip=0.05, reads=False),
}
EXACT = Behaviour(rating_sd=0.0, slip=0.0)  # what a worker who reads gives an attention check
FILLER = "The text reads clearly and says what it means."


@dataclass(frozen=True)
class Truth:
    """What a simulated worker knows of an item: true answers and what a check asks."""

    values: Mapping[str, Any] = field(default_factory=dict)
    attention: Mapping[str, Any] = field(default_factory=dict)


def shown_positions(fields: list[Mapping[str, Any]], values: Mapping[str, Any]) -> dict[str, Any]:
    """The answers as the page sends them: a rank (declared indexes best first) as positions
    in the order the view showed its things."""
    sent = dict(values)
    for spec in fields:
        order = spec.get("order")
        if spec["type"] == "rank" and isinstance(sent.get(spec["id"]), list) and order:
            sent[spec["id"]] = [order.index(index) for index in sent[spec["id"]]]
    return sent


def item_key(contents: list[str]) -> str:
    """Identifies an item by its attachments as the page shows them (HTML sanitised)."""
    return "\x1e".join(content.strip() for content in contents)


class FormSimulator(Simulator):
    kinds: ClassVar[tuple[str, ...]] = tuple(BEHAVIOURS)
    skimmers: ClassVar[frozenset[str]] = frozenset({"random_clicker"})

    def truths(self, records: list[dict[str, Any]]) -> dict[str, Truth]:
        result = {}
        for record in records:
            attachments = validate_attachments(record, "item")
            meta = record.get("meta") or {}
            expected = dict(record.get("expected") or {})
            values = dict(meta.get("truth") or {})
            attention: dict[str, Any] = {}
            if record.get("kind") == "attention":
                attention = expected
            else:
                values = {**expected, **values}
            key = item_key([str(a["content"]) for a in attachments])
            result[key] = Truth(values, attention)
        return result

    def key(self, task: Mapping[str, Any]) -> str:
        return item_key([str(a["content"]) for a in task["attachments"]])

    def act(
        self, kind: str, rng: random.Random, task: Mapping[str, Any], truth: Truth
    ) -> dict[str, Any]:
        behaviour = BEHAVIOURS[kind]
        # Whoever reads an attention check gives exactly what it asks; the others guess.
        asked = truth.attention if behaviour.reads else {}
        attachments = len(task["attachments"])
        values: dict[str, Any] = {}
        for spec in task["fields"]:
            name = spec["id"]
            if spec.get("show_if") is not None and not condition_met(spec["show_if"], values):
                continue
            if name in asked:
                values[name] = self.answer(spec, asked[name], EXACT, rng, attachments)
                continue
            if behaviour.random and not spec["required"] and rng.random() < 0.5:
                continue
            guessing = behaviour.random or (truth.attention and not behaviour.reads)
            wanted = None if guessing else truth.values.get(name)
            value = self.answer(spec, wanted, behaviour, rng, attachments)
            if value is not None:
                values[name] = value
        return {"fields": shown_positions(task["fields"], values)}

    def answer(
        self,
        spec: Mapping[str, Any],
        wanted: Any,
        behaviour: Behaviour,
        rng: random.Random,
        attachments: int,
    ) -> Any:
        """One field's answer: the truth as this kind of worker gives it, or a guess."""
        kind = spec["type"]
        if kind == "rating":
            low, high = spec["scale"]
            if not is_int(wanted):
                return rng.randint(low, high)
            noisy = wanted + rng.gauss(0.0, behaviour.rating_sd) if behaviour.rating_sd else wanted
            return min(high, max(low, round(noisy)))
        if kind == "category":
            return self._category(spec, wanted, behaviour, rng)
        if kind == "text":
            text = wanted if isinstance(wanted, str) and wanted.strip() else FILLER
            if behaviour.random:
                text = rng.choice(["ok", "fine", "good text", "no idea", FILLER])
            text = text[: spec["max_characters"]]
            while len(text.strip()) < spec["min_characters"]:
                text = (text + " " + FILLER)[: spec["max_characters"]]
            return text
        size = rank_size(spec, attachments)
        order = (
            list(wanted)
            if isinstance(wanted, list) and sorted(wanted) == list(range(size))
            else rng.sample(range(size), size)
        )
        if rng.random() < behaviour.slip and size > 1 and not behaviour.random:
            at = rng.randrange(size - 1)
            order[at], order[at + 1] = order[at + 1], order[at]
        return order

    def _category(
        self, spec: Mapping[str, Any], wanted: Any, behaviour: Behaviour, rng: random.Random
    ) -> list[str]:
        values = [choice["value"] for choice in spec["choices"]]
        low, high = spec["min_choices"], spec["max_choices"]
        if wanted is not None:
            chosen = [value_text(v) for v in (wanted if isinstance(wanted, list) else [wanted])]
            chosen = [v for v in values if v in chosen]
        else:
            chosen = []
        if wanted is None or rng.random() < behaviour.slip or not low <= len(chosen) <= high:
            count = rng.randint(max(low, 1), high)
            chosen = rng.sample(values, count)
        return [v for v in values if v in chosen]
