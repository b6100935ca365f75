"""Comparison analysis and report, on a small hand-worked dataset and edge cases.

Items (canonical candidates 0..K-1; policies A for the first half, B for the second):
  i1 real K=4   crowd w1:0 w2:0 w3:2   experts e1:0 e2:1   an LLM rater: 2 (ignored)
  i2 gold K=4   best 3 (the experimenter's label counts as an expert label)   crowd w1:3 w2:2
  i3 real K=2   crowd w1:1 w3:0   expert e1:1
  i4 real K=2   crowd w2:0 (one label)
  i5 real K=4   four different policies (no win rate)   crowd w1:0 w2:0
  t1 training K=4 best 1: w1:1 w2:0 w3:1       a1 attention K=2 best 0: w1 passed, w3 failed

Worked by hand (full set):
  worker-worker pairs: i1 3 pairs, 1 agree; i2 1/0; i3 1/0; i5 1/1   -> 2/6 over 4 items
  expert-worker: i1 6 pairs, 2 agree (w1-e1, w2-e1); i2 2/1; i3 2/1  -> 4/10 over 3 items
  expert-expert: i1 e1-e2, 0 of 1 pair                                 -> 0/1, one item: no CI
  chance: mean of 1/K over the 5 items = (.25 + .25 + .5 + .5 + .25) / 5 = 0.35
  win rates (A vs B): K=4 i1 A (2-1), i2 B (2-0); K=2 i3 tie (1-1), i4 A (1-0)
"""

from __future__ import annotations

import json
import pathlib
import random
import re
from collections import Counter
from typing import Any

import numpy as np
import pytest
from scipy import stats

from tasks.comparison.analysis import (
    N_RESAMPLES,
    SEED,
    analyze,
    cluster_bootstrap_ci,
    summarize,
    two_policies,
)
from tasks.comparison.hit import ComparisonHit, draw_order
from tasks.comparison.report import PLOT_FILES, render_report
from tasks.comparison.simulate import ComparisonSimulator

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "tasks" / "comparison" / "samples"
AB4 = ["A", "A", "B", "B"]
ITEMS: dict[str, tuple[str, list[str], int | None]] = {
    "i1": ("real", AB4, None),
    "i2": ("gold", AB4, 3),
    "i3": ("real", ["A", "B"], None),
    "i4": ("real", ["A", "B"], None),
    "i5": ("real", ["A", "B", "C", "D"], None),
    "t1": ("training", AB4, 1),
    "a1": ("attention", ["A", "B"], 0),
}
# (worker, rater group, item, best, shown position)
LABELS: list[tuple[str, str, str, int, int | None]] = [
    ("w1", "crowd", "i1", 0, 0), ("w2", "crowd", "i1", 0, 1), ("w3", "crowd", "i1", 2, 3),
    ("e1", "expert", "i1", 0, None), ("e2", "expert", "i1", 1, None),
    ("llm", "llm", "i1", 2, None),
    ("w1", "crowd", "i2", 3, 0), ("w2", "crowd", "i2", 2, 0),
    ("w1", "crowd", "i3", 1, 1), ("w3", "crowd", "i3", 0, 0), ("e1", "expert", "i3", 1, None),
    ("w2", "crowd", "i4", 0, 0),
    ("w1", "crowd", "i5", 0, 2), ("w2", "crowd", "i5", 0, 0),
    ("w1", "crowd", "t1", 1, 0), ("w2", "crowd", "t1", 0, 0), ("w3", "crowd", "t1", 1, 2),
    ("w1", "crowd", "a1", 0, 1), ("w3", "crowd", "a1", 1, 0),
]  # fmt: skip


def make_row(
    n: int, worker: str, group: str, item: str, best: int, shown: int | None
) -> dict[str, Any]:
    kind, policies, expected = ITEMS[item]
    return {
        "response_id": n,
        "worker": worker,
        "rater_group": group,
        "item": item,
        "kind": kind,
        "category": None,
        "query": f"query {item}",
        "candidates": [f"{item} candidate {i}" for i in range(len(policies))],
        "policies": policies,
        "k": len(policies),
        "best": best,
        "shown": shown,
        "order": None,
        "expected_best": expected,
        "attention_passed": (best == expected) if kind == "attention" else None,
        "source": "live" if group == "crowd" else "imported",
    }


