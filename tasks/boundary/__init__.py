"""Boundary detection ("Real or Fake Text"): find where a passage turns machine-written."""

from __future__ import annotations

from tasks import HIT_TYPES
from tasks.boundary.hit import BoundaryHit

HIT_TYPES.register(BoundaryHit.name, BoundaryHit())
