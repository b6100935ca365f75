"""Each gold item's tally of its readers' gold accuracy, which easy gold first reads
(qc.gold.easy_first, crowd.work.serving._easiness): recounted in every QC refresh, each live
answer weighed by how far its worker reads above chance by the crowd's measure.

Counted one answer one vote, the tally let a ring of workers who share their answers steer
the order: a lucky shared pick lifted the item to the front, where the ring's next member
met it and copied the right answer, and a wrong one sank it. Their picks at random (1 in 4 on
a best-of-4 comparison) were right on 39% of their gold answers (benchmarks/RESULTS.md,
eighteenth look). Weighed by agreement with the crowd above chance, a worker whose answers
the crowd does not bear out counts for little, whoever they copy, and the readers who do
read still set the order: rings were then right on 26% of their gold, chance (nineteenth
look). The weights are the crowd's estimates of the moment (they move as
answers arrive), so the whole study's tally is recounted, not added to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.orm import Session

from crowd.storage import Item, ItemKind, Response, ResponseSource, Study

# Tallies are stored to this many decimals; a change below that is not written.
_DECIMALS = 4


def reader_weight(metrics: Mapping[str, Any] | None) -> float:
    """How much a worker's gold answers count in the tally: their accuracy against the crowd
    above chance, as a share of the way from chance to always right (0 at chance or below,
    1 for a worker always right); 0 before the crowd has judged any of their answers.

    >>> reader_weight({"agreement": 0.85, "agreement_chance": 0.25})
    0.8
    >>> reader_weight({"agreement": 0.2, "agreement_chance": 0.25}), reader_weight(None)
    (0.0, 0.0)
    """
    agreement = (metrics or {}).get("agreement")
    chance = (metrics or {}).get("agreement_chance")
    if agreement is None or chance is None or chance >= 1:
        return 0.0
    return round(min(1.0, max(0.0, (agreement - chance) / (1 - chance))), _DECIMALS)


def retally_gold(session: Session, study: Study, crowd: Mapping[str, Mapping[str, Any]]) -> int:
    """Recount the study's gold tallies (`Item.gold_weight`, `Item.gold_right`) from its live
    gold answers, each weighed by its worker's `reader_weight` in `crowd` (crowd metrics by
    worker id as text); imported answers do not count. Writes only the items whose tally
    changed, in id order (concurrent refreshes lock them in one order); returns how many."""
    weight = {worker: reader_weight(metrics) for worker, metrics in crowd.items()}
    found = session.execute(
        select(Response.item_id, Response.worker_id, Response.qc_flags)
        .join(Item, Item.id == Response.item_id)
        .where(
            Response.study_id == study.id,
            Item.kind == ItemKind.GOLD,
            Response.source == ResponseSource.LIVE,
        )
    )
    tally: dict[int, list[float]] = {}
    for item_id, worker_id, flags in found:
        accuracy = (flags or {}).get("gold_accuracy")
        if accuracy is None:
            continue
        w = weight.get(str(worker_id), 0.0)
        counted = tally.setdefault(item_id, [0.0, 0.0])
        counted[0] += w
        counted[1] += w * float(accuracy)
    current = session.execute(
        select(Item.id, Item.gold_weight, Item.gold_right)
        .where(Item.study_id == study.id, Item.kind == ItemKind.GOLD)
        .order_by(Item.id)
    )
    changed = []
    for item_id, old_weight, old_right in current:
        new_weight, new_right = (round(v, _DECIMALS) for v in tally.get(item_id, (0.0, 0.0)))
        if abs(new_weight - old_weight) > 1e-9 or abs(new_right - old_right) > 1e-9:
            changed.append({"b_id": item_id, "b_weight": new_weight, "b_right": new_right})
    if changed:
        table = cast(Table, Item.__table__)
        session.execute(
            update(table)
            .where(table.c.id == bindparam("b_id"))
            .values(gold_weight=bindparam("b_weight"), gold_right=bindparam("b_right")),
            changed,
        )
    return len(changed)
