"""How the review reads to a person (crowd.review.text and HitType.describe_answer): numbers
rounded, nothing shown as "–", evidence entries as sentences about their item, answers in the
HIT type's terms, and no Python repr anywhere, whatever the evidence holds."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from crowd.review import text
from qc.anomalies import WorkerSignals
from qc.config import parse_qc_config
from qc.evidence import worker_evidence
from tasks import get_hit_type

# What a raw Python value looks like in a page: a repr'd dict or list, None, a long float.
RAW = re.compile(r"\{'|\['|\bNone\b|\bTrue\b|\bFalse\b|\d\.\d{5,}")
NOW = datetime(2025, 3, 4, 14, 5, 9, tzinfo=UTC)


def readable(*texts: str) -> None:
    for value in texts:
        assert isinstance(value, str) and value.strip(), value
        assert not RAW.search(value), value


# -- single values -----------------------------------------------------------------------------
def test_numbers_read_as_a_person_writes_them() -> None:
    assert text.percent(0.41000000000000003) == "41%"
    assert text.percent(1.0) == "100%" and text.percent(0) == "0%"
    assert text.percent(0.004) == "0.4%"
    assert text.seconds(12.345) == "12.3 s" and text.seconds(0.4) == "0.4 s"
    assert text.seconds(135) == "2 min 15 s" and text.seconds(120) == "2 min"
    assert text.seconds(3 * 3600 + 60) == "3 h 1 min"
    assert text.count(1234) == "1,234" and text.count(7.0) == "7"
    assert text.number(0.41000000000000003) == "0.41"
    assert text.number(2.5) == "2.5" and text.number(123.456) == "123"
    assert text.number(12.345) == "12.3" and text.number(0.00012) == "0.00012"
    for show in (text.percent, text.seconds, text.count, text.number, text.when):
        assert show(None) == "–"
    assert text.percent(float("nan")) == "nan"  # never a crash, never made up


def test_times_read_in_utc_to_the_minute() -> None:
    assert text.when(NOW) == "2025-03-04 14:05 UTC"
    assert text.when(NOW.isoformat()) == "2025-03-04 14:05 UTC"
    east = NOW.astimezone(timezone(timedelta(hours=2)))
    assert text.when(east.isoformat()) == "2025-03-04 14:05 UTC"
    assert text.when("2025-03-04T14:05:09") == "2025-03-04 14:05 UTC"  # the database's UTC
    assert text.when("yesterday") == "yesterday"


def test_values_are_formatted_by_what_their_key_says() -> None:
    assert text.value_of("gold_accuracy", 0.41000000000000003) == "41%"
    assert text.value_of("too_fast_share", 0.25) == "25%"
    assert text.value_of("gold_below_prob", 0.125) == "12%"
    assert text.value_of("seconds", 2.0) == "2.0 s"
    assert text.value_of("min_seconds_for_text", 10) == "10.0 s"
    assert text.value_of("typing_ms", 1500) == "1.5 s"
    assert text.value_of("assignments_paid", 3) == "3"
    assert text.value_of("sent", True) == "yes" and text.value_of("anything", None) == "–"
    assert text.value_of("items", ["a", "b"]) == "a, b" and text.value_of("items", []) == "none"
    assert text.value_of("created_at", NOW.isoformat()) == "2025-03-04 14:05 UTC"
    assert text.value_of("scores", {"fluency": 4, "mean_rate": 0.5}) == "fluency: 4; mean rate: 50%"
    # A rule's numbers (an audit entry's "evidence") are lines of their own, not a dict.
    details = {"evidence": {"attention_failed": 2, "attention_checks": 3}, "token": "ab12"}
    assert text.lines(details) == ["attention failed: 2", "attention checks: 3", "token: ab12"]
    assert text.inline({}) == "–"


# -- the worker's evidence ---------------------------------------------------------------------
def rows(worker: str = "w") -> list[dict[str, Any]]:
    """QC rows that set off every signal: too fast, pasted, typed too fast, a run, a reused
    explanation, a failed attention check and a gold item half right."""
    out: list[dict[str, Any]] = []
    for i in range(6):
        out.append({
            "response_id": 10 + i, "worker": worker, "item": f"p{i}", "kind": "real",
            "seconds": 2.0 if i == 0 else 30.0, "chars_shown": 400, "surface": "sentence 3",
            "explanation": "the style changes here abruptly" if i < 3 else None,
            "typing": {"keys": 2, "pastes": 1, "pasted_chars": 31, "typing_ms": 0} if i == 1
            else {"keys": 3, "pastes": 0, "pasted_chars": 0, "typing_ms": 0} if i == 2 else None,
        })  # fmt: skip
    out.append({"response_id": 20, "worker": worker, "item": "check-1", "kind": "attention",
                "seconds": 20.0, "attention_passed": False})  # fmt: skip
    out.append({"response_id": 21, "worker": worker, "item": "gold-1", "kind": "gold",
                "seconds": 20.0, "gold_accuracy": 0.41000000000000003})  # fmt: skip
    return out


def test_every_figure_of_real_evidence_reads_as_words() -> None:
    evidence = worker_evidence(rows(), parse_qc_config(None))["w"]
    figures = {f.key: f for f in text.figures(evidence, lambda s: f"<{s}>")}
    shown = {f.label: f.text for f in figures.values()}
    assert shown["Responses"] == "8"
    assert shown["Attention checks"] == "failed 1 of 1"
    assert shown["Gold items"] == "1 answered, 41% right on average"
    assert shown["Too fast to read"] == "1 of 8 (12%)"
    assert shown["Most common answer"] == "100% of 6 answers alike: <sentence 3>"
    assert shown["Longest run of one answer"] == "6 in a row"
    assert shown["Reused explanations"] == "3 answers"
    assert shown["Pasted explanations"] == "1 answers"
    assert shown["Answers"] == "given here (live)" and shown["Rater groups"] == "none"
    assert shown["Answers of their own choice"] == "6"
    assert "Chance they fail checks more often than careful people slip" in shown
    assert re.fullmatch(r"\d+% \(from gold answers and the prior\)", shown["Estimated accuracy"])
    readable(*(f.text for f in figures.values()), *(f.label for f in figures.values()))
    assert "evidence" not in figures and "constant_value" not in figures


def test_gold_worth_less_than_its_count_says_so() -> None:
    def gold(weight: float) -> str:
        evidence = {"gold_n": 8, "gold_accuracy": 0.125, "gold_weight": weight}
        shown = {f.label: f.text for f in text.figures(evidence)}
        assert "Gold weight" not in shown  # read into the gold line, not listed apart
        return shown["Gold items"]

    assert gold(5.21) == "8 answered (worth 5.2 full tests), 12% right on average"
    assert gold(8) == gold(7.98) == "8 answered, 12% right on average"


def test_figures_without_data_say_so_and_unknown_keys_still_read() -> None:
    evidence = {"responses": 0, "attention_checks": 0, "attention_failed": 0, "gold_n": 0,
                "gold_accuracy": None, "gold_mean": 0.5, "gold_below_prob": None,
                "too_fast_share": None, "constant_share": None, "longest_run": None,
                "agreement_kappa": 0.123456789, "peers": ["a", "b"],
                "future": {"x": None}}  # fmt: skip
    shown = {f.label: f.text for f in text.figures(evidence)}
    assert shown["Attention checks"] == "none answered yet"
    assert shown["Gold items"] == "none answered yet"
    assert shown["Estimated accuracy"] == "50% (the prior alone)"
    assert shown["Chance the accuracy is below the threshold"] == "no gold answered yet"
    assert shown["Too fast to read"] == shown["Most common answer"] == "–"
    assert shown["Agreement kappa"] == "0.12"
    assert shown["Peers"] == "a, b" and shown["Future"] == "x: –"
    readable(*shown.values())


def test_agreement_and_collusion_read_as_sentences_naming_the_group() -> None:
    evidence = {"agreement_n": 12, "agreement": 0.31, "agreement_chance": 0.25,
                "agreement_threshold": 0.44, "agreement_below_prob": 0.991,
                "recent_agreement": 0.2, "recent_below_prob": 0.97, "collusion_partners": 2,
                "collusion_group": ["4", "7", "9"],
                "collusion_pairs": [{"workers": ["4", "7"]}]}  # fmt: skip
    shown = {f.label: f.text for f in text.figures(evidence)}
    assert shown["Accuracy against the crowd"] == "31% over 12 answers (chance 25%, threshold 44%)"
    # Known answers (gold, checks) are judged too: the count on real items is named.
    shown = {f.label: f.text for f in text.figures({**evidence, "agreement_real_n": 5})}
    assert shown["Accuracy against the crowd"] == (
        "31% over 12 answers (5 of them on real items; chance 25%, threshold 44%)")  # fmt: skip
    assert "Agreement real n" not in shown  # not listed again as a raw figure
    assert shown["Chance the accuracy against the crowd is below the threshold"] == "99%"
    assert shown["Recent accuracy against the crowd"] == "20%"
    assert shown["Collusion"] == (
        "shares answers with 2 other worker(s) beyond chance; group of workers 4, 7, 9"
    )
    assert "Collusion pairs" not in shown and "Agreement chance" not in shown
    quiet = {
        f.label: f.text
        for f in text.figures(
            {"agreement": None, "agreement_n": 0, "collusion_partners": 0, "collusion_group": []}
        )
    }
    assert quiet["Accuracy against the crowd"] == "no answers shared with enough others yet"
    assert quiet["Collusion"] == "none found"
    readable(*shown.values(), *quiet.values())


def test_the_stopped_reading_posterior_says_since_when() -> None:
    def shown(prob: float | None, since: int | None, n: int = 14) -> str:
        evidence = {"stopped_reading_prob": prob, "stopped_reading_n": n,
                    "stopped_reading_since": since}  # fmt: skip
        figures = {f.label: f.text for f in text.figures(evidence)}
        assert "Stopped reading n" not in figures and "Stopped reading since" not in figures
        return figures["Not reading now"]

    assert shown(0.995, 8) == (
        "probability 0.995, from 14 judged answers and attention checks together (most "
        "probably at random after the first 8)"
    )
    assert shown(0.999, 0).endswith("(at random from the start)")
    assert shown(0.01, None).endswith("(most probably reading)")
    assert shown(None, None, 0) == "no answers or checks judged yet"
    readable(shown(0.995, 8))


def test_each_signal_reads_as_a_sentence_about_its_answer() -> None:
    signals = WorkerSignals().fit(rows()).signals_["w"]
    sections = {s.key: s for s in text.sections(signals, lambda s: f"«{s}»")}
    assert list(sections) == [
        "too_fast", "pasted", "typed_too_fast", "identical_run", "repeated_explanation",
    ]  # fmt: skip
    (fast,) = sections["too_fast"].lines
    assert (fast.item, fast.response_id) == ("p0", 10)
    assert fast.text == "answered in 2.0 s; its 400 characters take at least 10.0 s"
    (pasted,) = sections["pasted"].lines
    assert pasted.text == "31 of the explanation's 31 characters pasted (1 paste)"
    (typed,) = sections["typed_too_fast"].lines
    assert typed.item == "p2" and typed.text == (
        "31 characters typed in 0.0 s (no typing time recorded), 3 keystrokes"
    )
    (run,) = sections["identical_run"].lines
    assert run.text == "6 answers in a row alike, from this one: «sentence 3»"
    assert run.response_id == 10
    (reused,) = sections["repeated_explanation"].lines
    assert reused.text == "“the style changes here abruptly” on items p0, p1, p2"
    for section in sections.values():
        readable(section.title, section.about, *(line.text for line in section.lines))


def test_a_signal_whose_entries_qc_kept_only_the_latest_of_says_how_many_it_found() -> None:
    model = WorkerSignals().fit(rows())
    counts = {**model.counts_["w"], "too_fast": 340}
    found = {s.key: s.found for s in text.sections(model.signals_["w"], counts=counts)}
    assert found == {
        "too_fast": 340, "pasted": None, "typed_too_fast": None, "identical_run": None,
        "repeated_explanation": None,
    }  # fmt: skip


def test_an_unknown_signal_reads_as_labelled_fields() -> None:
    signals = {
        "duplicate_answer": [{"response_id": 3, "item": "x", "same_as": 2, "share": 0.5}],
        "odd": ["just a note", 0.123456789],
        "empty": [],
    }
    sections = text.sections(signals)
    assert [s.title for s in sections] == ["Duplicate answer", "Odd"]
    (line,) = sections[0].lines
    assert (line.item, line.response_id, line.text) == ("x", 3, "same as: 2 · share: 50%")
    assert [line.text for line in sections[1].lines] == ["just a note", "0.12"]
    # A known signal whose entry lacks its numbers still reads, as its fields.
    (broken,) = text.sections({"typed_too_fast": [{"item": "y", "typing_ms": "soon"}]})
    assert (broken.title, broken.lines[0].text) == (
        "Explanations typed implausibly fast",
        "typing time: soon",
    )


# -- answers in the HIT type's terms -----------------------------------------------------------
def test_boundary_answers_count_sentences_from_one() -> None:
    hit = get_hit_type("boundary")
    content = {"sentences": [f"s{i}" for i in range(10)]}
    assert hit.describe_answer({"guess": 5, "all_human": False}, content, {}) == (
        "machine from sentence 6 of 10"
    )
    assert hit.describe_answer({"guess": 10, "all_human": True}, content, {}) == (
        "all 10 sentences human"
    )
    assert hit.describe_expected({"boundary": 3}, content, {}) == "machine from sentence 4 of 10"
    assert hit.describe_expected({}, content, {}) is None


def test_likert_answers_name_each_attribute_on_its_scale() -> None:
    hit = get_hit_type("likert")
    attributes = [
        {"name": "fluency", "question": "How fluent?", "scale": [1, 5],
         "labels": ["not at all", "perfectly"]},
        {"name": "coherence", "question": "How coherent?", "scale": [0, 10]},
        {"name": "tone", "question": "Tone?", "scale": [-3, 3]},
    ]  # fmt: skip
    config = hit.validate_config({"attributes": attributes}).to_config()
    answer = {"ratings": {"tone": -3, "coherence": 7, "fluency": 5}}
    assert hit.describe_answer(answer, {"text": "t"}, config) == (
        "fluency: 5/5 (perfectly) · coherence: 7/10 · tone: -3 (-3 to 3)"
    )
    assert hit.describe_answer({"ratings": {"fluency": 3.5}}, {}, config) == "fluency: 3.5/5"
    expected = {"expected_ratings": {"fluency": 1}}
    assert hit.describe_expected(expected, {}, config) == "fluency: 1/5 (not at all)"
    assert hit.describe_expected({"expected_rating": 2}, {}, config) == "2 on every question"
    # A rating of an attribute the config no longer has still shows, by its name.
    assert hit.describe_answer({"ratings": {"style": 2}}, {}, config) == "style: 2"
    # The default config (the story template) names its own attributes.
    default = hit.validate_config({}).to_config()
    described = hit.describe_answer({"ratings": {"grammaticality": 4}}, {}, default)
    assert described.startswith("grammaticality: 4/5"), described


def test_comparison_answers_show_the_pick_and_where_it_was_shown() -> None:
    hit = get_hit_type("comparison")
    content = {"query": "q", "candidates": ["short", "a much longer text " * 10]}
    answer = {"best": 1, "shown": 0, "order": [1, 0]}
    described = hit.describe_answer(answer, content, {})
    assert described.startswith("candidate 2 of 2: “a much longer text a much")
    assert described.endswith("…”, shown at position 1")
    assert len(described) < 130
    assert hit.describe_answer({"best": 0}, content, {}) == "candidate 1 of 2: “short”"
    assert hit.describe_expected({"best": 0}, content, {}) == "candidate 1 of 2: “short”"
    assert hit.describe_expected({}, content, {}) is None


def test_an_answer_the_type_cannot_read_still_reads_as_fields() -> None:
    hit = get_hit_type("boundary")
    assert text.describe_answer(hit, {"guess": "?"}, {"sentences": ["a"]}, {}) == "guess: ?"
    assert text.describe_answer(hit, {}, {}, {}) == "–"
    assert text.describe_expected(hit, {"boundary": 1}, {}, {}) == "boundary: 1"
    assert text.describe_expected(hit, {}, {}, {}) is None
    taboo = get_hit_type("taboo")
    assert text.describe_answer(taboo, {"result": "win"}, {}, {}) == "result: win"


# -- one worker's page -------------------------------------------------------------------------
def history() -> dict[str, Any]:
    answer = {"kind": "real", "surface": "sentence 2", "seconds": 31.25, "gold_accuracy": None,
              "attention_passed": None, "signals": [], "explanation": None,
              "created_at": NOW.isoformat()}  # fmt: skip
    return {
        "evidence": {"responses": 3, "constant_share": 2 / 3, "constant_value": "sentence 2",
                     "evidence": {"too_fast": [], "identical_run": []}},  # fmt: skip
        "answers": [
            {**answer, "response_id": 7, "item": "p1", "answer": {"guess": 2, "all_human": False}},
            {**answer, "response_id": 8, "item": "gold-1", "kind": "gold", "gold_accuracy": 0.6,
             "answer": {"guess": 2, "all_human": False}, "signals": ["too_fast"]},
            {**answer, "response_id": 9, "item": "check-1", "kind": "attention",
             "attention_passed": False, "answer": {"guess": 4, "all_human": True}},
        ],  # fmt: skip
        "audit": [{"id": 1, "at": NOW.isoformat(), "actor": "rule:attention_failed",
                   "action": "soft_block", "worker_id": 5, "reason": "failed 1 of 1",
                   "details": {"evidence": {"attention_failed": 1,
                                            "gold_rate": 0.41000000000000003}}}],
        "bonuses": [{"amount": "0.50", "reason": "good", "actor": "x", "at": NOW.isoformat()}],
    }  # fmt: skip


def test_the_worker_page_shows_misses_answers_and_audit_in_words() -> None:
    hit = get_hit_type("boundary")
    items = {
        7: ({"sentences": ["a"] * 4}, {"boundary": 2}),
        8: ({"sentences": ["a"] * 4}, {"boundary": 1}),
        9: ({"sentences": ["a"] * 4}, {"boundary": 3}),
    }
    view = text.worker_view(history(), items, hit, {})
    answers = view["answers"]
    assert [a.text for a in answers] == [
        "machine from sentence 3 of 4", "machine from sentence 3 of 4", "all 4 sentences human",
    ]  # fmt: skip
    # The expected answer of gold and attention items only: a real item's is never shown.
    assert [a.expected for a in answers] == [
        None, "machine from sentence 2 of 4", "machine from sentence 4 of 4",
    ]  # fmt: skip
    assert [(a.seconds, a.gold, a.attention) for a in answers] == [
        ("31.2 s", "", ""), ("31.2 s", "60%", ""), ("31.2 s", "", "failed"),
    ]  # fmt: skip
    assert answers[1].signals == "too fast" and answers[0].at == "2025-03-04 14:05 UTC"

    attention, gold = view["sections"]
    assert (attention.title, gold.title) == ("Attention checks failed", "Gold items missed")
    assert [(line.item, line.response_id, line.text) for line in attention.lines] == [
        ("check-1", 9, "answered all 4 sentences human; the check asked for "
                       "machine from sentence 4 of 4"),
    ]  # fmt: skip
    assert [(line.item, line.response_id, line.text) for line in gold.lines] == [
        ("gold-1", 8, "answered machine from sentence 3 of 4; expected machine from sentence 2 "
                      "of 4 (60% credit)"),
    ]  # fmt: skip
    common = next(f for f in view["figures"] if f.key == "constant_share")
    assert common.text == "67% of answers alike: machine from sentence 3 of 4 (as on item p1)"

    (entry,) = view["audit"]
    assert (entry.at, entry.action) == ("2025-03-04 14:05 UTC", "soft-block")
    assert entry.details == ["attention failed: 1", "chance the next item is gold: 41%"]
    assert view["bonuses"][0]["at"] == "2025-03-04 14:05 UTC"
    readable(*(a.text for a in answers), *(line.text for s in view["sections"] for line in s.lines),
             *(f.text for f in view["figures"]), *entry.details)  # fmt: skip


@pytest.mark.parametrize("name", ["boundary", "likert", "comparison", "taboo", "form"])
def test_every_built_in_type_describes_its_answers(name: str) -> None:
    """Each type's simulated answers to its own sample items read without a repr."""
    hit = get_hit_type(name)
    samples = {
        "boundary": ({"sentences": ["a", "b", "c"]}, {"guess": 1, "all_human": False}),
        "likert": ({"text": "t"}, {"ratings": {"grammaticality": 4, "cohesiveness": None}}),
        "comparison": ({"query": "q", "candidates": ["x", "y"]}, {"best": 0, "shown": 1}),
        "taboo": ({}, {"result": "guessed"}),
        "form": (
            {
                "attachments": [{"type": "text", "content": "t"}],
                "fields": [
                    {
                        "id": "topic",
                        "type": "category",
                        "title": "Topic?",
                        "choices": [{"label": "Sport", "value": "sport"}],
                    }
                ],
            },
            {"fields": {"topic": ["sport"], "note": None}},
        ),
    }
    content, answer = samples[name]
    config = hit.validate_config({}).to_config()
    readable(text.describe_answer(hit, answer, content, config))