def rows() -> list[dict[str, Any]]:
    return [make_row(n, *label) for n, label in enumerate(LABELS, 1)]


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return analyze(rows(), {"w3"})


def test_counts(data: dict[str, Any]) -> None:
    full = data["full"]
    assert full["n_labels"] == 14
    assert full["n_crowd_labels"] == 10
    assert full["n_expert_labels"] == 3
    assert full["labels_by_group"] == {"crowd": 10, "expert": 3, "llm": 1}
    assert full["n_workers"] == 3 and full["n_items"] == 5
    assert full["items_by_k"] == {"2": 2, "4": 3}
    assert full["n_gold_items"] == 1 and full["n_gold_labels"] == 2
    assert full["gold_accuracy"] == 0.5
    assert data["excluded"] == {
        "n_workers": 1,
        "n_responses": 4,
        "by_rater_group": {
            "crowd": {"n_workers": 1, "n_responses": 4},
            "expert": {"n_workers": 0, "n_responses": 0},
            "llm": {"n_workers": 0, "n_responses": 0},
        },
    }
    assert data["filtered"]["n_crowd_labels"] == 8 and data["filtered"]["n_workers"] == 2


def test_agreement_table_full_set(data: dict[str, Any]) -> None:
    table = data["full"]["agreement"]
    assert table["chance"] == {
        "rate": 0.35, "n_items": 5, "rater_groups": ["crowd", "expert", "experimenter"],
    }  # fmt: skip
    # Each row names the rater groups it uses: the paper's table is the crowd's.
    assert table["worker_worker"]["rater_groups"] == ["crowd"]
    assert table["expert_worker"]["rater_groups"] == ["crowd", "expert", "experimenter"]
    assert table["expert_expert"]["rater_groups"] == ["expert", "experimenter"]
    ww = table["worker_worker"]
    assert (ww["n_agree"], ww["n_pairs"], ww["n_items"]) == (2, 6, 4)
    assert ww["rate"] == pytest.approx(2 / 6, abs=1e-4)
    # Chance for these pairs: each pair agrees by chance with probability 1/K of its item.
    assert ww["chance"] == pytest.approx((3 / 4 + 1 / 4 + 1 / 2 + 1 / 4) / 6, abs=1e-4)
    ew = table["expert_worker"]
    assert (ew["n_agree"], ew["n_pairs"], ew["n_items"], ew["rate"]) == (4, 10, 3, 0.4)
    ee = table["expert_expert"]
    assert (ee["n_agree"], ee["n_pairs"], ee["n_items"], ee["rate"]) == (0, 1, 1, 0.0)
    assert ee["ci_low"] is None and ee["ci_high"] is None  # one item: nothing to resample


def test_agreement_ci_is_a_cluster_bootstrap_over_items(data: dict[str, Any]) -> None:
    ww = data["full"]["agreement"]["worker_worker"]
    # Items in first-seen order: i1 (1 of 3), i2 (0 of 1), i3 (0 of 1), i5 (1 of 1).
    agree, pairs = np.array([1.0, 0, 0, 1]), np.array([3.0, 1, 1, 1])
    expected = stats.bootstrap(
        (agree, pairs),
        lambda a, p, axis=-1: a.sum(axis=axis) / p.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=N_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(SEED),
    ).confidence_interval
    assert ww["ci_low"] == pytest.approx(expected.low, abs=1e-4)
    assert ww["ci_high"] == pytest.approx(expected.high, abs=1e-4)
    assert ww["ci_low"] <= ww["rate"] <= ww["ci_high"]
    # An independent resampling of whole items lands on nearly the same interval.
    rng = np.random.default_rng(1)
    draws = rng.integers(0, 4, size=(20_000, 4))
    ratios = agree[draws].sum(axis=1) / pairs[draws].sum(axis=1)
    assert ww["ci_low"] == pytest.approx(np.percentile(ratios, 2.5), abs=0.05)
    assert ww["ci_high"] == pytest.approx(np.percentile(ratios, 97.5), abs=0.05)
    assert cluster_bootstrap_ci([1], [3]) == (None, None)


