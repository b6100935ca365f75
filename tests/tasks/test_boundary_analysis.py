"""Boundary-detection analysis, report and RoFT CSV import/export, on a hand-checked dataset."""

from __future__ import annotations

import io
import json
import pathlib
from typing import Any

import pytest

from tasks.boundary.analysis import analyze, points, summarize
from tasks.boundary.report import render_report
from tasks.boundary.roft import ROFT_COLUMNS, parse_roft_csv, to_roft_rows, write_roft_csv

N = 10
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS = ("distance_histogram.png", "points_by_position.png", "points_by_decoding.png")

# Items (10 sentences each):
#   i1 real, boundary 4,  category "news & politics", generator gpt2,  p = 0.4
#   i2 real, boundary 10 (all human), category stories, generator human, no decoding p
#   i3 gold, boundary 2,  category stories, generator xl, p = 0.9
#   a1 attention (all human, boundary 10)
ITEMS: dict[str, dict[str, Any]] = {
    "i1": {"kind": "real", "boundary": 4, "category": "news & politics", "generator": "gpt2",
           "decoding_value": 0.4},
    "i2": {"kind": "real", "boundary": 10, "category": "stories", "generator": "human",
           "decoding_value": None},
    "i3": {"kind": "gold", "boundary": 2, "category": "stories", "generator": "xl",
           "decoding_value": 0.9},
    "a1": {"kind": "attention", "boundary": 10, "category": "stories", "generator": "human",
           "decoding_value": None},
}  # fmt: skip

# (worker, item, position, guess, points, explanation, reasons)
#   distance = guess - boundary; points by the rule.
ANSWERS: list[tuple[str, str, int, int, int, str | None, list[str]]] = [
    ("w1", "i1", 0, 4, 5, "Sentence 5 repeats itself.", ["repetition"]),  # d 0
    ("w1", "i2", 1, 10, 5, None, []),  # d 0 (all human)
    ("w1", "a1", 2, 10, 5, None, []),  # attention passed
    ("w1", "i3", 3, 3, 4, "Odd grammar", ["grammar"]),  # d +1
    ("w2", "i2", 0, 7, 0, None, []),  # d -3
    ("w2", "i1", 1, 6, 3, "sentence 5   REPEATS itself.", ["repetition", "grammar"]),  # d +2
    ("w2", "i3", 2, 2, 5, None, []),  # d 0
    ("w2", "a1", 3, 10, 5, None, []),  # attention passed
    ("w3", "a1", 0, 4, 0, "random", ["other"]),  # attention FAILED
    ("w3", "i3", 1, 9, 0, "sentence 5 repeats itself.", ["generic"]),  # d +7
    ("w3", "i1", 2, 3, 0, "   ", []),  # d -1
    ("w3", "i2", 3, 10, 5, None, []),  # d 0
]  # fmt: skip


def sentences(item: str) -> list[str]:
    return [f"{item} sentence {k}." for k in range(1, N + 1)]


def make_rows() -> list[dict[str, Any]]:
    rows = []
    for rid, (worker, item, position, guess, pts, explanation, reasons) in enumerate(ANSWERS, 1):
        info = ITEMS[item]
        rows.append({
            "response_id": rid, "worker": worker, "item": item, "kind": info["kind"],
            "guess": guess, "boundary": info["boundary"], "n_sentences": N, "points": float(pts),
            "category": info["category"], "generator": info["generator"],
            "decoding_value": info["decoding_value"], "explanation": explanation,
            "reasons": reasons, "position": position,
            "attention_passed": (guess == N) if info["kind"] == "attention" else None,
            "sentences": sentences(item), "created_at": f"2024-05-01T10:{rid:02d}:00",
            "prompt_index": rid * 10,
        })  # fmt: skip
    return rows


@pytest.fixture()
def data() -> dict[str, Any]:
    return analyze(make_rows(), {"w3", "ghost"})


