"""A simulated person playing Adversarial Taboo through the HTTP API, as a browser would.

It joins as a worker (provider "sim"), asks the waiting room for a game and polls it, and
decides its moves with an agent plugin fed only what its page shows: the defender's page
never carries the target, so neither does the simulated defender's view. The demo uses it
for one human-vs-agent game.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import requests

from tasks.taboo.agents import AgentView, make_agent
from tasks.taboo.engine import Phase, Role

POLL_SECONDS = 0.2


@dataclass
class SimulatedPlayer:
    base_url: str
    api_key: str
    external_id: str
    # The agent plugins that decide its moves in each role.
    attacker: str = "retrieval"
    defender: str = "naive"
    seed: int = 0
    token: str | None = None

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        headers = {"X-Crowd-Worker": self.token} if self.token else {
            "Authorization": f"Bearer {self.api_key}"}  # fmt: skip
        response = requests.request(method, self.base_url + path, json=body, headers=headers,
                                    timeout=30)  # fmt: skip
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return response.json()

    def join(self) -> None:
        data = self._call("POST", "/api/work/join",
                          {"provider": "sim", "external_id": self.external_id})  # fmt: skip
        self.token = data["worker_token"]

    def play(self, study_id: int, opponent: str = "agent", max_seconds: float = 60) -> Any:
        """Play one game to its end; returns the final view of this player's page."""
        if self.token is None:
            self.join()
        seat = self._call("POST", f"/api/taboo/studies/{study_id}/lobby", {"opponent": opponent})
        deadline = time.monotonic() + max_seconds
        while not seat.get("done") and seat["state"] == "waiting":
            if time.monotonic() > deadline:
                raise RuntimeError("nobody came to play")
            time.sleep(POLL_SECONDS)
            seat = self._call("GET", f"/api/taboo/seats/{seat['seat_id']}")
        if seat.get("done"):  # the study has no word left for this player
            raise RuntimeError(f"no game: {seat['message']}")
        if seat["game_id"] is None:
            raise RuntimeError(f"no game: the seat is {seat['state']}")
        game_id = seat["game_id"]
        rng = random.Random(self.seed)
        while time.monotonic() < deadline:
            view = self._call("GET", f"/api/taboo/games/{game_id}")
            if view["over"]:
                return view
            if not view["your_turn"]:
                time.sleep(POLL_SECONDS)
                continue
            role = Role(view["role"])
            agent = make_agent(self.attacker if role == Role.ATTACKER else self.defender)
            move = agent.act(page_view(view), rng)
            body = {"version": view["version"], move.kind: move.text}
            self._call("POST", f"/api/taboo/games/{game_id}/move", body)
        raise RuntimeError(f"game {game_id} did not end within {max_seconds} s")


def page_view(view: dict[str, Any]) -> AgentView:
    """The agent's view of what the page shows (the target only on the attacker's page)."""
    return AgentView(
        role=Role(view["role"]),
        target=view.get("target"),
        variants=tuple(view.get("variants") or ()),
        history=tuple(
            (Role(seen["role"]), None if seen.get("struck") else seen["text"])
            for seen in view["utterances"]
        ),
        turns_used=int(view["turns"]),
        max_turns=int(view["max_turns"]),
        phase=Phase(view["phase"]),
        guess_used=bool(view.get("guess_used")),
    )