def test_agreement_table_filtered_set(data: dict[str, Any]) -> None:
    table = data["filtered"]["agreement"]
    ww, ew = table["worker_worker"], table["expert_worker"]
    assert (ww["n_agree"], ww["n_pairs"], ww["n_items"]) == (2, 3, 3)
    assert (ew["n_agree"], ew["n_pairs"], ew["n_items"]) == (4, 7, 3)
    assert ew["rate"] == pytest.approx(4 / 7, abs=1e-4)
    assert table["expert_expert"]["n_pairs"] == 1


def test_win_rates_by_k_from_the_crowd_majority(data: dict[str, Any]) -> None:
    by_k = {entry["k"]: entry for entry in data["full"]["win_rates"]}
    assert set(by_k) == {2, 4, "all"}
    assert all(e["policy_a"] == "A" and e["policy_b"] == "B" for e in by_k.values())
    four, two, every = by_k[4], by_k[2], by_k["all"]
    assert (four["n_items"], four["wins_a"], four["wins_b"], four["ties"]) == (2, 1, 1, 0)
    assert four["win_rate_a"] == 0.5 and four["labels_per_item"] == {"2": 1, "3": 1}
    assert (two["n_items"], two["wins_a"], two["wins_b"], two["ties"]) == (2, 1, 0, 1)
    assert two["win_rate_a"] == 1.0 and two["labels_per_item"] == {"1": 1, "2": 1}
    assert (every["wins_a"], every["wins_b"], every["ties"]) == (2, 1, 1)
    assert every["mean_labels_per_item"] == 2.0
    interval = stats.binomtest(2, 3).proportion_ci(0.95)
    assert every["win_rate_a"] == pytest.approx(2 / 3, abs=1e-4)
    assert every["ci_low"] == pytest.approx(interval.low, abs=1e-4)
    assert every["ci_high"] == pytest.approx(interval.high, abs=1e-4)
    # Without w3, i3 is won by B on w1's single label.
    filtered = {entry["k"]: entry for entry in data["filtered"]["win_rates"]}
    assert (filtered[2]["wins_a"], filtered[2]["wins_b"], filtered[2]["ties"]) == (1, 1, 0)
    assert two_policies(["A", "B", "C", "D"]) is None
    assert two_policies(["B", "A", "A", "B"]) == ("A", "B")
    assert two_policies(["A", "A", "A", "B"]) is None
    assert two_policies(["A", None]) is None


def test_per_worker_agreement_gold_and_position(data: dict[str, Any]) -> None:
    workers = {w["worker"]: w for w in data["full"]["workers"]}
    # Every rater group's raters, each compared with the others of their own group.
    assert {(w["rater_group"], w["worker"]) for w in workers.values()} == {
        ("crowd", "w1"), ("crowd", "w2"), ("crowd", "w3"),
        ("expert", "e1"), ("expert", "e2"), ("llm", "llm"),
    }  # fmt: skip
    w1, w2, w3 = workers["w1"], workers["w2"], workers["w3"]
    assert (w1["labels"], w1["worker_pairs"], w1["worker_agreement"]) == (4, 5, 0.4)
    assert (w1["expert_pairs"], w1["expert_agreement"]) == (4, 0.75)
    assert (w1["gold_labels"], w1["gold_accuracy"]) == (1, 1.0)
    assert w1["position_shares"] == [0.5, 0.25, 0.25, 0.0]
    assert w1["first_share"] == 0.5 and w1["first_chance"] == 0.3125
    assert (w2["worker_agreement"], w2["expert_pairs"]) == (0.5, 3)
    assert w2["expert_agreement"] == pytest.approx(1 / 3, abs=1e-4)
    assert (w2["gold_accuracy"], w2["first_share"]) == (0.0, 0.75)
    assert (w3["labels"], w3["worker_agreement"], w3["expert_agreement"]) == (2, 0.0, 0.0)
    assert w3["gold_accuracy"] is None and w3["first_share"] == 0.5
    # e1 against e2 on i1 (0 vs 1); against the experts, its own labels never pair with itself.
    e1, llm = workers["e1"], workers["llm"]
    assert (e1["labels"], e1["worker_pairs"], e1["worker_agreement"]) == (2, 1, 0.0)
    assert (e1["expert_pairs"], e1["expert_agreement"]) == (1, 0.0)
    assert e1["first_share"] is None  # imported labels have no displayed order
    assert (llm["worker_pairs"], llm["expert_pairs"], llm["expert_agreement"]) == (0, 2, 0.0)


