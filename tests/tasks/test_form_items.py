"""Form items: attachments (HTML sanitised on upload), an item's own fields, expected answers
checked against the fields; and how answers match them (gold, attention, labels)."""

from __future__ import annotations

from typing import Any

import pytest

from crowd.exceptions import InvalidItem
from tasks.form.answers import kendall_distance
from tasks.form.items import sanitise_html
from tests.tasks.form_helpers import HIT, category, item, rating, records, sample_config, text

STUDY = HIT.validate_config(sample_config())


def test_an_item_splits_into_attachments_secret_expectations_and_meta() -> None:
    spec = HIT.validate_item(
        item(
            "g1",
            kind="gold",
            expected={"faithfulness": 4},
            tolerance={"faithfulness": 1},
            meta={"truth": {"x": 1}},
        )
    )
    assert spec.content == {
        "attachments": [
            {"type": "text", "content": "Text of g1."},
            {"type": "text", "content": "The source."},
        ]
    }
    assert spec.expected == {"expected": {"faithfulness": 4}, "tolerance": {"faithfulness": 1}}
    assert spec.meta == {"truth": {"x": 1}} and spec.kind == "gold"
    # The text shorthand; whitespace inside a text is the author's and kept.
    short = HIT.validate_item({"id": 7, "text": "  line one\n\n    indented"})
    assert short.external_id == "7"
    assert short.content["attachments"] == [
        {"type": "text", "content": "  line one\n\n    indented"}
    ]
    image = HIT.validate_item(
        {
            "id": "p",
            "attachments": [
                {"type": "image", "content": "https://example.org/a.png"},
                {"type": "image", "content": "http://example.org/b.png", "alt": "A red bar chart"},
            ],
        }
    )
    assert [a["alt"] for a in image.content["attachments"]] == ["Image 1", "A red bar chart"]


def test_html_is_sanitised_on_upload() -> None:
    raw = (
        '<p onclick="steal()">Hello <b>bold</b><script>alert(1)</script></p>'
        '<img src=x onerror="alert(2)"><a href="javascript:alert(3)">bad link</a>'
        '<a href="https://example.org/x" target="_self">good link</a><a href="/api/x">here</a>'
        '<iframe src="https://evil.example"></iframe><style>p{display:none}</style>'
        '<table><tr><td style="color:red">cell</td></tr></table><div>plain</div>'
    )
    spec = HIT.validate_item({"id": "h", "attachments": [{"type": "html", "content": raw}]})
    clean = spec.content["attachments"][0]["content"]
    for gone in (
        "<script",
        "alert",
        "onerror",
        "onclick",
        "javascript:",
        "<img",
        "<iframe",
        "style",
        "_self",
        "/api/x",
        "<div",
    ):
        assert gone not in clean, gone
    assert "<p>Hello <b>bold</b></p>" in clean
    assert (
        '<a href="https://example.org/x" target="_blank" rel="noopener noreferrer">good link</a>'
        in clean
    )
    assert "<td>cell</td>" in clean and "plain" in clean
    assert sanitise_html(clean) == clean
    with pytest.raises(InvalidItem) as error:
        HIT.validate_item(
            {
                "id": "h",
                "attachments": [
                    {"type": "text", "content": "ok"},
                    {"type": "html", "content": "<script>only()</script>"},
                ],
            }
        )
    assert error.value.where == "item.attachments[1].content"
    assert "once sanitised" in error.value.message


