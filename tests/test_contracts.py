"""One contract test over every registered HIT type and provider."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from crowd.exceptions import InvalidItem, RegistryError, ValidationError
from crowd.platforms.providers import PROVIDERS, Provider, StudyRef
from crowd.platforms.providers.base import ActionTarget, Binding
from crowd.registry import Registry
from crowd.settings import Settings
from tasks import HIT_TYPES, HitType, load_builtin
from tests.crowd.platforms.providers.mturk_server import MTurkServer
from tests.crowd.platforms.providers.prolific_server import ProlificServer

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
def test_provider_contract(name: str, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every provider publishes, binds (or refuses) our page's visitors, hands work back and
    takes the platform calls; platforms are driven against their local stand-ins."""
    provider = PROVIDERS.get(name)
    assert isinstance(provider, Provider) and provider.name == name
    study = StudyRef(1, "s", "boundary", {"annotations_per_item": 1}, work_slots=4, title="t")
    if not provider.remote:
        assert provider.validate_options({}) == {}
        with pytest.raises(ValidationError):
            provider.validate_options({"reward": "1"})
        publication = provider.publish(settings, study, "http://host", {}, "token")
        assert publication.provider == name and not publication.tasks
        assert all(url.startswith("http://host/") for url in publication.urls.values())
        assert provider.perform(settings, "approve", ActionTarget("w"), {}) == {}
        return
    with PLATFORMS[name]() as stand_in:
        settings = stand_in.configure(settings, monkeypatch)
        with pytest.raises(ValidationError):
            provider.validate_options({})  # a platform needs a reward
        options = provider.validate_options(stand_in.options)
        publication = provider.publish(settings, study, "https://host", options, "crowd-1-x-1")
        assert publication.tasks and all(task.places >= 1 for task in publication.tasks)
        assert all(
            url.startswith(("http://host/", "https://")) for url in publication.urls.values()
        )
        assert provider.bind({}, settings) is None  # a preview
        task_id = publication.tasks[0].remote_id
        args = stand_in.arrive(task_id)
        binding = provider.bind(args, settings)
        assert binding is not None and binding.task_remote_id == task_id
        handover = provider.completion(settings, binding, "CODE1234")
        assert handover["kind"] in ("form", "code")
        stand_in.submit(binding, handover)
        listed = provider.sync(settings, publication.remote, [task_id])
        mine = [s for s in listed if s.remote_id == binding.session_remote_id]
        assert [s.state for s in mine] == ["submitted"]
        # What a block needs of the experimenter's account is set up before it (Prolific's
        # exclusion group); the actions job does that for providers that keep an account.
        workspace = provider.account_workspace(settings, options)
        account = provider.prepare_account(settings, {}, workspace, "contract", [])
        target = ActionTarget(
            binding.worker_external_id, binding.session_remote_id, mine[0].submission_id,
            task_id, publication=publication.remote, accounts={workspace: account},
        )  # fmt: skip
        provider.perform(settings, "approve", target, {})
        ledger: dict[str, str] = {}
        bonus = {"amount": "0.30", "reason": "good", "token": "bonus-1"}
        provider.perform(settings, "bonus", target, bonus, ledger)
        provider.perform(settings, "bonus", target, bonus, ledger)  # a retry pays nothing
        assert stand_in.bonuses_paid() == 1
        provider.perform(settings, "block", target, {"reason": "spam"})
        listed = provider.sync(settings, publication.remote, [task_id])
        assert [s.state for s in listed if s.remote_id == binding.session_remote_id] == ["approved"]


class MTurkStandIn(MTurkServer):
    options = {"reward": "0.10", "hits": 1, "assignments_per_hit": 1}

    def configure(self, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTESTING")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-for-tests")
        return settings.with_changes(
            mturk_endpoint_url=self.endpoint_url, mturk_submit_origins=(self.endpoint_url,)
        )

    def arrive(self, task_id: str) -> dict[str, str]:
        query = self.page_url(self.accept(task_id, "A1CONTRACT")).split("?", 1)[1]
        return {k: v[-1] for k, v in parse_qs(query).items()}

    def submit(self, binding: Binding, handover: dict[str, Any]) -> None:
        self.external_submit({**handover["fields"], "crowd_code": "CODE1234"})

    def bonuses_paid(self) -> int:
        return len(self.bonuses())


class ProlificStandIn(ProlificServer):
    options = {"reward": "1.00", "places": 1}

    def configure(self, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
        return settings.with_changes(prolific_api_url=self.base_url, prolific_token=self.token)

    def arrive(self, task_id: str) -> dict[str, str]:
        submission, _ = self.start_submission(task_id)
        query = self.participant_url(submission).split("?", 1)[1]
        return {k: v[-1] for k, v in parse_qs(query).items()}

    def submit(self, binding: Binding, handover: dict[str, Any]) -> None:
        self.complete(binding.session_remote_id, handover["code"])

    def bonuses_paid(self) -> int:
        return len([p for p in self.payments if p.kind == "bonus"])


PLATFORMS: dict[str, Callable[[], Any]] = {"mturk": MTurkStandIn, "prolific": ProlificStandIn}


def test_every_platform_provider_has_a_stand_in() -> None:
    assert {name for name in PROVIDERS if PROVIDERS.get(name).remote} == set(PLATFORMS)