# -- points rule ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("guess", "boundary", "expected"),
    [
        (1, 4, 0),  # far before
        (3, 4, 0),  # one before: early guesses earn nothing
        (4, 4, 5),  # exact
        (5, 4, 4),  # after by 1
        (6, 4, 3),
        (7, 4, 2),
        (8, 4, 1),
        (9, 4, 0),  # after by 5
        (10, 4, 0),  # after by 6: floored at 0, never negative
        (10, 10, 5),  # all human, guessed all human
        (9, 10, 0),  # all human, guessed a machine sentence
        (1, 1, 5),  # boundary at the very first sentence
    ],
)
def test_points_rule(guess: int, boundary: int, expected: int) -> None:
    assert points(guess, boundary) == expected


def test_points_rejects_bad_indices() -> None:
    with pytest.raises(ValueError, match="guess"):
        points(0, 4)
    with pytest.raises(ValueError, match="boundary"):
        points(4, 0)
    with pytest.raises(TypeError, match="int"):
        points(4.0, 4)  # type: ignore[arg-type]


def test_fixture_points_follow_rule() -> None:
    for row in make_rows():
        assert row["points"] == points(row["guess"], row["boundary"]), row


# -- full set ------------------------------------------------------------------------------


def test_full_headline(data: dict[str, Any]) -> None:
    full = data["full"]
    # 9 real+gold rows; the 3 attention rows are left out.
    assert full["n_annotations"] == 9
    assert full["n_workers"] == 3
    assert full["n_items"] == 3
    # distances: w1 0,0,+1; w2 -3,+2,0; w3 +7,-1,0 -> 4 exact of 9
    assert full["exact_accuracy"] == pytest.approx(4 / 9, abs=1e-4)
    # sum = 1 - 3 + 2 + 7 - 1 = 6 -> 6/9
    assert full["mean_distance"] == pytest.approx(6 / 9, abs=1e-4)
    # points: w1 5+5+4=14, w2 0+3+5=8, w3 0+0+5=5 -> 27/9 = 3
    assert full["mean_points"] == pytest.approx(3.0)


def test_full_histogram_covers_whole_range(data: dict[str, Any]) -> None:
    assert data["full"]["distance_histogram"] == {
        "-3": 1, "-2": 0, "-1": 1, "0": 4, "1": 1, "2": 1,
        "3": 0, "4": 0, "5": 0, "6": 0, "7": 1,
    }  # fmt: skip
    assert list(data["full"]["distance_histogram"]) == [str(d) for d in range(-3, 8)]


def test_points_by_position(data: dict[str, Any]) -> None:
    by_pos = data["full"]["points_by_position"]
    assert [p["position"] for p in by_pos] == list(range(10))
    # pos 0: w1 i1 5, w2 i2 0 (w3's a1 is attention) -> mean 2.5, sd 3.5355, sem 2.5
    assert by_pos[0] == {"position": 0, "n": 2, "mean": 2.5, "sem": pytest.approx(2.5, abs=1e-4)}
    # pos 1: 5, 3, 0 -> mean 8/3; sd = sqrt(12.667/2) = 2.5166; sem = 2.5166/sqrt(3) = 1.4530
    assert by_pos[1]["n"] == 3
    assert by_pos[1]["mean"] == pytest.approx(8 / 3, abs=1e-4)
    assert by_pos[1]["sem"] == pytest.approx(1.4530, abs=1e-4)
    # pos 3: w1 i3 4, w3 i2 5 -> mean 4.5, sem 0.5 (w2's a1 is attention)
    assert by_pos[3] == {"position": 3, "n": 2, "mean": 4.5, "sem": pytest.approx(0.5)}
    assert by_pos[9] == {"position": 9, "n": 0, "mean": None, "sem": None}


