"""A refused Scale task names the field of the request the client sent (`fields[0].field_id`,
`attachments[0].content`, `choices[1]`), never the path of the form item it becomes; through
the official scaleapi client over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from scaleapi import ScaleClient
from scaleapi.exceptions import ScaleInvalidRequest
from scaleapi.tasks import TaskType

CATEGORY: dict[str, Any] = {
    "type": "category", "field_id": "verdict", "title": "Verdict?",
    "choices": [{"label": "Yes", "value": "yes"}, {"label": "No", "value": "no"}],
}  # fmt: skip
TEXT: dict[str, Any] = {"type": "text", "field_id": "why", "title": "Why?"}
ATTACHMENT = {"type": "text", "content": "Some text."}


@pytest.fixture
def scale(live_server: Any, api_key: str) -> ScaleClient:
    return ScaleClient(api_key, api_instance_url=f"{live_server.url}/v1")


def refusal(call: Any, **body: Any) -> str:
    """The error message scaleapi raises for a refused request."""
    with pytest.raises(ScaleInvalidRequest) as caught:
        call(**body)
    return str(caught.value)


def test_a_refused_textcollection_task_names_the_field_the_client_sent(
    scale: ScaleClient,
) -> None:
    scale.create_project("forms", TaskType.TextCollection)

    def create(**change: Any) -> str:
        body = {"project": "forms", "instruction": "Read it, then answer.",
                "attachments": [ATTACHMENT], "fields": [CATEGORY, TEXT], **change}  # fmt: skip
        return refusal(scale.create_task, task_type=TaskType.TextCollection, **body)

    # Refused by the request's own model: field ids as the form takes them, choice values
    # that a multi-choice label (values joined by "|") could not tell apart.
    for field_id in ("why ", " why", "wh\x07y", "wh\ny"):
        assert "fields[1].field_id" in create(fields=[CATEGORY, {**TEXT, "field_id": field_id}])
    two_values = {
        **CATEGORY,
        "choices": [CATEGORY["choices"][0], {"label": "No", "value": "no|never"}],
    }
    message = create(fields=[TEXT, two_values])
    assert "fields[1].choices[1].value" in message and "|" in message
    # Refused when the task becomes a form item: named as sent, the instruction (shown as
    # the first attachment) not counted.
    image = {"type": "image", "content": "not a URL"}
    message = create(attachments=[ATTACHMENT, image])
    assert "attachments[1].content" in message and "item" not in message
    assert "attachments[0].content" in create(instruction=None, attachments=[image])
    short = {**TEXT, "min_characters": 20, "max_characters": 10}
    message = create(fields=[CATEGORY, short])
    assert "fields[1].min_characters" in message and "item" not in message
    alike = {**CATEGORY, "choices": [{"label": "One", "value": 1}, {"label": "1", "value": "1"}]}
    message = create(fields=[TEXT, alike])
    assert "fields[1].choices" in message and "item" not in message
    few = {**CATEGORY, "min_choices": 2, "max_choices": 1}
    assert "fields[0].min_choices" in create(fields=[few])


def test_a_refused_comparison_task_names_the_field_the_client_sent(scale: ScaleClient) -> None:
    scale.create_project("jokes", TaskType.Comparison)

    def create(**change: Any) -> str:
        body = {"project": "jokes", "instruction": "Which is funnier?",
                "attachments": ["a joke", "another joke"], "choices": ["first", "second"],
                **change}  # fmt: skip
        return refusal(scale.create_task, task_type=TaskType.Comparison, **body)

    message = create(attachment_type="image", attachments=["https://example.org/a.png", "x"])
    assert "attachments[1]" in message and "item" not in message
    # An instruction too long for a title is shown as the first attachment: not counted.
    message = create(instruction="Read. " * 100, attachment_type="image",
                     attachments=["x", "https://example.org/b.png"])  # fmt: skip
    assert "attachments[0]" in message and "item" not in message
    message = create(fields={"why ": "Why?"})
    assert "fields.why " in message and "no spaces at either end" in message
    message = create(choices=["first", "a|b"])
    assert "choices[1]" in message and "item" not in message