@pytest.mark.parametrize(
    ("record", "where", "message"),
    [
        ({"id": "x"}, "item.attachments", "1 to 10"),
        ({"id": "x", "attachments": []}, "item.attachments", "1 to 10"),
        ({"id": "x", "attachments": [{"type": "text", "content": "a"}] * 11}, "item.attachments",
         "1 to 10"),
        (item(colour="red"), "item.colour", "unknown key"),
        ({**item(), "id": ""}, "item.id", "needs an 'id'"),
        (item(kind="bonus"), "item.kind", "real, gold"),
        ({"id": "x", "text": "a", "attachments": [{"type": "text", "content": "b"}]},
         "item.text", "not both"),
        ({"id": "x", "attachments": [{"type": "video", "content": "v"}]},
         "item.attachments[0].type", "text, image, html"),
        ({"id": "x", "attachments": [{"type": "text", "content": "  "}]},
         "item.attachments[0].content", "non-empty"),
        ({"id": "x", "attachments": [{"type": "text", "content": "a" * 20001}]},
         "item.attachments[0].content", "20000"),
        ({"id": "x", "attachments": [{"type": "image", "content": "javascript:alert(1)"}]},
         "item.attachments[0].content", "http(s) URL"),
        ({"id": "x", "attachments": [{"type": "image", "content": "https://e.org/" + "a" * 2000}]},
         "item.attachments[0].content", "2000"),
        ({"id": "x", "attachments": [{"type": "text", "content": "a", "alt": "b"}]},
         "item.attachments[0].alt", "unknown key"),
        (item(kind="gold"), "item.expected", "a gold item needs 'expected'"),
        (item(kind="attention", expected={}), "item.expected", "attention item needs"),
        (item(expected={"quality": 3}), "item.expected", "only gold, training and attention"),
        (item(kind="gold", expected={"q": 1}, tolerance=2), "item.tolerance", "{field id"),
        (item(fields=[rating(), rating()]), "item.fields[1].id", "declared twice"),
        (item(fields=[category(choices=["a"])]), "item.fields[0].choices", "2 to 50"),
        (item(kind="gold", fields=[rating()], expected={"topic": "news"}),
         "item.expected.topic", "not a field of this item"),
        (item(kind="gold", fields=[rating()], expected={"quality": 6}),
         "item.expected.quality", "from 1 to 5"),
        (item(kind="gold", fields=[rating(), text()], expected={"why": "because"}),
         "item.expected.why", "text field"),
        (item(kind="gold", fields=[category()], expected={"topic": "weather"}),
         "item.expected.topic", "choice values"),
        (item(kind="gold", fields=[category()], expected={"topic": ["news", "sport"]}),
         "item.expected.topic", "1 to 1 different"),
        (item(kind="gold", fields=[{"id": "r", "type": "rank", "title": "t"}],
              expected={"r": [0, 2]}), "item.expected.r", "indexes 0 to 1"),
        (item(kind="gold", fields=[rating(), category()], expected={"topic": "news"},
              tolerance={"topic": 1}), "item.tolerance.topic", "rating (points) and rank"),
        (item(kind="gold", fields=[rating()], expected={"quality": 2},
              tolerance={"quality": -1}), "item.tolerance.quality", "from 0"),
        (item(kind="gold", fields=[rating(), rating("other")], expected={"quality": 2},
              tolerance={"other": 1}), "item.tolerance.other", "expected value"),
    ],
)  # fmt: skip
def test_bad_items_name_where_and_the_field(
    record: dict[str, Any], where: str, message: str
) -> None:
    with pytest.raises(InvalidItem) as error:
        HIT.validate_item(record)
    assert error.value.where == where
    assert message in error.value.message


def test_an_items_own_fields_replace_the_studys_and_expected_values_are_normalised() -> None:
    fields = [
        rating(scale=[0, 10]),
        category(max_choices=2),
        {"id": "r", "type": "rank", "title": "t"},
    ]
    spec = HIT.validate_item(
        item(
            kind="training",
            fields=fields,
            expected={"quality": 10, "topic": ["sport", "news"], "r": [1, 0]},
            tolerance={"r": 1},
        )
    )
    assert spec.content["fields"][0]["scale"] == [0, 10]
    assert spec.expected["expected"] == {"quality": 10, "topic": ["news", "sport"], "r": [1, 0]}
    (planned,) = HIT.plan_items([spec], STUDY)
    assert planned == spec  # its own fields, checked already
    config = STUDY.to_config()
    view = HIT.view(spec.content, {"step": 0}, config)
    assert [field["id"] for field in view["fields"]] == ["quality", "topic", "r"]


def test_plan_checks_items_without_fields_against_the_studys() -> None:
    gold = HIT.validate_item(
        item("g", kind="gold", expected={"problems": "missing", "faithfulness": 3})
    )
    (planned,) = HIT.plan_items([gold], STUDY)
    assert planned.expected["expected"] == {"problems": ["missing"], "faithfulness": 3}
    for expected, where in (
        ({"problems": ["lost"]}, "item g.expected.problems"),
        ({"faith": 3}, "item g.expected.faith"),
        ({"strengths": [0, 1]}, "item g.expected.strengths"),
    ):
        with pytest.raises(InvalidItem) as error:
            HIT.plan_items([HIT.validate_item(item("g", kind="gold", expected=expected))], STUDY)
        assert error.value.where == where
    nothing = HIT.validate_config(None)
    with pytest.raises(InvalidItem, match="declares no fields"):
        HIT.plan_items([HIT.validate_item(item())], nothing)
    ranks = HIT.validate_config({"fields": [{"id": "best", "type": "rank", "title": "Order"}]})
    with pytest.raises(InvalidItem, match="at least 2") as error:
        HIT.plan_items([HIT.validate_item({"id": "one", "text": "alone"})], ranks)
    assert error.value.where == "item one.attachments"


def test_the_sample_items_validate_against_the_sample_study() -> None:
    specs = [
        HIT.validate_item(r)
        for name in ("items.jsonl", "gold.jsonl", "attention.jsonl")
        for r in records(name)
    ]
    assert len(specs) >= 20
    assert all(len(spec.content["attachments"]) == 2 for spec in specs)
    planned = HIT.plan_items(specs, STUDY)
    assert {spec.kind for spec in planned} == {"real", "gold", "attention"}
    assert all("truth" in spec.meta for spec in planned)