def test_points_by_decoding(data: dict[str, Any]) -> None:
    # p 0.4 = i1: 5, 3, 0; p 0.9 = i3: 4, 5, 0; i2 (no p) is skipped
    by_dec = data["full"]["points_by_decoding"]
    assert [d["value"] for d in by_dec] == [0.4, 0.9]
    assert [d["n"] for d in by_dec] == [3, 3]
    assert by_dec[0]["mean"] == pytest.approx(8 / 3, abs=1e-4)
    assert by_dec[1]["mean"] == pytest.approx(3.0)


def test_skill_range(data: dict[str, Any]) -> None:
    # worker means 14/3, 8/3, 5/3; 5% of 3 workers rounds to 0 -> at least 1 each end
    skill = data["full"]["skill_range"]
    assert skill["n_workers_each"] == 1
    assert skill["top_5pct_mean"] == pytest.approx(14 / 3, abs=1e-4)
    assert skill["bottom_5pct_mean"] == pytest.approx(5 / 3, abs=1e-4)


def test_agreement(data: dict[str, Any]) -> None:
    # i1 guesses 4,6,3: 3 pairs, none equal, (4,3) within one
    # i2 guesses 10,7,10: 3 pairs, (10,10) equal
    # i3 guesses 3,2,9: 3 pairs, (3,2) within one
    # a1 (attention, 10,10,4) must not count, or there would be 12 pairs.
    agreement = data["full"]["agreement"]
    assert agreement["n_items"] == 3
    assert agreement["n_pairs"] == 9
    assert agreement["same_sentence"] == pytest.approx(1 / 9, abs=1e-4)
    assert agreement["within_one"] == pytest.approx(3 / 9, abs=1e-4)


def test_explanations_and_reasons(data: dict[str, Any]) -> None:
    # non-empty: w1 i1, w2 i1 (same after case/space folding), w1 i3, w3 i3 (same again);
    # w3's blank one and the attention row's "random" do not count.
    assert data["full"]["explanations"] == {"n_explanations": 4, "n_unique": 2, "n_copies": 2}
    reasons = data["full"]["reasons"]
    assert reasons["repetition"] == 2
    assert reasons["grammar"] == 2
    assert reasons["generic"] == 1
    assert reasons["other"] == 0  # only given on an attention check


