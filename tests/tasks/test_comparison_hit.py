"""The comparison HIT: validation, display order, feedback, import, exports, simulator, HTTP."""

from __future__ import annotations

import csv
import io
import itertools
import json
import random
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.accounts import authenticate
from crowd.exceptions import InvalidAction, InvalidConfig, InvalidItem
from crowd.platforms.providers.sim import SimulatedCrowd
from crowd.platforms.publishing import open_study
from crowd.settings import Settings
from crowd.storage import Assignment, Database, Item, Response, Study, Worker
from crowd.studies.lifecycle import create_study, import_items
from crowd.studies.reports import build_report
from tasks.base import ItemSpec, StudyOptions
from tasks.comparison.hit import THANKS, ComparisonHit, draw_order
from tasks.comparison.items import TEMPLATES, canonical_index, overlap_count, shown_position
from tasks.comparison.simulate import ComparisonSimulator, item_key
from tests.conftest import join

HIT = ComparisonHit()
SAMPLES = Path(__file__).resolve().parents[2] / "tasks" / "comparison" / "samples"
NOW = datetime(2024, 5, 1, tzinfo=UTC)
CONFIG = HIT.validate_config(None).to_config()


def item(
    item_id: str, k: int = 4, kind: str = "real", best: int | None = None, **extra: Any
) -> dict[str, Any]:
    """An item whose candidate i says `{item_id}-cand{i}`; policies A (first half), B."""
    record: dict[str, Any] = {
        "id": item_id,
        "kind": kind,
        "query": f"Query of {item_id}:",
        "candidates": [
            {"text": f"{item_id}-cand{i} text", "policy": "policyA" if i < k // 2 else "policyB"}
            for i in range(k)
        ],
        **extra,
    }
    if best is not None:
        record["best"] = best
    return record


def json_keys(value: Any) -> set[str]:
    """Every key at any depth of a JSON value."""
    if isinstance(value, dict):
        return set(value) | {key for child in value.values() for key in json_keys(child)}
    if isinstance(value, list):
        return {key for child in value for key in json_keys(child)}
    return set()


# -- validation -------------------------------------------------------------------------------


def test_valid_item_splits_content_expected_and_meta() -> None:
    spec = HIT.validate_item(item("g1", kind="gold", best=2, meta={"utility": [0, 1, 2, 3]}))
    assert spec.content == {
        "query": "Query of g1:",
        "candidates": [f"g1-cand{i} text" for i in range(4)],
    }
    assert spec.expected == {"best": 2}
    assert spec.meta == {
        "utility": [0, 1, 2, 3],
        "policies": ["policyA", "policyA", "policyB", "policyB"],
    }
    assert spec.kind == "gold"
    # Plain strings with a parallel policies list are the same item.
    plain = HIT.validate_item(
        {"id": "p", "query": "q", "candidates": ["x", "y"], "policies": ["A", "B"]}
    )
    assert plain.content == {"query": "q", "candidates": ["x", "y"]}
    assert plain.meta["policies"] == ["A", "B"]
    assert HIT.validate_item({"id": 7, "query": "q", "candidates": ["x", "y"]}).meta == {
        "policies": [None, None]
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "red"}, r"unknown keys \['colour'\]"),
        ({"id": " "}, "needs an 'id'"),
        ({"kind": "bonus"}, "'kind' must be real, gold, attention or training"),
        ({"query": ""}, "'query'"),
        ({"candidates": ["only one"]}, "'candidates' must be a list of 2 to 8"),
        ({"candidates": [f"c{i}" for i in range(9)]}, "'candidates' must be a list of 2 to 8"),
        ({"candidates": ["same", "same"]}, "candidate texts must all differ"),
        ({"candidates": [{"text": "a", "model": "x"}, "b"]}, r"candidate 0 has unknown keys"),
        ({"candidates": [{"text": ""}, "b"]}, "candidate 0 needs a non-empty 'text'"),
        ({"candidates": ["a", "b"], "policies": ["A"]}, "one policy name per candidate"),
        (
            {"candidates": [{"text": "a", "policy": "A"}, "b"], "policies": ["A", "B"]},
            "use one of them",
        ),
        ({"best": 1}, "a real item carries no 'best'"),
        ({"kind": "gold"}, "a gold item needs 'best'"),
        ({"kind": "training", "best": 4}, "0 to 3"),
        ({"kind": "attention", "best": True}, "needs 'best'"),
        ({"meta": {"utility": [1, 2]}}, "'meta.utility' must list 4 numbers"),
        ({"meta": "x"}, "'meta' must be an object"),
        ({"category": 3}, "'category' must be text"),
    ],
)
def test_invalid_items_name_the_item_and_the_field(change: dict[str, Any], message: str) -> None:
    record = {**item("bad"), **change}
    with pytest.raises(InvalidItem, match=message) as error:
        HIT.validate_item(record, where="line 3")
    assert str(error.value).startswith("line 3")


