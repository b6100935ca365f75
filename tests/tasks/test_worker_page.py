"""A study's public page (tasks.worker_page): the `worker_page` config every HIT type takes."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from crowd.exceptions import InvalidConfig
from tasks import get_hit_type, load_builtin

PAGE = {
    "title": "  Spot the machine  ",
    "description": "A short reading game.\nAbout five minutes.",
    "consent": "We keep your answers for research.",
    "instructions": "Read carefully.",
    "examples": [
        "The cat sat on the mat.",
        {"text": "It was a dark night.", "answer": "human", "why": "nothing odd yet"},
    ],
}


@pytest.mark.parametrize("name", ["boundary", "likert", "comparison", "taboo", "form"])
def test_every_type_takes_a_public_page_and_keeps_it(name: str) -> None:
    load_builtin()
    hit = get_hit_type(name)
    extra: dict[str, Any] = {"taboo": {"judge": None}} if name == "taboo" else {}
    config = hit.validate_config({**extra, "worker_page": PAGE}).to_config()
    assert config["worker_page"] == {
        "title": "Spot the machine",
        "description": "A short reading game.\nAbout five minutes.",
        "consent": "We keep your answers for research.",
        "instructions": "Read carefully.",
        "examples": [
            {"text": "The cat sat on the mat."},
            {"text": "It was a dark night.", "answer": "human", "why": "nothing odd yet"},
        ],
    }
    # A stored config validates to itself (imports validate it again).
    assert hit.validate_config(config).to_config() == config
    assert hit.public_page(config)["title"] == "Spot the machine"


def test_without_one_the_page_shows_the_types_title_and_instructions() -> None:
    comparison = get_hit_type("comparison")
    config = comparison.validate_config({"template": "sentiment"}).to_config()
    assert "worker_page" not in config
    page = comparison.public_page(config)
    assert page == {
        "title": comparison.title,
        "description": "",
        "consent": None,
        "instructions": page["instructions"],
        "examples": [],
    }
    assert "most positive and happy" in page["instructions"]
    likert = get_hit_type("likert")
    assert likert.public_page(likert.validate_config(None).to_config())["instructions"]
    # Only a title: the rest keeps its defaults; empty consent is no consent step.
    boundary = get_hit_type("boundary")
    config = boundary.validate_config({"worker_page": {"title": "T", "consent": " "}}).to_config()
    assert boundary.public_page(config) == {
        "title": "T", "description": "", "consent": None, "instructions": "", "examples": [],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("page", "where"),
    [
        ("a title", "worker_page"),
        ({"name": "internal"}, "worker_page.name"),
        ({"title": ""}, "worker_page.title"),
        ({"title": "x" * 201}, "worker_page.title"),
        ({"title": 7}, "worker_page.title"),
        ({"description": "x" * 2001}, "worker_page.description"),
        ({"consent": ["yes"]}, "worker_page.consent"),
        ({"instructions": "x" * 10_001}, "worker_page.instructions"),
        ({"examples": "one"}, "worker_page.examples"),
        ({"examples": ["e"] * 11}, "worker_page.examples"),
        ({"examples": ["fine", 3]}, "worker_page.examples[1]"),
        ({"examples": [{"answer": "human"}]}, "worker_page.examples[0].text"),
        ({"examples": [{"text": "t", "label": "x"}]}, "worker_page.examples[0].label"),
        ({"examples": [{"text": "x" * 1001}]}, "worker_page.examples[0].text"),
        ({"examples": [{"text": "t", "answer": "x" * 301}]}, "worker_page.examples[0].answer"),
    ],
)
def test_a_bad_public_page_is_refused_naming_the_field(page: Any, where: str) -> None:
    with pytest.raises(InvalidConfig) as refused:
        get_hit_type("boundary").validate_config({"worker_page": page})
    assert refused.value.where == where


def test_the_api_refuses_a_bad_public_page_with_a_422_naming_the_field(
    client: FlaskClient, auth: dict[str, str]
) -> None:
    body = {"name": "internal name", "hit_type": "likert",
            "config": {"worker_page": {"title": "Rate stories", "colour": "red"}}}  # fmt: skip
    reply = client.post("/api/studies", json=body, headers=auth)
    assert reply.status_code == 422
    assert reply.get_json()["field"] == "worker_page.colour"
    assert "title, description, consent, instructions, examples" in reply.get_json()["error"]
