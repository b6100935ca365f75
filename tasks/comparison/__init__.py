"""Best-of-K comparison ("Fine-tuning LMs from human preferences"): pick the best candidate.

Sample data in samples/: sentiment.jsonl (story openings with four continuations from a
"base" and a "tuned" policy, with hidden utilities), attention.jsonl, training.jsonl, and
expert_labels.csv. The expert labels are simulated, not human: two "skilled" simulated
workers (expert-1, expert-2, rater group "expert") labelled the first 15 sentiment items with
ComparisonSimulator and a fixed seed, so the agreement table has expert rows to show.
"""

from __future__ import annotations

from tasks import HIT_TYPES
from tasks.comparison.hit import ComparisonHit

HIT_TYPES.register(ComparisonHit.name, ComparisonHit())
