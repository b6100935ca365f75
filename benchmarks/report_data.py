"""What benchmarks/report_scale.py reports on: a boundary study with many annotations, made
in bulk.

The items go in through the study's own import (validated as any upload is); the workers,
their study rows and the responses go in with SQLAlchemy Core in batches, shaped as the
answer path stores them (answer, points, explanation and reasons, step events, QC flags),
since a million answers through HTTP would take hours.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

SENTENCES = 10
ANSWERS_PER_ITEM = 10
ANSWERS_PER_WORKER = 500
GOLD_SHARE, ATTENTION_SHARE = 0.02, 0.02
CATEGORIES = ("news", "recipes", "stories", "speeches")
GENERATORS = ("gpt2", "gpt2-xl", "ctrl")
DECODING = (0.0, 0.4, 1.0)
FLAWS = ("repetition", "nonsense", "contradiction", "off-topic", "grammar")
BATCH = 20_000


def item_specs(n_items: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    items = []
    for i in range(n_items):
        draw = rng.random()
        kind = "gold" if draw < GOLD_SHARE else "attention" if draw < 2 * GOLD_SHARE else "real"
        sentences = [f"Passage {i}, sentence {s}: the town council met again on a Tuesday "
                     f"night to talk about the bridge." for s in range(SENTENCES)]  # fmt: skip
        items.append({
            "id": f"p{i:07d}",
            "kind": kind,
            "category": CATEGORIES[i % len(CATEGORIES)],
            "sentences": sentences,
            "boundary": SENTENCES if kind == "attention" else rng.randint(1, SENTENCES),
            "generator": GENERATORS[i % len(GENERATORS)],
            "decoding": {"strategy": "top-p", "value": DECODING[i % len(DECODING)]},
            "prompt_index": i % 50,
        })  # fmt: skip
    return items


def fill(database_url: str, n_annotations: int, seed: int = 7) -> int:
    """Create a boundary study with `n_annotations` responses; its id."""
    from sqlalchemy import insert, select

    from crowd.accounts import authenticate, create_api_key
    from crowd.storage import Database, Item, Response, StudyWorker, Worker
    from crowd.studies.lifecycle import create_study, import_items
    from tasks import load_builtin
    from tasks.boundary.analysis import points

    load_builtin()
    n_items = max(1, n_annotations // ANSWERS_PER_ITEM)
    n_workers = max(ANSWERS_PER_ITEM, n_annotations // ANSWERS_PER_WORKER)
    db = Database(database_url)
    try:
        db.upgrade()
        with db.session() as session:
            experimenter = authenticate(session, create_api_key(session, "bench"))
            config = {"annotations_per_item": ANSWERS_PER_ITEM}
            study = create_study(session, experimenter, "report scale", "boundary", config)
            specs = item_specs(n_items, seed)
            for start in range(0, n_items, BATCH):
                import_items(session, study, specs[start : start + BATCH])
            study_id = study.id
        with db.session() as session:
            items = session.execute(
                select(Item.id, Item.kind, Item.expected).where(Item.study_id == study_id)
            ).all()
            now = datetime.now(UTC)
            # Workers of their own per study: several studies can share a database.
            prefix = f"report-{study_id}-"
            worker_rows = [{"provider": "sim", "external_id": f"{prefix}{w:05d}", "created_at": now}
                           for w in range(n_workers)]  # fmt: skip
            session.execute(insert(Worker), worker_rows)
            worker_ids = list(session.scalars(
                select(Worker.id)
                .where(Worker.provider == "sim", Worker.external_id.startswith(prefix))
                .order_by(Worker.id)
            ))  # fmt: skip
            session.execute(insert(StudyWorker), [
                {"study_id": study_id, "worker_id": w, "attention_phase": 0.0}
                for w in worker_ids
            ])  # fmt: skip
        rng = random.Random(seed)
        skill = {w: rng.uniform(0.2, 0.9) for w in worker_ids}
        start_time = datetime.now(UTC) - timedelta(days=30)
        batch: list[dict[str, Any]] = []
        made = 0
        with db.session() as session:
            for index in range(n_annotations):
                item_id, kind, expected = items[index // ANSWERS_PER_ITEM]
                # Each item's answers come from ANSWERS_PER_ITEM different workers.
                worker = worker_ids[(index * 7 + index // ANSWERS_PER_ITEM) % len(worker_ids)]
                boundary = int(expected["boundary"])
                if rng.random() < skill[worker]:
                    guess = min(SENTENCES, boundary + rng.choice((0, 0, 0, 1, 2)))
                else:
                    guess = rng.randint(1, SENTENCES)
                at = start_time + timedelta(seconds=index * 2.5)
                explained = guess < SENTENCES
                batch.append({
                    "study_id": study_id,
                    "item_id": item_id,
                    "worker_id": worker,
                    "answer": {"guess": guess, "all_human": guess == SENTENCES},
                    "score": float(points(guess, boundary)),
                    "explanation": (f"Sentence {guess + 1} {rng.choice(FLAWS)}, "
                                    f"see {rng.randint(1, 10**6)}.") if explained else None,
                    "reasons": [rng.choice(FLAWS)] if explained else [],
                    "events": [{"type": "reveal", "index": s, "at": at.isoformat()}
                               for s in range(min(guess + 1, SENTENCES))],
                    "qc_flags": ({"attention_passed": guess == SENTENCES}
                                 if kind == "attention" else {}),
                    "source": "live",
                    "rater_group": "crowd",
                    "created_at": at,
                })  # fmt: skip
                if len(batch) == BATCH:
                    session.execute(insert(Response), batch)
                    made += len(batch)
                    batch = []
            if batch:
                session.execute(insert(Response), batch)
                made += len(batch)
        assert made == n_annotations
        return int(study_id)
    finally:
        db.dispose()
