"""Form's QC defaults: below_crowd counts items, not fields, so the two or more fields of one
form item do not stop a careful reader after five items of bad luck."""

from __future__ import annotations

import random

from qc.config import parse_qc_config
from qc.evidence import crowd_evidence
from tasks import get_hit_type
from tests.tasks.test_comparison_quality import fired

K = 4
FIELDS = ("verdict", "topic")


def form_answers(rng: random.Random, items: int, guesser_items: int) -> list[tuple[str, str, str]]:
    """Eight careful readers (right 9 times in 10) fill both fields of every item; the guesser
    fills the first `guesser_items`, wrong every time."""
    truth = {f"f{i}/{field}": rng.randrange(K) for i in range(items) for field in FIELDS}
    answers = [
        (task, f"careful{w}", str(z if rng.random() < 0.9 else (z + 1 + rng.randrange(K - 1)) % K))
        for task, z in truth.items() for w in range(8)
    ]  # fmt: skip
    answers += [(task, "guesser", str((z + 1) % K)) for task, z in truth.items()
                if int(task.split("/")[0][1:]) < guesser_items]  # fmt: skip
    return answers


def test_below_crowd_waits_for_eight_form_items_not_ten_fields() -> None:
    config = parse_qc_config(get_hit_type("form").validate_qc_config(None))
    assert config.crowd.min_items == 8
    [rule] = [r for r in config.rules if r.name == "below_crowd"]
    assert rule.min_evidence == {
        "agreement_n": 10, "agreement_real_n": 3, "agreement_items": 8, "gold_doubt": 0.2
    }
    # Six items wrong in both fields: twelve fields judged, far below the crowd, and still
    # too few items.
    six = form_answers(random.Random(2), 20, 6)
    evidence = crowd_evidence(six, config)["guesser"]
    assert (evidence["agreement_n"], evidence["agreement_items"]) == (12, 6)
    assert evidence["agreement_below_prob"] > 0.99
    assert "below_crowd" not in fired("form", six)["guesser"]
    # Eight items are enough; no careful reader is stopped.
    rules = fired("form", form_answers(random.Random(2), 20, 8))
    assert "below_crowd" in rules["guesser"]
    assert all(not found for worker, found in rules.items() if worker != "guesser"), rules
    # A study can count fields alone again.
    fields = get_hit_type("form").validate_qc_config({"crowd": {"min_items": None}})
    [rule] = [r for r in parse_qc_config(fields).rules if r.name == "below_crowd"]
    assert rule.min_evidence == {"agreement_n": 10, "agreement_real_n": 3, "gold_doubt": 0.2}