def test_position_bias_counts_displayed_positions(data: dict[str, Any]) -> None:
    bias = data["full"]["position_bias"]
    assert bias["4"]["counts"] == [4, 1, 1, 1] and bias["4"]["n"] == 7
    assert bias["4"]["shares"][0] == pytest.approx(4 / 7, abs=1e-4)
    assert bias["4"]["chance"] == 0.25
    assert bias["4"]["p_uniform"] == pytest.approx(stats.chisquare([4, 1, 1, 1]).pvalue, abs=1e-4)
    assert bias["2"]["counts"] == [2, 1]


def test_training_and_attention_are_summarised_apart(data: dict[str, Any]) -> None:
    assert data["training"]["n_labels"] == 3 and data["training"]["n_workers"] == 3
    assert data["training"]["accuracy"] == pytest.approx(2 / 3, abs=1e-4)
    assert data["training"]["by_item"] == [{"item": "t1", "n": 3, "accuracy": 0.6667}]
    assert data["attention"] == {
        "n_checks": 2,
        "n_failed_checks": 1,
        "workers_checked": 2,
        "workers_failed": 1,
        "worker_failure_rate": 0.5,
        "failed_workers": ["w3"],
    }
    json.dumps(data, allow_nan=False)


def test_expert_groups_decide_who_counts_as_expert() -> None:
    as_llm = analyze(rows(), set(), expert_groups=["llm"])["full"]["agreement"]
    # Now the LLM's i1 label (2) and the gold label are the expert labels; e1, e2 are ignored.
    assert as_llm["expert_worker"]["n_pairs"] == 3 + 2
    assert as_llm["expert_worker"]["n_agree"] == 1 + 1  # w3 matches the LLM, w1 the gold


def test_edge_cases_k2_single_labels_no_experts_no_overlap() -> None:
    single = [make_row(n, f"w{n}", "crowd", item, 1, 0) for n, item in enumerate(("i3", "i4"))]
    summary = summarize(single)
    table = summary["agreement"]
    assert table["chance"] == {"rate": 0.5, "n_items": 2, "rater_groups": ["crowd"]}
    assert table["expert_expert"]["rater_groups"] == []  # no expert group, no gold
    for key in ("worker_worker", "expert_worker", "expert_expert"):
        assert table[key]["rate"] is None and table[key]["n_pairs"] == 0
        assert table[key]["ci_low"] is None and table[key]["n_items"] == 0
    (two, every) = summary["win_rates"]
    assert two["k"] == 2 and (two["wins_a"], two["wins_b"], two["ties"]) == (0, 2, 0)
    assert two["win_rate_a"] == 0.0 and two["labels_per_item"] == {"1": 2}
    assert two["ci_low"] == 0.0
    assert two["ci_high"] == pytest.approx(stats.binomtest(0, 2).proportion_ci().high, abs=1e-4)
    assert summary["workers"][0]["worker_agreement"] is None
    empty = analyze([], set())
    assert empty["full"]["n_labels"] == 0 and empty["full"]["win_rates"] == []
    assert empty["full"]["agreement"]["chance"]["rate"] is None
    json.dumps(empty, allow_nan=False)
    with pytest.raises(ValueError, match="lacks"):
        analyze([{"worker": "w"}], set())
    with pytest.raises(ValueError, match="outside 0..1"):
        analyze([make_row(1, "w", "crowd", "i3", 2, 0)], set())