def test_config_defaults_and_errors() -> None:
    options = HIT.validate_config(None)
    assert options.annotations_per_item == 1
    assert options.extra == {
        "template": None,
        "instructions": None,
        "overlap_share": 0.05,
        "overlap_workers": 5,
        "expert_groups": ["expert"],
        "reward_model": {"retrain_every": None, "labels": "raw", "settings": {}},
    }
    with pytest.raises(InvalidConfig, match="overlap_workers, expert_groups") as error:
        HIT.validate_config({"templat": "sentiment"})
    assert "templat" in str(error.value)
    for bad in (
        {"template": "poetry"},
        {"instructions": ""},
        {"overlap_share": 1.5},
        {"overlap_share": True},
        {"overlap_workers": 1},
        {"expert_groups": ["crowd"]},
        {"expert_groups": "expert"},
        {"reward_model": {"retrain_every": 0}},
        {"reward_model": {"labels": "mace"}},
        {"reward_model": {"settings": {"learning_rate": 2}}},
        {"reward_model": {"settings": {"lr": 1e-5}}},
        {"reward_model": {"every": 5}},
    ):
        with pytest.raises(InvalidConfig):
            HIT.validate_config(bad)


@pytest.mark.parametrize(
    ("template", "phrases"),
    [
        ("sentiment", ["most positive and happy", "Sexual or offensive", "strongly negative"]),
        ("descriptiveness", ["most vividly descriptive", "physical details only"]),
        ("summarization", ["useful", "accurate", "on its own", "not in the text", "verbatim"]),
    ],
)
def test_templates_give_the_papers_instructions(template: str, phrases: list[str]) -> None:
    config = HIT.validate_config({"template": template}).to_config()
    spec = HIT.validate_item(item("t"))
    view = HIT.view(spec.content, HIT.start(spec.content, NOW, config).progress, config)
    assert view["instructions"] == TEMPLATES[template]
    for phrase in phrases:
        assert phrase in view["instructions"]
    custom = HIT.validate_config({"template": template, "instructions": "Pick the funniest."})
    assert HIT.view(spec.content, {"step": 0, "order": [0, 1, 2, 3]}, custom.to_config())[
        "instructions"
    ] == ("Pick the funniest.")


# -- display order ----------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 4])
def test_every_display_order_maps_the_clicked_text_back_to_its_canonical_index(k: int) -> None:
    spec = HIT.validate_item(item("o", k=k))
    texts = spec.content["candidates"]
    orders = list(itertools.permutations(range(k)))
    assert len(orders) == (24 if k == 4 else 2)
    for order in orders:
        progress = {"step": 0, "order": list(order)}
        view = HIT.view(spec.content, progress, CONFIG)
        assert sorted(view["candidates"]) == sorted(texts) and view["k"] == k
        for position, clicked in enumerate(view["candidates"]):
            result = HIT.step(spec.content, progress, {"step": 0, "choice": position}, NOW, CONFIG)
            assert result.answer is not None
            assert texts[result.answer["best"]] == clicked
            assert result.answer["shown"] == position
            assert result.answer["order"] == list(order)
            assert canonical_index(order, position) == texts.index(clicked)
            assert shown_position(order, result.answer["best"]) == position


