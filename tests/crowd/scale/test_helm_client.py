"""HELM's human-evaluation client, unmodified, against our Scale-compatible API.

`crfm-helm`'s ScaleCritiqueClient (installed by the Makefile without HELM's heavy
requirements, which the client never imports) creates a TextCollection project and a batch,
sends one task per critique request with a unique_id, and reads `task.response["responses"]`
back: one dict per respondent, keyed by question name, a multiple-choice answer as a list
holding the chosen value as text. The only thing the test changes is where the official
`scaleapi` client sends its requests (HELM passes no URL, so the client's default base URL
points at our server). Simulated workers answer the forms through the worker pages' HTTP API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests
import scaleapi.api
from helm.common.cache import SqliteCacheConfig
from helm.common.critique_request import (
    CritiqueQuestionTemplate,
    CritiqueRequest,
    CritiqueTaskTemplate,
    QuestionType,
)
from helm.proxy.critique import scale_critique_client
from helm.proxy.critique.scale_critique_client import ScaleCritiqueClient
from scaleapi import ScaleClient

from crowd.platforms.providers.sim import SimulatedCrowd
from crowd.queue.runner import run_worker
from crowd.settings import Settings
from crowd.storage import Database

PROJECT = "helm-critique"
OPTIONS = ["Very poor", "Poor", "Fair", "Good", "Excellent"]
SUMMARIES = [
    "The council approved the new bus routes after a year of public meetings.",
    "Scientists found that the lake's water level fell by two metres since 1990.",
    "The museum will stay open late on Fridays through the summer.",
    "A local baker won the regional prize for her rye bread.",
]
TEMPLATE = CritiqueTaskTemplate(
    name="helm-summaries-v1",
    instructions="Read the summary and answer the questions.\n\nSummary: {{summary}}",
    num_respondents=3,
    questions=[
        CritiqueQuestionTemplate(
            name="Faithfulness",
            question_type=QuestionType.MULTIPLE_CHOICE,
            text="Does the summary say only what the article says?",
            options=OPTIONS,
        ),
        CritiqueQuestionTemplate(
            name="Fluency",
            question_type=QuestionType.MULTIPLE_CHOICE,
            text="How fluent is the summary?",
            options=OPTIONS,
        ),
        CritiqueQuestionTemplate(
            name="Keyword Feedback",
            question_type=QuestionType.FREE_RESPONSE,
            text="Anything wrong with it, in a few words?",
            options=[],
        ),
    ],
)


def _truth(index: int) -> dict[str, Any]:
    """What careful simulated workers answer for a summary: values are the choice indexes
    HELM sends (0..4), as text."""
    return {"Faithfulness": [str(4 - index % 2)], "Fluency": [str(3)],
            "Keyword Feedback": f"fine summary {index}"}  # fmt: skip


def _records(scale: ScaleClient) -> list[dict[str, Any]]:
    """The items as the simulated workers know them: what the page shows (the task's
    instruction first, then its attachments) and the truth of the summary it holds."""
    records = []
    for task in scale.get_tasks(project_name=PROJECT):
        attachments = task.params["attachments"]
        index = next(i for i, text in enumerate(SUMMARIES) if text in attachments[-1]["content"])
        shown = [{"type": "text", "content": task.instruction}, *attachments]
        records.append({"attachments": shown, "meta": {"truth": _truth(index)}})
    return records


def _fresh_helm_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the projects and batches HELM's module remembers, as a new process would."""
    monkeypatch.setattr(scale_critique_client, "_scale_projects", set())
    monkeypatch.setattr(scale_critique_client, "_scale_batches", set())


@pytest.mark.slow
def test_helm_reads_every_respondents_answers(
    live_server: Any,
    api_key: str,
    settings: Settings,
    db: Database,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scaleapi.api, "SCALE_API_BASE_URL_V1", f"{live_server.url}/v1")
    _fresh_helm_process(monkeypatch)
    helm = ScaleCritiqueClient(api_key, SqliteCacheConfig(str(tmp_path / "helm.sqlite")), PROJECT)
    critiques = [CritiqueRequest(TEMPLATE, {"summary": text}) for text in SUMMARIES]

    # The first call creates each task; nobody has answered yet.
    assert [helm.make_critique_request(c).responses for c in critiques] == [[]] * len(SUMMARIES)
    helm.finalize_batch(TEMPLATE.name)

    scale = ScaleClient(api_key, api_instance_url=f"{live_server.url}/v1")
    project = scale.get_project(PROJECT)
    assert project.type == "textcollection"
    study_id = int(project.as_dict()["study_id"])
    published = requests.post(
        f"{live_server.url}/api/studies/{study_id}/publish",
        json={"providers": ["sim"]},
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=30,
    )
    assert published.status_code == 200, published.text
    crowd = SimulatedCrowd(live_server.url, api_key, study_id, "form", _records(scale),
                           {"careful": 3}, seed=3, items_per_worker=len(SUMMARIES))  # fmt: skip
    result = crowd.run(threads=3)
    assert result.errors == []
    run_worker(settings, burst=True)

    results = [helm.make_critique_request(c) for c in critiques]
    for index, outcome in enumerate(results):
        assert len(outcome.responses) == TEMPLATE.num_respondents
        truth = _truth(index)
        for response in outcome.responses:
            assert set(response.answers) == {q.name for q in TEMPLATE.questions}
            # HELM turned the chosen value back into its option's label.
            assert response.answers["Faithfulness"] in OPTIONS
            assert response.answers["Fluency"] in OPTIONS
            assert isinstance(response.answers["Keyword Feedback"], str)
            assert response.answers["Keyword Feedback"].strip()
        majority = [r.answers["Faithfulness"] for r in outcome.responses]
        assert max(majority.count(label) for label in set(majority)) >= 2
        assert OPTIONS[int(truth["Faithfulness"][0])] in majority

    # A new HELM process with its cache deleted: the project, the batch and every task exist
    # already (409s), HELM fetches each task by its unique_id and reads the same answers.
    _fresh_helm_process(monkeypatch)
    again = ScaleCritiqueClient(api_key, SqliteCacheConfig(str(tmp_path / "new.sqlite")), PROJECT)
    assert [again.make_critique_request(c) for c in critiques] == results
    assert len(list(scale.get_tasks(project_name=PROJECT))) == len(SUMMARIES)  # none twice
