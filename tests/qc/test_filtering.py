"""The filtered set leaves out exactly the excluded workers' rows, and says how many."""

from __future__ import annotations

from qc.filtering import full_and_filtered


def test_the_filtered_set_drops_only_excluded_workers() -> None:
    rows = [{"worker": "a"}, {"worker": "b"}, {"worker": "b"}, {"worker": "c"}]
    out = full_and_filtered(
        rows, {"b", "nobody"}, lambda part: {"workers": [r["worker"] for r in part]}
    )
    assert out["full"] == {"workers": ["a", "b", "b", "c"]}
    assert out["filtered"] == {"workers": ["a", "c"]}
    # Only excluded workers who have rows count; "nobody" answered nothing here.
    assert out["excluded"] == {"n_workers": 1, "n_responses": 2}
