"""The shared pieces of the task reports (tasks.report_html)."""

from __future__ import annotations

import pathlib

from tasks.report_html import names


def test_names_are_joined_or_said_to_be_none() -> None:
    assert names(["crowd", "expert"]) == "crowd, expert"
    assert names(("w1", 2)) == "w1, 2"
    assert names([]) == names(None) == "none"


def test_a_report_with_no_rater_groups_says_none(tmp_path: pathlib.Path) -> None:
    from tasks.boundary.report import render_report

    page = render_report({"full": {}, "filtered": {}}, tmp_path, "Empty")
    assert "Every figure pools the rater groups: none (full set); none (filtered set)" in page
