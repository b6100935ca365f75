"""What every HIT type shares (tasks.base): the live crowd's rater group."""

from __future__ import annotations

from click.testing import CliRunner

from crowd.cli import main
from crowd.storage import Response
from crowd.web.schemas.studies import AnnotationsQuery
from tasks import get_hit_type, load_builtin
from tasks.base import LIVE_RATER_GROUP, rater_group
from tasks.comparison.analysis import win_rates


def test_an_answer_that_names_no_group_is_the_live_crowds_everywhere() -> None:
    # An analysis row without a group (older callers), or with an empty one.
    assert rater_group({}) == rater_group({"rater_group": None}) == LIVE_RATER_GROUP
    assert rater_group({"rater_group": ""}) == LIVE_RATER_GROUP
    assert rater_group({"rater_group": "expert"}) == "expert"
    # What the database stores, the API and the CLI import with, and the win rates compare.
    column = Response.__table__.c.rater_group
    assert column.default is not None and column.default.arg == LIVE_RATER_GROUP
    assert column.server_default is not None
    assert column.server_default.arg == LIVE_RATER_GROUP  # type: ignore[attr-defined]
    assert AnnotationsQuery.model_fields["rater_group"].default == LIVE_RATER_GROUP
    help_text = CliRunner().invoke(main, ["study", "import-annotations", "--help"]).output
    assert f"[default: {LIVE_RATER_GROUP}]" in help_text
    assert win_rates.__defaults__ == (LIVE_RATER_GROUP,)


def test_every_analysis_row_names_its_group() -> None:
    load_builtin()
    rows = {
        "boundary": {"content": {"sentences": ["a.", "b."]}, "answer": {"guess": 1},
                     "expected": {"boundary": 1}, "position": 0, "created_at": None},
        "likert": {"answer": {"ratings": {}}},
        "comparison": {"content": {"query": "q", "candidates": ["x", "y"]},
                       "answer": {"best": 0}},
    }  # fmt: skip
    for name, raw in rows.items():
        base = {"response_id": 1, "worker": "w", "item": "i", "kind": "real", **raw}
        hit = get_hit_type(name)
        assert hit.analysis_row(base)["rater_group"] == LIVE_RATER_GROUP, name
        assert hit.analysis_row({**base, "rater_group": "roft"})["rater_group"] == "roft", name