# -- matching: gold, attention, labels ---------------------------------------------------------
def answer(**values: Any) -> dict[str, Any]:
    return {"fields": values}


def test_gold_accuracy_is_the_share_of_expected_fields_matched() -> None:
    expected = {
        "expected": {"quality": 4, "topic": ["news", "sport"], "order": [2, 0, 1]},
        "tolerance": {"quality": 1, "order": 1},
    }
    right = answer(quality=5, topic=["sport", "news"], order=[0, 2, 1], why="x")
    assert HIT.gold_accuracy(expected, right) == 1.0 and HIT.score(expected, right) == 1.0
    assert HIT.passed_attention(expected, right)
    two_swaps = answer(quality=3, topic=["news"], order=[0, 1, 2])
    assert HIT.gold_accuracy(expected, two_swaps) == pytest.approx(1 / 3)
    assert not HIT.passed_attention(expected, two_swaps)
    assert HIT.gold_accuracy(expected, answer(quality=None, topic=None, order=None)) == 0.0
    strict = {"expected": {"quality": 4}, "tolerance": {}}
    assert HIT.gold_accuracy(strict, answer(quality=5)) == 0.0
    assert HIT.score({}, right) is None and not HIT.passed_attention({}, right)
    assert kendall_distance([0, 1, 2], [2, 1, 0]) == 3 and kendall_distance([1, 0], [1, 0]) == 0


def test_labels_per_field_and_back() -> None:
    given = answer(
        quality=4,
        single=["news"],
        multi=["sport", "news"],
        order=[2, 0, 1],
        why="free text",
        skipped=None,
        none_picked=[],
    )
    assert HIT.answer_labels(given) == {
        "quality": 4,
        "single": "news",
        "multi": "news|sport",
        "order": 2,
        "none_picked": "",
    }
    expected = {
        "expected": {
            "quality": 4,
            "single": ["news"],
            "multi": ["news", "sport"],
            "order": [2, 0, 1],
        },
        "tolerance": {},
    }
    labels = HIT.expected_labels(expected)
    assert labels == {"quality": 4, "single": "news", "multi": "news|sport", "order": 2}
    promoted = HIT.expected_from_labels(labels)
    assert promoted["expected"] == {
        "quality": 4,
        "single": ["news"],
        "multi": ["news", "sport"],
        "order": 2,
    }
    # A gold item promoted from labels scores answers as the labels would.
    assert HIT.gold_accuracy(promoted, given) == 1.0
    assert (
        HIT.gold_accuracy(
            promoted, answer(quality=4, single=["news"], multi=["news"], order=[0, 2, 1])
        )
        == 0.5
    )


def test_reviewers_read_answers_in_the_fields_terms() -> None:
    config = STUDY.to_config()
    content = {"attachments": [{"type": "text", "content": "a"}]}
    given = answer(
        faithfulness=4,
        problems=["missing", "other"],
        strengths=[2, 0, 1],
        **{"other problem": "it rambles"},
    )
    said = HIT.describe_answer(given, content, config)
    assert said == (
        "faithfulness: 4/5 · problems: It leaves out a key point, Something else · "
        "other problem: it rambles · strengths: Clarity > Accuracy > Brevity"
    )
    described = HIT.describe_expected({"expected": {"faithfulness": 2}}, content, config)
    assert described == "faithfulness: 2/5"
    # A gold promoted from labels keeps a rank's top index: named by its label.
    promoted = HIT.expected_from_labels({"strengths": 2, "problems": "missing|other"})
    assert HIT.describe_expected(promoted, content, config) == (
        "problems: It leaves out a key point, Something else · strengths: Clarity first"
    )


def test_answers_from_elsewhere_are_checked_like_a_workers_but_may_skip_fields() -> None:
    config = STUDY.to_config()
    content = HIT.validate_item(item()).content
    columns = {
        "worker": "llm",
        "field:faithfulness": "4",
        "field:problems": "missing|other",
        "field:other problem": "it rambles",
        "strengths": "2>0>1",
    }
    assert HIT.import_answer(content, columns, config) == {
        "fields": {
            "faithfulness": 4,
            "problems": ["missing", "other"],
            "other problem": "it rambles",
            "strengths": [2, 0, 1],
        }
    }
    partial = HIT.import_answer(content, {"fields": {"faithfulness": 2}}, config)
    assert partial == {
        "fields": {"faithfulness": 2, "problems": None, "other problem": None, "strengths": None}
    }
    with pytest.raises(InvalidItem) as error:
        HIT.import_answer(content, {"fields": {"faithfulness": 9}}, config)
    assert error.value.where == "fields.faithfulness"
    with pytest.raises(InvalidItem) as error:
        HIT.import_answer(
            content, {"fields": {"problems": ["missing"], "other problem": "x"}}, config
        )
    assert error.value.where == "fields.other problem"
