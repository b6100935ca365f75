"""Built-in Likert study templates: the instructions and questions of Chiang & Lee (2023).

"Can Large Language Models Be an Alternative to Human Evaluations?" (ACL 2023) asked English
teachers to rate story fragments (written for a WritingPrompts prompt by a person or by
GPT-2) on four attributes, and news titles changed by adversarial attacks on fluency and
meaning preservation. The wording below follows the paper's appendix, shortened.
(tasks/likert/templates/ is the Jinja folder of the worker page, hence this module's name.)
"""

from __future__ import annotations

from typing import Any

STORY_INSTRUCTIONS = (
    "The goal of this task is to rate a story fragment. Please take the time to read the "
    "whole fragment and make sure you understand it before you answer. You will answer one "
    "question at a time, each on a scale from 1 (the lowest) to 5 (the highest). We check "
    "some answers, and ratings from workers who clearly do not read the text are rejected."
)

ATTACK_INSTRUCTIONS = (
    "The goal of this task is to rate news titles. Please read each title carefully before "
    "you answer. You will answer one question at a time on a scale from 1 to 5. We check "
    "some answers, and ratings from workers who clearly do not read the text are rejected."
)


def _attribute(
    name: str,
    question: str,
    labels: tuple[str, str],
    *,
    show_prompt: bool = False,
    show_reference: bool = False,
) -> dict[str, Any]:
    return {
        "name": name,
        "question": question,
        "scale": [1, 5],
        "labels": list(labels),
        "show_prompt": show_prompt,
        "show_reference": show_reference,
    }


TEMPLATES: dict[str, dict[str, Any]] = {
    "story": {
        "instructions": STORY_INSTRUCTIONS,
        "attributes": [
            _attribute(
                "grammaticality",
                "How grammatically correct is the text of the story fragment?",
                ("not at all", "perfectly"),
            ),
            _attribute(
                "cohesiveness",
                "How well do the sentences in the story fragment fit together?",
                ("not at all", "perfectly"),
            ),
            _attribute(
                "likability",
                "How enjoyable do you find the story fragment?",
                ("not at all", "very much"),
            ),
            # The prompt is shown for this question only, as in the paper: the other three
            # attributes are judged on the fragment alone.
            _attribute(
                "relevance",
                "Now read the prompt the story fragment was written for. How relevant is the "
                "story fragment to the prompt?",
                ("not at all", "completely"),
                show_prompt=True,
            ),
        ],
    },
    "attack": {
        "instructions": ATTACK_INSTRUCTIONS,
        "attributes": [
            _attribute(
                "fluency",
                "How natural and fluent is the text of the news title?",
                ("very unnatural", "very natural"),
            ),
            # Title 1 is the item's `reference` (the original title), title 2 its `text`
            # (the attacked one).
            _attribute(
                "meaning_preservation",
                "Do you agree that the meaning (the semantics) of news title 1 is preserved in "
                "news title 2?",
                ("strongly disagree", "strongly agree"),
                show_reference=True,
            ),
        ],
    },
}
