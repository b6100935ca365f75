"""Scale's TextCollection and comparison tasks mapped onto form items, and form answers back
into Scale's responses (crowd/scale/forms.py, crowd/scale/params.py): pure, no server."""

from __future__ import annotations

from typing import Any

import pytest

from crowd.exceptions import ValidationError
from crowd.scale import forms
from crowd.scale.params import (
    FORM_HIT,
    PICK_HIT,
    parse_task,
    project_params,
    study_hit_type,
    task_response,
)

# The fields HELM's ScaleCritiqueClient sends: a multiple-choice question, a checkbox
# question and a free-response question.
HELM_FIELDS: list[dict[str, Any]] = [
    {"type": "category", "field_id": "Helpfulness", "title": "Helpfulness",
     "description": "How helpful is the answer?",
     "choices": [{"label": label, "value": i} for i, label in enumerate("abcde")],
     "min_choices": 1, "max_choices": 1},
    {"type": "category", "field_id": "Problems", "title": "Problems",
     "description": "Which problems does it have?",
     "choices": [{"label": "typos", "value": 0}, {"label": "rude", "value": 1}],
     "min_choices": 0, "max_choices": 2},
    {"type": "text", "field_id": "Keyword Feedback", "title": "Keyword Feedback",
     "description": "Say why in a few words", "max_characters": 500, "required": True},
]  # fmt: skip


def test_textcollection_fields_become_form_fields() -> None:
    declared = forms.form_fields(HELM_FIELDS)
    assert declared == [
        {"id": "Helpfulness", "type": "category", "title": "Helpfulness",
         "help": "How helpful is the answer?",
         "choices": [{"label": label, "value": i} for i, label in enumerate("abcde")],
         "min_choices": 1, "max_choices": 1},
        {"id": "Problems", "type": "category", "title": "Problems",
         "help": "Which problems does it have?",
         "choices": [{"label": "typos", "value": 0}, {"label": "rude", "value": 1}],
         "min_choices": 0, "max_choices": 2, "required": False},
        {"id": "Keyword Feedback", "type": "text", "title": "Keyword Feedback",
         "help": "Say why in a few words", "required": True, "max_characters": 500},
    ]  # fmt: skip
    with pytest.raises(ValidationError, match="used twice") as error:
        forms.form_fields([HELM_FIELDS[0], HELM_FIELDS[0]])
    assert error.value.where == "fields[1].field_id"


def test_a_textcollection_task_is_a_form_item_with_its_own_fields_and_target() -> None:
    body = {"batch": "b", "instruction": "Evaluate the output",
            "attachments": [{"type": "text", "content": "  the output \n"}],
            "fields": HELM_FIELDS, "responses_required": 3, "unique_id": "u"}  # fmt: skip
    request = parse_task("textcollection", body)
    record = request.item_record("t1", "real")
    assert record["attachments"] == [{"type": "text", "content": "Evaluate the output"},
                                     {"type": "text", "content": "  the output \n"}]  # fmt: skip
    assert [field["id"] for field in record["fields"]] == [
        "Helpfulness", "Problems", "Keyword Feedback"]  # fmt: skip
    assert request.target == 3
    # Echoed as sent: HELM compares the attachments it sent with the task's.
    assert request.params == {"attachments": body["attachments"], "fields": HELM_FIELDS,
                              "responses_required": 3}  # fmt: skip
    gold = parse_task("textcollection", {**body, "expected_response": {"Helpfulness": 3}},
                      quality=True)  # fmt: skip
    assert gold.item_record("t2", "gold")["expected"] == {"Helpfulness": ["3"]}
    for wrong in ({"Helpfulness": 9}, {"Keyword Feedback": "x"}, {"Nope": 1}):
        with pytest.raises(ValidationError, match="expected_response"):
            parse_task("textcollection", {**body, "expected_response": wrong}, quality=True)


def form_answer(**fields: Any) -> dict[str, Any]:
    return {"fields": fields}


def test_a_textcollection_response_has_every_respondent_in_field_order() -> None:
    answers = [
        form_answer(**{"Keyword Feedback": "typos", "Problems": ["0"], "Helpfulness": ["3"]}),
        form_answer(**{"Helpfulness": ["4"], "Problems": [], "Keyword Feedback": "fine"}),
        form_answer(**{"Helpfulness": ["4"], "Problems": ["0", "1"], "Keyword Feedback": "ok"}),
    ]
    response = task_response("textcollection", {"fields": HELM_FIELDS}, answers)
    assert response["responses"] == [
        {"Helpfulness": ["3"], "Problems": ["0"], "Keyword Feedback": "typos"},
        {"Helpfulness": ["4"], "Problems": [], "Keyword Feedback": "fine"},
        {"Helpfulness": ["4"], "Problems": ["0", "1"], "Keyword Feedback": "ok"},
    ]
    # What HELM does with it: the items in order, paired with the fields by index.
    for respondent in response["responses"]:
        keys = [key for key, _ in respondent.items()]
        assert keys == [field["field_id"] for field in HELM_FIELDS]
        assert int(respondent["Helpfulness"][0]) in range(5)
    assert response["annotations"] == {"Helpfulness": ["4"], "Problems": ["0"],
                                       "Keyword Feedback": "typos"}  # fmt: skip


