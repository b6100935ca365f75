"""Likert rating ("Can LLMs be an alternative to human evaluation?"): rate texts on a scale.

Samples: samples/stories.jsonl (30 story fragments for the story template, 15 written by
people and 15 in the style of GPT-2, each with a made-up true quality per attribute in
meta.quality for the simulator), samples/attention.jsonl (3 attention checks) and
samples/expert_ratings.csv: ratings of every story by three *simulated* experts
(expert-1..3, rater group "expert"), made by `tasks.likert.simulate.expert_ratings` with the
"careful" rater kind and seed 2023 — not ratings by real people.
"""

from __future__ import annotations

from tasks import HIT_TYPES
from tasks.likert.hit import LikertHit

HIT_TYPES.register(LikertHit.name, LikertHit())
