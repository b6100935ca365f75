"""The open web: anyone plays as an anonymous or named player, RoFT-style."""

from __future__ import annotations

from typing import ClassVar

from crowd.providers.base import Provider, Publication, StudyRef


class LocalProvider(Provider):
    name: ClassVar[str] = "local"
    open_signup: ClassVar[bool] = True

    def publish(self, study: StudyRef, base_url: str) -> Publication:
        return Publication(
            provider=self.name,
            urls={
                "game": f"{base_url}/play/{study.id}",
                "leaderboard": f"{base_url}/play/leaderboard",
            },
        )
