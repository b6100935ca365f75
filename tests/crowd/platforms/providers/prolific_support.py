"""What the Prolific API tests share: the constants, the fixtures and study helpers.

The fixtures are registered as ``server`` and ``client``; a test module imports
``server_fixture`` and ``client_fixture`` to use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from crowd.platforms.providers import prolific_checks as prolific
from crowd.platforms.providers.prolific_api import ProlificClient
from tests.crowd.platforms.providers.prolific_server import ProlificServer

TOKEN = "test-token"
TASK_URL = "http://127.0.0.1:5000/work/7?kind=boundary#top"
SECRET = "a-secret-of-at-least-sixteen-bytes"
STUDY_CODE = "C1A2B3C4"
REASON = (
    "Your answers to the three attention questions on the first page did not match the "
    "passages shown, so this submission cannot be used for the study."
)


@pytest.fixture(name="server")
def server_fixture() -> Iterator[ProlificServer]:
    with ProlificServer(token=TOKEN, balance=100_000) as running:
        yield running


@pytest.fixture(name="client")
def client_fixture(server: ProlificServer) -> ProlificClient:
    return ProlificClient(TOKEN, base_url=server.base_url, backoff_s=0)


def create(client: ProlificClient, places: int = 3, reward: int = 150) -> dict[str, Any]:
    return client.create_study(
        name="Spot the machine-written sentence",
        internal_name="study-7",
        description="Read a passage and say where a machine took over.",
        external_study_url=prolific.external_url(TASK_URL, allow_http=True),
        completion_code=STUDY_CODE,
        total_available_places=places,
        estimated_completion_time=10,
        reward=reward,
        device_compatibility=["desktop"],
        allow_http=True,
    )


def publish(client: ProlificClient, places: int = 3) -> str:
    study_id = str(create(client, places)["id"])
    client.publish_study(study_id)
    return study_id


def done(server: ProlificServer, study_id: str, participant: str | None = None) -> str:
    """A participant takes part and comes back with their own code; the submission id."""
    submission_id, session_id = server.start_submission(study_id, participant)
    server.complete(submission_id, prolific.completion_code(SECRET, session_id))
    return submission_id
