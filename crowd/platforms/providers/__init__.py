"""Crowd providers, registered by name."""

from __future__ import annotations

from crowd.platforms.providers.base import Provider, Publication, StudyRef
from crowd.platforms.providers.local import LocalProvider
from crowd.platforms.providers.mturk import MTurkProvider
from crowd.platforms.providers.prolific import ProlificProvider
from crowd.platforms.providers.sim import SimProvider
from crowd.registry import Registry

PROVIDERS: Registry[Provider] = Registry("provider")
PROVIDERS.register(LocalProvider.name, LocalProvider())
PROVIDERS.register(SimProvider.name, SimProvider())
PROVIDERS.register(MTurkProvider.name, MTurkProvider())
PROVIDERS.register(ProlificProvider.name, ProlificProvider())

__all__ = ["PROVIDERS", "Provider", "Publication", "StudyRef"]