def test_start_draws_every_order_and_view_hides_order_and_provenance() -> None:
    spec = HIT.validate_item(item("s"))
    seen = Counter(
        tuple(HIT.start(spec.content, NOW, CONFIG).progress["order"]) for _ in range(3000)
    )
    assert set(seen) == set(itertools.permutations(range(4)))
    first = HIT.start(spec.content, NOW, CONFIG)
    assert first.progress["step"] == 0 and first.event["type"] == "shown"
    view = HIT.view(spec.content, first.progress, CONFIG)
    assert set(view) == {"step", "k", "instructions", "query", "candidates"}
    assert "policy" not in json.dumps(view)
    assert draw_order(3, random.Random(1)) == draw_order(3, random.Random(1))


@pytest.mark.parametrize("choice", [-1, 4, "1", 1.0, True, None])
def test_bad_choices_are_refused(choice: Any) -> None:
    spec = HIT.validate_item(item("c"))
    with pytest.raises(InvalidAction, match="position of the candidate you pick, 0 to 3"):
        HIT.step(spec.content, {"step": 0, "order": [3, 2, 1, 0]}, {"choice": choice}, NOW, {})


# -- overlap planning -------------------------------------------------------------------------


def _specs(n_real: int) -> list[ItemSpec]:
    records = [item(f"r{i:03d}") for i in range(n_real)]
    records += [item("g", kind="gold", best=0), item("t", kind="training", best=1)]
    return [HIT.validate_item(record) for record in records]


def _options(**extra: Any) -> StudyOptions:
    return HIT.validate_config(extra)


@pytest.mark.parametrize(
    ("n_real", "share", "expected"),
    [(40, 0.05, 2), (100, 0.05, 5), (10, 0.05, 1), (50, 0.05, 3), (7, 0.5, 4), (20, 0.0, 0)],
)
def test_overlap_picks_a_share_of_real_items_for_several_workers(
    n_real: int, share: float, expected: int
) -> None:
    assert overlap_count(share, n_real) == expected
    planned = HIT.plan_items(_specs(n_real), _options(overlap_share=share))
    overlap = [spec for spec in planned if spec.target is not None]
    assert len(overlap) == expected
    assert all(spec.kind == "real" and spec.target == 5 for spec in overlap)
    # Deterministic given the ids, whatever the order of the import.
    again = HIT.plan_items(list(reversed(_specs(n_real))), _options(overlap_share=share))
    assert {s.external_id for s in again if s.target} == {s.external_id for s in overlap}


def test_overlap_target_never_lowers_annotations_per_item() -> None:
    planned = HIT.plan_items(
        _specs(20), _options(overlap_workers=3, annotations_per_item=4, overlap_share=0.1)
    )
    assert sorted(spec.target for spec in planned if spec.target) == [4, 4]
    assert overlap_count(0.05, 0) == 0


# -- feedback, score, import ------------------------------------------------------------------


def test_training_feedback_reveals_the_label_only_after_the_answer() -> None:
    spec = HIT.validate_item(item("tr", kind="training", best=2))
    progress = {"step": 0, "order": [2, 0, 3, 1]}
    view = HIT.view(spec.content, progress, CONFIG)
    assert "best" not in json_keys(view) and "policyA" not in json.dumps(view)
    wrong = HIT.step(spec.content, progress, {"step": 0, "choice": 1}, NOW, CONFIG).answer
    right = HIT.step(spec.content, progress, {"step": 0, "choice": 0}, NOW, CONFIG).answer
    assert wrong is not None and right is not None and right["best"] == 2
    missed = HIT.feedback(spec.content, spec.expected, wrong, "training", CONFIG)
    assert missed["training"] is True and missed["correct"] is False
    assert missed["right_text"] == "tr-cand2 text" and missed["chosen_text"] == "tr-cand0 text"
    hit = HIT.feedback(spec.content, spec.expected, right, "training", CONFIG)
    assert hit["correct"] is True and hit["right_text"] == "tr-cand2 text"
    assert HIT.score(spec.expected, wrong) == 0.0 and HIT.score(spec.expected, right) == 1.0


def test_real_gold_and_attention_feedback_look_the_same() -> None:
    answer = {"best": 1, "shown": 0, "order": [1, 0, 2, 3]}
    content = HIT.validate_item(item("x")).content
    feedbacks = [
        HIT.feedback(content, expected, answer, kind, CONFIG)
        for kind, expected in (
            ("real", {}),
            ("gold", {"best": 1}),
            ("gold", {"best": 3}),
            ("attention", {"best": 0}),
        )
    ]
    assert all(feedback == {"message": THANKS} for feedback in feedbacks)
    assert HIT.score({}, answer) is None
    assert HIT.passed_attention({"best": 1}, answer) is True
    assert HIT.passed_attention({"best": 0}, answer) is False