def test_simulated_crowd_on_the_samples_finds_the_tuned_policy_and_agreement() -> None:
    hit, sim = ComparisonHit(), ComparisonSimulator()
    records = [
        json.loads(line) for line in (SAMPLES / "sentiment.jsonl").read_text().split("\n")[:-1]
    ]
    truths = sim.truths(records)
    rng = random.Random(11)
    analysis_rows: list[dict[str, Any]] = []
    for record in records:
        spec = hit.validate_item(record)
        texts = spec.content["candidates"]
        for worker in ("s1", "s2", "s3"):
            order = draw_order(len(texts), rng)
            task = {"query": spec.content["query"], "candidates": [texts[i] for i in order]}
            shown = sim.act("skilled", rng, task, truths[sim.key(task)])["choice"]
            platform = {
                "response_id": len(analysis_rows), "worker": worker, "item": spec.external_id,
                "kind": spec.kind, "content": spec.content, "meta": spec.meta,
                "expected": spec.expected, "answer": {"best": order[shown], "shown": shown,
                "order": order}, "rater_group": "crowd",
            }  # fmt: skip
            analysis_rows.append(hit.analysis_row(platform))
    full = analyze(analysis_rows, set())["full"]
    ww = full["agreement"]["worker_worker"]
    assert ww["rate"] > 0.5 > 0.25 == full["agreement"]["chance"]["rate"]
    overall = next(e for e in full["win_rates"] if e["k"] == "all")
    assert (overall["policy_a"], overall["policy_b"]) == ("base", "tuned")
    assert overall["win_rate_a"] < 0.4 and overall["ci_high"] < 0.5
    assert overall["labels_per_item"] == {"3": 40}
    picks = Counter(row["shown"] for row in analysis_rows)
    assert max(picks.values()) < 0.4 * len(analysis_rows)  # skilled workers show no position bias


def test_report_writes_plots_and_tables(tmp_path: pathlib.Path, data: dict[str, Any]) -> None:
    with_rules = {**data, "rules": {"attention_check": {"workers": 1, "responses": 4}}}
    html = render_report(with_rules, tmp_path, "Sentiment <pilot>")
    for name in PLOT_FILES.values():
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
    assert html.count("data:image/png;base64,") == len(PLOT_FILES) >= 2
    assert "Sentiment &lt;pilot&gt;" in html
    assert 'id="agreement"' in html
    for text in ("Chance (1/K)", "35.0%", "Worker - worker", "33.3%", "Expert - worker", "40.0%"):
        assert text in html
    assert "A vs B" in html and "66.7%" in html  # the win rate of A over all K
    assert "attention_check" in html and "w3" in html
    empty_dir = tmp_path / "empty"
    empty = render_report(analyze([], set()), empty_dir, "Empty")
    assert "no data" in empty and all((empty_dir / name).exists() for name in PLOT_FILES.values())


# Labels of an old MTurk batch imported as the rater group "mturk" (no displayed order).
MTURK: list[tuple[str, str, str, int, int | None]] = [
    ("m1", "mturk", "i1", 0, None), ("m2", "mturk", "i1", 0, None), ("m1", "mturk", "i3", 0, None),
]  # fmt: skip


