"""HIT types: one package per type, each registering itself in HIT_TYPES when imported."""

from __future__ import annotations

import importlib

from crowd.registry import Registry
from tasks.base import HitType, ItemSpec, StepResult, StudyOptions

HIT_TYPES: Registry[HitType] = Registry("HIT type")

BUILTIN = ("tasks.boundary", "tasks.likert", "tasks.comparison", "tasks.taboo", "tasks.form")


def load_builtin() -> Registry[HitType]:
    """Import the built-in HIT types (each registers itself once) and return the registry."""
    for module in BUILTIN:
        importlib.import_module(module)
    return HIT_TYPES


def get_hit_type(name: str) -> HitType:
    return load_builtin().get(name)


__all__ = ["HIT_TYPES", "HitType", "ItemSpec", "StepResult", "StudyOptions", "get_hit_type"]
