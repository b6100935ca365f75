"""The open web: anyone plays as an anonymous or named player, RoFT-style."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from crowd.platforms.providers.base import Provider, Publication, StudyRef

if TYPE_CHECKING:
    from crowd.settings import Settings


class LocalProvider(Provider):
    name: ClassVar[str] = "local"
    open_signup: ClassVar[bool] = True

    def publish(
        self,
        settings: Settings,
        study: StudyRef,
        base_url: str,
        options: Mapping[str, Any],
        token: str,
    ) -> Publication:
        return Publication(
            provider=self.name,
            urls={
                "game": f"{base_url}/play/{study.id}",
                "leaderboard": f"{base_url}/play/leaderboard",
            },
        )