def test_a_comparison_asks_one_of_the_choices_about_the_attachments() -> None:
    body = {"project": "p", "instruction": "Which is funnier?",
            "attachments": ["joke one", "joke two", "joke three", "joke four", "joke five"],
            "choices": ["1", "2", "3", "4"], "fields": {"why": "Why that one?"}}  # fmt: skip
    request = parse_task("comparison", body, hit_type=FORM_HIT)
    assert request.content == {
        "attachments": [{"type": "text", "content": f"joke {n}"}
                        for n in ("one", "two", "three", "four", "five")],
        "fields": [{"id": "choice", "type": "category", "title": "Which is funnier?",
                    "choices": ["1", "2", "3", "4"]},
                   {"id": "why", "type": "text", "title": "Why that one?"}],
    }  # fmt: skip
    assert request.params["choices"] == ["1", "2", "3", "4"]
    # The same body is refused in a best-of-K project: there the choices name attachments.
    with pytest.raises(ValidationError, match="name each attachment"):
        parse_task("comparison", {**body, "fields": None}, hit_type=PICK_HIT)
    gold = parse_task("comparison", {**body, "expected_response": {"choice": "3"}},
                      quality=True, hit_type=FORM_HIT)  # fmt: skip
    assert gold.item_record("g", "gold")["expected"] == {"choice": ["3"]}
    by_index = parse_task("comparison", {**body, "expected_response": {"choice": 0}},
                          quality=True, hit_type=FORM_HIT)  # fmt: skip
    assert by_index.expected == {"expected": {"choice": ["1"]}}
    with pytest.raises(ValidationError, match="one of the choices"):
        parse_task("comparison", {**body, "expected_response": {"choice": "joke one"}},
                   quality=True, hit_type=FORM_HIT)  # fmt: skip
    with pytest.raises(ValidationError, match="give the choices"):
        parse_task("comparison", {**body, "choices": None, "fields": None}, hit_type=FORM_HIT)
    long = parse_task("comparison", {**body, "instruction": "x" * 600}, hit_type=FORM_HIT)
    assert long.content["attachments"][0] == {"type": "text", "content": "x" * 600}
    assert long.content["fields"][0]["title"] == "Your answer"


def test_a_comparison_response_is_the_chosen_string_and_its_fields() -> None:
    params = {"attachments": ["a", "b"], "choices": ["yes", "no"], "fields": {"why": "Why?"}}
    answers = [form_answer(choice=["no"], why="blurry"), form_answer(choice=["yes"], why="cat"),
               form_answer(choice=["yes"], why="a cat")]  # fmt: skip
    assert task_response("comparison", params, answers) == {
        "choice": "yes", "votes": {"yes": 2, "no": 1}, "responses": 3, "agreement": 0.6667,
        "fields": {"why": "cat"},
    }  # fmt: skip
    only_fields = task_response("comparison", {"attachments": ["a"], "fields": {"why": "?"}},
                                [form_answer(why="because")])  # fmt: skip
    assert only_fields == {"fields": {"why": "because"}, "responses": 1}
    # Best of K keeps its response: the index of the picked attachment.
    picked = task_response("comparison", {"attachments": ["a", "b"]}, [{"best": 1}])
    assert (picked["choice"], picked["chosen"]) == (1, "b")


def test_projects_choose_their_study_hit_type() -> None:
    assert study_hit_type("comparison", {}) == FORM_HIT
    assert study_hit_type("comparison", {"crowd": {"pick": "attachment"}}) == PICK_HIT
    assert study_hit_type("categorization", None) == PICK_HIT
    assert study_hit_type("textcollection", {}) == FORM_HIT
    for task_type, pick in (("comparison", "text"), ("textcollection", "attachment")):
        with pytest.raises(ValidationError, match="pick"):
            study_hit_type(task_type, {"crowd": {"pick": pick}})
    params, hit_type, config = project_params(
        "comparison", {"instruction": "Pick", "crowd": {"pick": "attachment"}})  # fmt: skip
    assert (hit_type, config) == (PICK_HIT, {"instructions": "Pick", "overlap_share": 0.0})
    assert params["crowd"] == {"pick": "attachment"}  # echoed as sent
    assert project_params("textcollection", {}) == ({}, FORM_HIT, {})


def test_an_item_problem_is_named_by_the_field_of_the_scale_request() -> None:
    fields = [{"type": "text", "field_id": "Keyword Feedback", "title": "Why?",
               "description": "A few words"}]  # fmt: skip
    form: dict[str, Any] = {"attachments": [{"type": "text", "content": "x"}], "fields": fields}
    compared: dict[str, Any] = {"attachments": ["a", "b"], "choices": ["yes", "no"],
                                "fields": {"why": "Why?"}}  # fmt: skip
    tasks: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        # The instruction is shown as the first attachment of the TextCollection item.
        "textcollection": (form, forms.textcollection_item("Read it.", form["attachments"],
                                                           fields)),
        "comparison": (compared, forms.comparison_item("Funny?", ["a", "b"], "text",
                                                       ["yes", "no"], {"why": "Why?"})),
    }  # fmt: skip
    cases = [
        ("textcollection", "item.fields[0].id", "fields[0].field_id"),
        ("textcollection", "item.fields[0].help", "fields[0].description"),
        ("textcollection", "item.fields[0].choices[2].value", "fields[0].choices[2].value"),
        ("textcollection", "item.fields", "fields"),
        ("textcollection", "item.attachments[1].content", "attachments[0].content"),
        ("textcollection", "item.attachments[0].content", "instruction"),
        ("textcollection", "item abc.expected.x", "expected_response.x"),
        ("textcollection", "item.meta", None),
        ("textcollection", "line 1.fields", None),
        ("comparison", "item.fields[0].choices[1].value", "choices[1]"),
        ("comparison", "item.fields[0].title", "instruction"),
        ("comparison", "item.fields[1].title", "fields.why"),
        ("comparison", "item.attachments[1].content", "attachments[1]"),
        ("comparison", "item.attachments[0].type", "attachment_type"),
    ]
    for task_type, where, named in cases:
        params, content = tasks[task_type]
        assert forms.request_path(where, task_type, params, content) == named, where
