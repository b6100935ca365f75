"""Type checks the ML configs share (JSON numbers: bools are not numbers)."""

from __future__ import annotations

import math
from typing import Any


def is_int(value: Any) -> bool:
    """A whole number that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
