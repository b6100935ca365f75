"""One contract test over every registered HIT type and provider."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from crowd.exceptions import InvalidItem, RegistryError
from crowd.providers import PROVIDERS, Provider, StudyRef
from crowd.registry import Registry
from tasks import HIT_TYPES, HitType, load_builtin

load_builtin()
SAMPLES = Path(__file__).resolve().parents[1] / "tasks"


def test_registry_refuses_duplicates_and_unknowns() -> None:
    registry: Registry[int] = Registry("thing")
    registry.register("a", 1)
    with pytest.raises(RegistryError, match="already registered"):
        registry.register("a", 2)
    with pytest.raises(RegistryError, match="known: a"):
        registry.get("b")


@pytest.mark.parametrize("name", list(HIT_TYPES))
def test_hit_type_contract(name: str) -> None:
    hit = HIT_TYPES.get(name)
    assert isinstance(hit, HitType) and hit.name == name
    assert (SAMPLES / name / "templates" / hit.template.split("/", 1)[1]).exists()
    samples = sorted((SAMPLES / name / "samples").glob("*.jsonl"))
    assert samples, f"{name} ships sample items"
    records = [json.loads(line) for path in samples for line in path.read_text().splitlines()]
    now = datetime.now(UTC)
    simulator = hit.simulator()
    truths = simulator.truths(records)
    for record in records:
        spec = hit.validate_item(record)
        first = hit.start(spec.content, now, hit.validate_config(None).to_config())
        view = hit.view(spec.content, first.progress, hit.validate_config(None).to_config())
        # The page never sees the expected answer before the guess.
        assert not set(spec.expected) & set(view), "view leaks expected-answer keys"
        assert json.dumps(view)  # views are JSON
        # Simulated workers find each item's truth from what the page shows.
        assert simulator.key(view) in truths
    with pytest.raises(InvalidItem):
        hit.validate_item({"id": "x"})
    assert hit.validate_config(None).annotations_per_item >= 1


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_provider_contract(name: str) -> None:
    provider = PROVIDERS.get(name)
    assert isinstance(provider, Provider) and provider.name == name
    publication = provider.publish(StudyRef(1, "s", "boundary", {}), "http://host")
    assert publication.provider == name
    assert all(url.startswith("http://host/") for url in publication.urls.values())