def test_import_answer_takes_an_index_or_the_text() -> None:
    content = HIT.validate_item(item("im")).content
    expected = {"best": 2, "shown": None, "order": None}
    assert HIT.import_answer(content, {"best": 2}, CONFIG) == expected
    assert HIT.import_answer(content, {"best": " 2 "}, CONFIG) == expected
    assert HIT.import_answer(content, {"best_text": "im-cand2 text"}, CONFIG) == expected
    assert HIT.import_answer(content, {"best": "2", "best_text": "im-cand2 text"}, CONFIG) == (
        expected
    )
    for raw, field, message in (
        ({"best": "two"}, "best", "0-based index"),
        ({"best": 4}, "best", "outside 0..3"),
        ({"best": "-1"}, "best", "outside 0..3"),
        ({"best_text": "nope"}, "best_text", "exact text"),
        ({"best": 1, "best_text": "im-cand2 text"}, "best", "disagree"),
        ({}, "best", "give 'best'"),
    ):
        with pytest.raises(InvalidItem, match=message) as error:
            HIT.import_answer(content, raw, CONFIG)
        assert error.value.where == field


# -- exports ----------------------------------------------------------------------------------


def platform_row(record: dict[str, Any], worker: str, best: int, shown: int | None) -> dict:
    spec = HIT.validate_item(record)
    return {
        "response_id": hash((worker, spec.external_id)) % 10_000,
        "worker": worker,
        "worker_status": "active",
        "item": spec.external_id,
        "kind": spec.kind,
        "category": spec.category,
        "meta": spec.meta,
        "content": spec.content,
        "expected": spec.expected,
        "answer": {"best": best, "shown": shown, "order": None if shown is None else [0, 1]},
        "score": HIT.score(spec.expected, {"best": best}),
        "explanation": None,
        "reasons": [],
        "qc_flags": {},
        "events": [],
        "position": 0,
        "created_at": "2024-05-01T00:00:00+00:00",
        "source": "live" if shown is not None else "imported",
        "rater_group": "crowd" if shown is not None else "expert",
    }


def export_rows() -> list[dict[str, Any]]:
    rows = [
        platform_row(item("four", k=4), "w1", 3, 0),
        platform_row(item("two", k=2), "w2", 0, 1),
        platform_row(item("four", k=4), "e1", 1, None),
        platform_row(item("att", k=2, kind="attention", best=1), "w1", 1, 0),
    ]
    return [HIT.analysis_row(row) for row in rows]


def export(fmt: str) -> tuple[int, str]:
    handle = io.StringIO()
    written = HIT.export(export_rows(), fmt, handle)
    return written, handle.getvalue()


def test_jsonl_export_uses_the_query_sample_best_layout() -> None:
    written, text = export("jsonl")
    records = [json.loads(line) for line in text.splitlines()]
    assert written == len(records) == 4
    first = records[0]
    assert first["query"] == "Query of four:"
    assert [first[f"sample{i}"] for i in range(4)] == [f"four-cand{i} text" for i in range(4)]
    assert first["best"] == 3 and first["worker"] == "w1" and first["rater_group"] == "crowd"
    assert first["policies"] == ["policyA", "policyA", "policyB", "policyB"]
    assert records[1]["k"] == 2 and "sample2" not in records[1]
    assert records[2]["source"] == "imported" and records[2]["rater_group"] == "expert"