def test_by_category_and_generator(data: dict[str, Any]) -> None:
    by_cat = data["full"]["by_category"]
    assert set(by_cat) == {"news & politics", "stories"}
    # news = i1 only: points 5, 3, 0; one exact of three
    assert by_cat["news & politics"]["n_annotations"] == 3
    assert by_cat["news & politics"]["exact_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert by_cat["news & politics"]["mean_points"] == pytest.approx(8 / 3, abs=1e-4)
    # stories = i2 + i3: points 5,0,5 + 4,5,0 = 19/6; distances 0,-3,0,+1,0,+7 -> 3 exact
    assert by_cat["stories"]["n_annotations"] == 6
    assert by_cat["stories"]["mean_points"] == pytest.approx(19 / 6, abs=1e-4)
    assert by_cat["stories"]["exact_accuracy"] == pytest.approx(0.5)
    assert "by_category" not in by_cat["stories"]  # no further splitting
    by_gen = data["full"]["by_generator"]
    assert set(by_gen) == {"gpt2", "human", "xl"}
    assert by_gen["human"]["mean_points"] == pytest.approx(10 / 3, abs=1e-4)


def test_every_rater_group_counts_and_is_named() -> None:
    """w3's answers come from an imported RoFT batch: every figure pools both groups and
    says so, and the split by rater group gives each alone."""
    rows = [{**row, "rater_group": "roft" if row["worker"] == "w3" else "crowd"}
            for row in make_rows()]  # fmt: skip
    data = analyze(rows, {"w3"})
    full, filtered = data["full"], data["filtered"]
    assert full["rater_groups"] == ["crowd", "roft"] and full["n_workers"] == 3
    assert filtered["rater_groups"] == ["crowd"]
    by_group = full["by_rater_group"]
    assert set(by_group) == {"crowd", "roft"}
    # roft = w3's three scored answers: distances +7, -1, 0 (points 0, 0, 5)
    assert by_group["roft"]["n_annotations"] == 3 and by_group["roft"]["n_workers"] == 1
    assert by_group["roft"]["exact_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert by_group["roft"]["mean_points"] == pytest.approx(5 / 3, abs=1e-4)
    assert by_group["crowd"]["n_annotations"] == 6 == filtered["n_annotations"]
    assert by_group["crowd"]["rater_groups"] == ["crowd"]
    assert data["excluded"]["by_rater_group"] == {
        "crowd": {"n_workers": 0, "n_responses": 0},
        "roft": {"n_workers": 1, "n_responses": 4},
    }
    # Rows without a group (older callers) are the crowd's.
    assert summarize(make_rows())["rater_groups"] == ["crowd"]


def test_the_report_names_the_rater_groups(tmp_path: pathlib.Path) -> None:
    rows = [{**row, "rater_group": "roft" if row["worker"] == "w3" else "crowd"}
            for row in make_rows()]  # fmt: skip
    data = analyze(rows, {"w3"})
    data["rules"] = {"copied_reasons": {"workers": 1, "responses": 4,
                                        "by_rater_group": {"roft": {"workers": 1,
                                                                    "responses": 4}}}}  # fmt: skip
    page = render_report(data, tmp_path, "Imported")
    assert "Every figure pools the rater groups: crowd, roft (full set); crowd (filtered" in page
    assert "<h2>By rater group</h2>" in page
    assert '<table id="excluded-groups">' in page and "<td>roft</td><td>1</td><td>4</td>" in page
    assert "<td>copied_reasons</td>" in page and "roft 1/4" in page


# -- filtered set, attention, exclusion ----------------------------------------------------


def test_filtered_set_drops_excluded_worker(data: dict[str, Any]) -> None:
    filtered = data["filtered"]
    # w1 + w2 only: distances 0,0,+1,-3,+2,0
    assert filtered["n_annotations"] == 6
    assert filtered["n_workers"] == 2
    assert filtered["exact_accuracy"] == pytest.approx(0.5)
    assert filtered["mean_distance"] == pytest.approx(0.0)
    assert filtered["mean_points"] == pytest.approx(22 / 6, abs=1e-4)
    assert filtered["distance_histogram"] == {"-3": 1, "-2": 0, "-1": 0, "0": 3, "1": 1, "2": 1}
    # i1 (4,6): apart; i2 (10,7): apart; i3 (3,2): within one
    assert filtered["agreement"] == {
        "n_items": 3, "n_pairs": 3, "same_sentence": 0.0,
        "within_one": pytest.approx(1 / 3, abs=1e-4),
    }  # fmt: skip
    assert filtered["explanations"] == {"n_explanations": 3, "n_unique": 2, "n_copies": 1}
    assert filtered["skill_range"]["bottom_5pct_mean"] == pytest.approx(8 / 3, abs=1e-4)


def test_attention_and_excluded(data: dict[str, Any]) -> None:
    assert data["attention"] == {
        "n_checks": 3, "n_failed_checks": 1, "workers_checked": 3, "workers_failed": 1,
        "worker_failure_rate": pytest.approx(1 / 3, abs=1e-4), "failed_workers": ["w3"],
    }  # fmt: skip
    # "ghost" never answered, so only w3 counts; w3 had 4 responses (attention included)
    assert data["excluded"] == {"n_workers": 1, "n_responses": 4}


def test_attention_verdict_derived_when_not_stored() -> None:
    rows = [r for r in make_rows() if r["kind"] == "attention"]
    for row in rows:
        row["attention_passed"] = None
    assert analyze(rows, set())["attention"]["failed_workers"] == ["w3"]


def test_output_is_strict_json(data: dict[str, Any]) -> None:
    json.dumps(data, allow_nan=False)


def test_empty_dataset() -> None:
    data = analyze([], set())
    json.dumps(data, allow_nan=False)
    full = data["full"]
    assert full["n_annotations"] == 0
    assert full["exact_accuracy"] is None
    assert full["mean_points"] is None
    assert full["distance_histogram"] == {}
    assert full["agreement"]["same_sentence"] is None
    assert full["skill_range"] == {
        "top_5pct_mean": None, "bottom_5pct_mean": None, "n_workers_each": 0,
    }  # fmt: skip
    assert data["attention"]["worker_failure_rate"] is None
    assert data["excluded"] == {"n_workers": 0, "n_responses": 0}


def test_summarize_ignores_attention_only_rows() -> None:
    rows = [r for r in make_rows() if r["kind"] == "attention"]
    assert summarize(rows)["n_annotations"] == 0


def test_analyze_rejects_incomplete_rows() -> None:
    rows = make_rows()
    del rows[2]["guess"]
    with pytest.raises(ValueError, match="guess"):
        analyze(rows, set())


# -- report --------------------------------------------------------------------------------


def test_report_renders_numbers_and_plots(data: dict[str, Any], tmp_path: pathlib.Path) -> None:
    page = render_report(data, tmp_path / "out", "Study <1>")
    assert "<title>Study &lt;1&gt;</title>" in page
    assert "<1>" not in page
    for name in PLOTS:
        assert (tmp_path / "out" / name).read_bytes().startswith(PNG_MAGIC)
    assert page.count("data:image/png;base64,") == 3
    assert "33.3%" in page  # worker failure rate
    assert "Workers caught: w3" in page
    assert "44.4%" in page  # full exact accuracy
    assert "50.0%" in page  # filtered exact accuracy
    assert "3.67" in page  # filtered mean points
    assert "news &amp; politics" in page  # category escaped
    assert "Contradicts world knowledge" in page  # reason labels
    assert "Generator" in page and "xl" in page


def test_report_on_empty_data(tmp_path: pathlib.Path) -> None:
    page = render_report(analyze([], set()), tmp_path, "Empty")
    assert "no data" in page
    for name in PLOTS:
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)


# -- RoFT CSV ------------------------------------------------------------------------------


def scored_rows() -> list[dict[str, Any]]:
    return [r for r in make_rows() if r["kind"] != "attention"]


def test_roft_export_layout_and_off_by_one() -> None:
    records = {int(r["generation"]): r for r in to_roft_rows(scored_rows())}
    all_human = records[2]  # w1 on i2: boundary 10, guess 10
    assert list(all_human) == list(ROFT_COLUMNS)
    assert all_human["true_boundary_index"] == "9"  # our 10 == RoFT 9 (all human)
    assert all_human["predicted_boundary_index"] == "9"
    assert all_human["gen_body"] == ""
    assert all_human["prompt_body"].split("_SEP_") == sentences("i2")
    assert all_human["dec_strat_value"] == ""
    mixed = records[6]  # w2 on i1: boundary 4, guess 6
    assert mixed["true_boundary_index"] == "3"
    assert mixed["predicted_boundary_index"] == "5"
    assert mixed["prompt_body"].split("_SEP_") == sentences("i1")[:4]
    assert mixed["gen_body"].split("_SEP_") == sentences("i1")[4:]
    assert mixed["reason"] == "repetition; grammar; sentence 5   REPEATS itself."
    assert mixed["dataset"] == "news & politics" and mixed["model"] == "gpt2"
    assert mixed["annotator"] == "w2" and mixed["points"] == "3"
    assert mixed["recipe_familiarity"] == "-1" and mixed["read_guide"] == "-1"
    assert records[1]["reason"] == "repetition; Sentence 5 repeats itself."
    assert records[5]["reason"] == "-1"  # no tags, no text


def test_roft_round_trip() -> None:
    rows = scored_rows()
    handle = io.StringIO(newline="")
    assert write_roft_csv(rows, handle) == len(rows)
    handle.seek(0)
    assert handle.readline().strip() == ",".join(ROFT_COLUMNS)
    handle.seek(0)
    parsed = parse_roft_csv(handle)
    assert len(parsed) == len(rows)
    for row, back in zip(rows, parsed, strict=True):
        assert back["guess"] == row["guess"]
        assert back["boundary"] == row["boundary"]
        assert back["sentences"] == row["sentences"]
        assert back["annotator"] == row["worker"]
        assert back["points"] == row["points"]
        assert back["dec_strat_value"] == row["decoding_value"]
        assert back["reason_tags"] == row["reasons"]
        assert back["explanation"] == (row["explanation"] or "").strip()
        assert back["dataset"] == row["category"]


def test_roft_export_rejects_separator_in_text() -> None:
    row = scored_rows()[0]
    row["sentences"] = ["a_SEP_b", *row["sentences"][1:]]
    with pytest.raises(ValueError, match="_SEP_"):
        to_roft_rows([row])


HEADER = ",".join(ROFT_COLUMNS)


def roft_line(
    predicted: str = "2", true: str = "3", reason: str = "-1", gen: str = "d_SEP_e"
) -> str:
    values = [
        "2021-09-06",
        "gpt2",
        "Recipes",
        "17",
        "A",
        "0.4",
        predicted,
        true,
        "5",
        reason,
        "1",
        "a_SEP_b_SEP_c_SEP_x",
        "2",
        gen,
        "-1",
        "-1",
        "-1",
        "-1",
        "Yes",
        "",
    ]
    return ",".join(values)  # fmt: skip


def test_parse_public_roft_layout() -> None:
    # All-human passage of 4 sentences: RoFT 3 (last sentence) is our 4; gen_body empty.
    text = "\n".join([HEADER, roft_line("3", "3", "\"['common_sense', 'grammar']\"", "")])
    (record,) = parse_roft_csv(io.StringIO(text))
    assert record["boundary"] == 4 and record["guess"] == 4
    assert record["sentences"] == ["a", "b", "c", "x"]
    assert record["reason_tags"] == ["common_sense", "grammar"]
    assert record["explanation"] == ""


def test_parse_validates_boundary_against_sentences() -> None:
    # 4 prompt sentences, no generation: RoFT index 9 cannot fit
    text = "\n".join([HEADER, roft_line("2", "9", gen="")])
    with pytest.raises(ValueError, match="line 2: true_boundary_index 9 is outside 0..3"):
        parse_roft_csv(io.StringIO(text))


def test_parse_truncates_long_generations() -> None:
    text = "\n".join([HEADER, roft_line("2", "3", gen="_SEP_".join("defghijk"))])
    (record,) = parse_roft_csv(io.StringIO(text), max_sentences=10)
    assert len(record["sentences"]) == 10
    (untruncated,) = parse_roft_csv(io.StringIO(text))
    assert len(untruncated["sentences"]) == 12  # 4 prompt + 8 generated


def test_parse_errors_name_line_and_columns() -> None:
    with pytest.raises(ValueError, match="true_boundary_index, points"):
        parse_roft_csv(
            io.StringIO(
                "date,model,dataset,annotator,dec_strat_value,"
                "predicted_boundary_index,reason,prompt_body,gen_body\n"
            )
        )
    # The first record's reason spans two physical lines, so the bad record starts on line 4.
    text = "\n".join([HEADER, roft_line(reason='"two\nlines"'), roft_line(predicted="x")])
    with pytest.raises(ValueError, match=r"line 4: predicted_boundary_index .*'x'"):
        parse_roft_csv(io.StringIO(text))
    with pytest.raises(ValueError, match="line 2: points"):
        parse_roft_csv(io.StringIO("\n".join([HEADER, roft_line().replace(",5,", ",five,")])))