def test_every_rater_group_has_its_own_agreement_and_win_rates() -> None:
    """Worked by hand, with the MTurk batch beside the crowd:
    within mturk: i1 m1:0 m2:0                          -> 1/1
    crowd - mturk: i1 (0,0,2) x (0,0) 4/6; i3 (1,0) x (0) 1/2 -> 5/8 over 2 items
    expert - mturk: i1 (0,1) x (0,0) 2/4; i3 (1) x (0) 0/1    -> 2/5
    win rates by the mturk majority: i1 A (2-0), i3 A (1-0); the crowd's stay as they were.
    """
    labels = rows() + [make_row(100 + n, *label) for n, label in enumerate(MTURK)]
    data = analyze(labels, {"m2"})
    full = data["full"]
    assert full["rater_groups"] == ["crowd", "expert", "llm", "mturk"]
    assert full["by_rater_group"]["mturk"] == {
        "expert": False, "n_labels": 3, "n_raters": 2, "n_items": 2, "n_gold_labels": 0,
        "gold_accuracy": None,
    }  # fmt: skip
    pairs = {(e["group_a"], e["group_b"]): e for e in full["agreement_by_group"]}
    assert (pairs[("mturk", "mturk")]["n_agree"], pairs[("mturk", "mturk")]["n_pairs"]) == (1, 1)
    crowd_mturk = pairs[("crowd", "mturk")]
    assert (crowd_mturk["n_agree"], crowd_mturk["n_pairs"], crowd_mturk["n_items"]) == (5, 8, 2)
    assert crowd_mturk["rate"] == 0.625
    assert (pairs[("expert", "mturk")]["n_agree"], pairs[("expert", "mturk")]["n_pairs"]) == (2, 5)
    # The crowd within itself is the paper's worker-worker figure; the gold labels pair too.
    assert pairs[("crowd", "crowd")]["n_pairs"] == full["agreement"]["worker_worker"]["n_pairs"]
    assert pairs[("crowd", "experimenter")]["n_pairs"] == 2
    assert ("experimenter", "experimenter") not in pairs
    assert list(pairs)[-1] == ("mturk", "experimenter")  # the gold labels come last
    mturk = {e["k"]: e for e in full["win_rates_by_group"]["mturk"]}
    assert (mturk["all"]["wins_a"], mturk["all"]["wins_b"], mturk["all"]["ties"]) == (2, 0, 0)
    assert mturk[4]["n_items"] == 1 and mturk[2]["n_items"] == 1
    assert all(e["rater_groups"] == ["mturk"] for e in mturk.values())
    assert full["win_rates_by_group"]["crowd"] == full["win_rates"]
    assert all(e["rater_groups"] == ["crowd"] for e in full["win_rates"])
    # The MTurk labels leave the paper's crowd figures as they were.
    assert full["agreement"]["worker_worker"]["n_pairs"] == 6
    assert {w["worker"] for w in full["workers"] if w["rater_group"] == "mturk"} == {"m1", "m2"}
    # QC left m2 out: the filtered set's mturk figures lose its label.
    filtered = data["filtered"]
    assert filtered["labels_by_group"]["mturk"] == 2
    assert data["excluded"]["by_rater_group"]["mturk"] == {"n_workers": 1, "n_responses": 1}
    kept = {(e["group_a"], e["group_b"]): e for e in filtered["agreement_by_group"]}
    assert kept[("mturk", "mturk")]["n_pairs"] == 0 and kept[("crowd", "mturk")]["n_pairs"] == 3 + 2


def _table(html: str, table_id: str) -> list[list[str]]:
    """The cells of the HTML table with this id, row by row, tags stripped."""
    found = re.search(rf'<table id="{table_id}">(.*?)</table>', html, re.S)
    assert found is not None, f"no table {table_id}"
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<t[dh]>(.*?)</t[dh]>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", found[1], re.S)
    ]


def test_the_report_says_which_rater_groups_each_figure_uses(tmp_path: pathlib.Path) -> None:
    labels = rows() + [make_row(100 + n, *label) for n, label in enumerate(MTURK)]
    data = analyze(labels, set())
    per_group = {"mturk": {"workers": 1, "responses": 2}}
    data["rules"] = {"copied": {"workers": 1, "responses": 2, "by_rater_group": per_group}}
    html = render_report(data, tmp_path, "With an MTurk batch")
    agreement = {row[0]: row[1] for row in _table(html, "agreement")[1:]}
    assert agreement["Worker - worker"] == "crowd"
    assert agreement["Expert - worker"] == "crowd, expert, experimenter"
    by_group = {row[0]: row[1:] for row in _table(html, "agreement-by-group")[1:]}
    assert by_group["crowd - mturk"][:3] == ["62.5%", by_group["crowd - mturk"][1], "8"]
    assert by_group["mturk"][0] == "100.0%"
    wins = [row for row in _table(html, "win-rates-by-group-full")[1:] if row[0] == "mturk"]
    assert [(row[2], row[7]) for row in wins] == [("2", "100.0%"), ("4", "100.0%"),
                                                   ("all", "100.0%")]  # fmt: skip
    groups = {row[0]: row[1:] for row in _table(html, "rater-groups")[1:]}
    assert groups["mturk"][:2] == ["worker", "3 / 3"] and groups["expert"][0] == "expert"
    assert "Rater groups: crowd, expert, llm, mturk." in html
    assert "mturk 1/2" in html  # what the rule removed, per rater group
