"""Prompts that give a language model what a human rater sees on the Likert page, as text.

The page (tasks/likert/templates/task.html) shows, for one attribute at a time: the study's
instructions, the prompt box (only where the attribute shows the prompt), "Title 1" (the
reference, only where the attribute shows it), the text (labelled "Title 2" next to a
reference), the question, and the scale's buttons between its two endpoint labels. The
prompt is built from the same server-side view (LikertHit.view), so the model can never be
shown something people are not (the item's group, an expected rating).

Two variants of Chiang & Lee (2023): a persona line before the instructions, and a line
after the question asking the model to explain its decision (after the rating, so the
first number of the answer stays the rating).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from crowd.exceptions import InvalidConfig
from tasks.likert.hit import LikertHit, attributes_of

EXPLAIN_LINE = "Give your rating first, then explain your decision."


@dataclass(frozen=True)
class RatingPrompt:
    """The prompt for one item and one attribute, with the scale its answer is parsed on."""

    item: str
    attribute: str
    low: int
    high: int
    text: str


def scale_line(scale: Iterable[int], labels: Iterable[str]) -> str:
    """The scale as a sentence: "Answer on a scale from 1 (not at all) to 5 (perfectly)."."""
    low, high = scale
    low_label, high_label = (label.strip() for label in labels)
    low_part = f"{low} ({low_label})" if low_label else str(low)
    high_part = f"{high} ({high_label})" if high_label else str(high)
    return f"Answer on a scale from {low_part} to {high_part}."


def prompt_from_view(
    view: Mapping[str, Any], *, persona: str | None = None, explain: bool = False
) -> str:
    """The prompt for one step of the Likert page, given the view the page renders."""
    lines: list[str] = []
    if persona and persona.strip():
        lines += [persona.strip(), ""]
    instructions = str(view.get("instructions") or "").strip()
    if instructions:
        lines += [instructions, ""]
    if view.get("prompt"):
        lines.append(f"Prompt: {view['prompt']}")
    if view.get("reference"):
        # The page's labels: the reference is "Title 1", the text "Title 2".
        lines.append(f"Title 1: {view['reference']}")
        lines.append(f"Title 2: {view['text']}")
    else:
        lines.append(f"Text: {view['text']}")
    attribute = view["attribute"]
    lines += ["", str(attribute["question"]), scale_line(attribute["scale"], attribute["labels"])]
    if explain:
        lines.append(EXPLAIN_LINE)
    return "\n".join(lines)


def build_prompt(
    content: Mapping[str, Any],
    config: Mapping[str, Any],
    attribute: str,
    *,
    item: str = "",
    persona: str | None = None,
    explain: bool = False,
) -> RatingPrompt:
    """The prompt for one item's content and one attribute of a Likert study config."""
    attributes = attributes_of(config)
    names = [entry["name"] for entry in attributes]
    if attribute not in names:
        raise InvalidConfig(
            f"the study rates {', '.join(names)}, not {attribute!r}: pick one of those"
        )
    step = names.index(attribute)
    view = LikertHit().view(content, {"step": step}, config)
    low, high = attributes[step]["scale"]
    text = prompt_from_view(view, persona=persona, explain=explain)
    return RatingPrompt(item=item, attribute=attribute, low=int(low), high=int(high), text=text)


def rating_prompts(
    config: Mapping[str, Any],
    items: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    persona: str | None = None,
    explain: bool = False,
) -> list[RatingPrompt]:
    """One prompt per (item, attribute), items in the given order, attributes in the study's."""
    names = [entry["name"] for entry in attributes_of(config)]
    return [
        build_prompt(content, config, name, item=item_id, persona=persona, explain=explain)
        for item_id, content in items
        for name in names
    ]