def test_csv_export_is_flat_with_padded_samples() -> None:
    written, text = export("csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert written == len(rows) == 4
    assert rows[0]["sample3"] == "four-cand3 text" and rows[0]["best"] == "3"
    assert rows[1]["sample2"] == "" and rows[1]["best"] == "0"
    assert rows[0]["policies"] == "policyA;policyA;policyB;policyB"


def test_pairwise_export_gives_k_minus_one_pairs_per_label() -> None:
    written, text = export("pairwise")
    pairs = [json.loads(line) for line in text.splitlines()]
    # 3 (K=4) + 1 (K=2) + 3 (the expert's K=4); the attention label is left out.
    assert written == len(pairs) == 7
    w1 = [p for p in pairs if p["worker"] == "w1"]
    assert {p["chosen"] for p in w1} == {"four-cand3 text"}
    assert sorted(p["rejected"] for p in w1) == [f"four-cand{i} text" for i in range(3)]
    assert all(p["prompt"] == "Query of four:" for p in w1)
    w2 = [p for p in pairs if p["worker"] == "w2"]
    assert [(p["chosen"], p["rejected"]) for p in w2] == [("two-cand0 text", "two-cand1 text")]
    assert not any(p["kind"] == "attention" for p in pairs)


def test_kway_export_keeps_canonical_order_and_label() -> None:
    written, text = export("kway")
    records = [json.loads(line) for line in text.splitlines()]
    assert written == len(records) == 3
    assert records[0]["completions"] == [f"four-cand{i} text" for i in range(4)]
    assert records[0]["label"] == 3 and records[0]["prompt"] == "Query of four:"
    assert records[0]["policies"] == ["policyA", "policyA", "policyB", "policyB"]
    assert records[2]["label"] == 1
    with pytest.raises(InvalidConfig, match="pairwise"):
        HIT.export(export_rows(), "xml", io.StringIO())


# -- simulator --------------------------------------------------------------------------------


def _sim_setup(
    kind: str = "real", best: int | None = None
) -> tuple[ComparisonSimulator, Any, dict[str, Any]]:
    record = item("sim", kind=kind, best=best, meta={"utility": [0.0, 2.0, -1.0, 0.5]})
    sim = ComparisonSimulator()
    truths = sim.truths([record])
    return sim, truths, record


def _match_rate(kind: str, item_kind: str = "real", best: int | None = None) -> float:
    sim, truths, record = _sim_setup(item_kind, best)
    texts = [c["text"] for c in record["candidates"]]
    target = best if best is not None else 1
    rng = random.Random(5)
    hits = 0
    for _ in range(2000):
        order = draw_order(4, rng)
        task = {"step": 0, "query": record["query"], "candidates": [texts[i] for i in order]}
        choice = sim.act(kind, rng, task, truths[sim.key(task)])["choice"]
        hits += order[choice] == target
    return hits / 2000


def test_simulated_kinds_behave_as_named() -> None:
    skilled, noisy, spammer = (_match_rate(k) for k in ("skilled", "noisy", "spammer"))
    assert skilled > 0.9
    assert 0.35 < noisy < 0.75
    assert 0.2 < spammer < 0.3
    # Readers follow a labelled item's best (here the worst by utility); spammers do not.
    assert _match_rate("skilled", "attention", best=2) > 0.9
    assert _match_rate("noisy", "training", best=2) > 0.5
    assert _match_rate("spammer", "attention", best=2) < 0.3


def test_position_biased_workers_mostly_pick_the_first_shown() -> None:
    sim, truths, record = _sim_setup()
    texts = [c["text"] for c in record["candidates"]]
    rng = random.Random(3)
    task = {"query": record["query"], "candidates": texts}
    truth = truths[sim.key(task)]
    picks = Counter(sim.act("position_biased", rng, task, truth)["choice"] for _ in range(2000))
    assert picks[0] / 2000 > 0.8
    # Deterministic given the rng.
    first = [sim.act("noisy", random.Random(9), task, truth) for _ in range(3)]
    assert first[0] == first[1] == first[2]


def test_simulator_finds_items_by_what_the_page_shows() -> None:
    records = [item("a"), {"id": "b", "query": "q", "candidates": ["x", "y"]}]
    sim = ComparisonSimulator()
    truths = sim.truths(records)
    shuffled = {"query": "Query of a:", "candidates": [f"a-cand{i} text" for i in (2, 0, 3, 1)]}
    assert sim.key(shuffled) == item_key("Query of a:", [f"a-cand{i} text" for i in range(4)])
    assert sim.key(shuffled) in truths
    # Without meta.utility a fixed pseudo-utility stands in, so skilled workers agree.
    truth = truths[sim.key({"query": "q", "candidates": ["y", "x"]})]
    assert set(truth.utility) == {"x", "y"} and truth.utility["x"] != truth.utility["y"]
    assert set(ComparisonSimulator.kinds) == {"skilled", "noisy", "spammer", "position_biased"}


# -- through HTTP -----------------------------------------------------------------------------


@pytest.fixture
def make_comparison_study(db: Database, api_key: str) -> Callable[..., int]:
    """Create, fill and publish a comparison study; returns its id."""

    def factory(
        records: list[dict[str, Any]],
        config: dict[str, Any] | None = None,
        providers: tuple[str, ...] = ("local", "sim"),
    ) -> int:
        with db.session() as session:
            experimenter = authenticate(session, api_key)
            study: Study = create_study(
                session, experimenter, "comparison study", "comparison", config or {}
            )
            import_items(session, study, json.loads(json.dumps(records)))
            open_study(session, study, providers)
            return study.id

    return factory


def next_view(client: FlaskClient, who: dict[str, str], study_id: int) -> dict[str, Any]:
    response = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def pick(client: FlaskClient, who: dict[str, str], view: dict[str, Any], choice: int) -> Any:
    response = client.post(
        f"/api/work/assignments/{view['assignment_id']}/step",
        json={"step": view["task"]["step"], "choice": choice},
        headers=who,
    )
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_training_items_come_first_with_feedback_then_real_items_thank(
    client: FlaskClient,
    auth: dict[str, str],
    make_comparison_study: Callable[..., int],
    db: Database,
) -> None:
    records = [
        item("real1"),
        item("gold1", kind="gold", best=0),
        item("train1", kind="training", best=3),
        item("train2", kind="training", best=1),
    ]
    # Gold at every chance, so the order is fixed: training, gold, then real.
    config = {
        "template": "sentiment",
        "overlap_share": 0,
        "qc": {"gold": {"min_rate": 1.0, "max_rate": 1.0}},
    }
    study_id = make_comparison_study(records, config)
    who = join(client, auth)
    for training in ("train1", "train2"):
        view = next_view(client, who, study_id)
        body = json.dumps(view)
        assert f"{training}-cand0" in body
        assert "policyA" not in body and not {"best", "expected"} & json_keys(view)
        assert view["task"]["instructions"] == TEMPLATES["sentiment"]
        wrong_text = next(t for t in view["task"]["candidates"] if "-cand0" in t)
        done = pick(client, who, view, view["task"]["candidates"].index(wrong_text))
        feedback = done["feedback"]
        right = 3 if training == "train1" else 1
        assert feedback["correct"] is False and feedback["training"] is True
        assert feedback["right_text"] == f"{training}-cand{right} text"
    seen = []
    for _ in range(2):
        view = next_view(client, who, study_id)
        seen.append(view["task"]["query"])
        assert "policy" not in json.dumps(view)
        assert pick(client, who, view, 0)["feedback"] == {"message": THANKS}
    assert seen == ["Query of gold1:", "Query of real1:"]
    assert next_view(client, who, study_id)["done"] is True
    with db.session() as session:
        scores = {
            item_id: score
            for item_id, score in session.execute(
                select(Item.external_id, Response.score).join(Item, Item.id == Response.item_id)
            )
        }
    assert scores["real1"] is None and scores["train1"] == 0.0 and scores["gold1"] in (0.0, 1.0)


def test_no_training_for_a_worker_who_arrives_when_the_real_work_is_taken(
    client: FlaskClient, auth: dict[str, str], make_comparison_study: Callable[..., int]
) -> None:
    records = [item("real1"), item("train1", kind="training", best=3)]
    study_id = make_comparison_study(records, {"overlap_share": 0})
    first = join(client, auth, external_id="first")
    assert next_view(client, first, study_id)["task"]["query"] == "Query of train1:"
    assert next_view(client, first, study_id)["task"]["query"] == "Query of train1:"  # open
    pick(client, first, next_view(client, first, study_id), 0)
    pick(client, first, next_view(client, first, study_id), 0)  # real1, its only slot
    late = join(client, auth, external_id="late")
    assert next_view(client, late, study_id)["done"] is True  # no practice for no work


def test_stored_best_is_the_canonical_index_of_the_clicked_text_for_every_order(
    client: FlaskClient,
    auth: dict[str, str],
    make_comparison_study: Callable[..., int],
    db: Database,
) -> None:
    orders = list(itertools.permutations(range(4)))
    records = [item(f"ord{n:02d}") for n in range(len(orders))]
    study_id = make_comparison_study(records, {"overlap_share": 0})
    who = join(client, auth)
    clicked: dict[str, str] = {}
    for n, order in enumerate(orders):
        view = next_view(client, who, study_id)
        # Force this assignment's order, so all 24 orders go through the HTTP path.
        with db.session() as session:
            assignment = session.get(Assignment, view["assignment_id"])
            assert assignment is not None
            assignment.progress = {"step": 0, "order": list(order)}
        view = next_view(client, who, study_id)
        position = n % 4
        text = view["task"]["candidates"][position]
        clicked[view["task"]["query"]] = text
        assert pick(client, who, view, position)["feedback"] == {"message": THANKS}
    with db.session() as session:
        rows = session.execute(select(Response, Item).join(Item, Item.id == Response.item_id))
        stored = [(response.answer, item_row.content) for response, item_row in rows]
    assert len(stored) == 24
    assert {tuple(answer["order"]) for answer, _ in stored} == set(orders)
    for answer, content in stored:
        assert content["candidates"][answer["best"]] == clicked[content["query"]]
        assert answer["order"][answer["shown"]] == answer["best"]


def test_overlap_items_get_five_distinct_workers_and_the_others_one(
    client: FlaskClient,
    auth: dict[str, str],
    make_comparison_study: Callable[..., int],
    db: Database,
) -> None:
    records = [item(f"ov{n:02d}", k=2) for n in range(20)]
    study_id = make_comparison_study(records, {"overlap_share": 0.1})
    for n in range(7):
        who = join(client, auth, external_id=f"worker{n}")
        while not (view := next_view(client, who, study_id)).get("done"):
            pick(client, who, view, n % 2)
    with db.session() as session:
        targets = dict(session.execute(select(Item.external_id, Item.target)).all())
        answered = session.execute(
            select(Item.external_id, Worker.external_id)
            .join(Response, Response.item_id == Item.id)
            .join(Worker, Worker.id == Response.worker_id)
        ).all()
    per_item: dict[str, set[str]] = {}
    for item_id, worker in answered:
        per_item.setdefault(item_id, set()).add(worker)
    overlap = {item_id for item_id, target in targets.items() if target is not None}
    assert len(overlap) == 2 and all(targets[i] == 5 for i in overlap)
    assert len(answered) == 2 * 5 + 18
    for item_id in targets:
        assert len(per_item[item_id]) == (5 if item_id in overlap else 1), item_id


def test_a_simulated_crowd_plays_the_samples_and_the_report_builds(
    live_server: Any,
    api_key: str,
    settings: Settings,
    make_comparison_study: Callable[..., int],
    db: Database,
) -> None:
    records = [
        json.loads(line)
        for name in ("training.jsonl", "sentiment.jsonl", "attention.jsonl")
        for line in (SAMPLES / name).read_text().splitlines()
    ]
    config = {"template": "sentiment", "annotations_per_item": 3, "attention_rate": 0.1}
    study_id = make_comparison_study(records, config)
    mix = {"skilled": 8, "noisy": 2, "spammer": 2, "position_biased": 2}
    crowd = SimulatedCrowd(
        live_server.url, api_key, study_id, "comparison", records, mix, seed=4,
        items_per_worker=13,
    )  # fmt: skip
    result = crowd.run(threads=4)
    assert result.errors == []
    with db.session() as session:
        report = build_report(session, settings, study_id)
        data = report.data
    full = data["full"]
    assert data["training"]["n_labels"] == 3 * 14
    assert data["attention"]["workers_checked"] == 14
    # Workers who do not read fail the check; readers pass it.
    failed = set(data["attention"]["failed_workers"])
    assert failed and all("spammer" in w or "position" in w for w in failed)
    assert full["agreement"]["worker_worker"]["n_pairs"] > 0
    overall = next(e for e in full["win_rates"] if e["k"] == "all")
    assert overall["policy_b"] == "tuned" and overall["win_rate_a"] < 0.5
    assert data["filtered"]["position_bias"]["4"]["n"] > 0
    html = (settings.reports_dir / f"study-{study_id}" / "report.html").read_text()
    assert "Agreement" in html and "base vs tuned" in html
