"""A simulated crowd that plays through the real HTTP endpoints, like people do.

Simulated workers know the truth of each item (built from the experimenter's item records
by the HIT type's Simulator, and found by what the page shows), and their kind decides how
well they use it. They join with the experimenter's API key, so nobody else can pose as them.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

import requests

from crowd.exceptions import ValidationError
from crowd.platforms.providers.base import Provider
from tasks import get_hit_type

log = logging.getLogger(__name__)


class SimProvider(Provider):
    name: ClassVar[str] = "sim"


def text_chars(value: Any) -> int:
    """Characters of text in a page view (every string in it, however nested)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(text_chars(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(text_chars(v) for v in value)
    return 0


@dataclass
class SimWorker:
    external_id: str
    kind: str
    rng: random.Random
    token: str | None = None
    items: int = 0
    finished: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class SimResult:
    workers: dict[str, str]
    items_done: dict[str, int]
    errors: list[str]

    def by_kind(self) -> dict[str, int]:
        return dict(Counter(self.workers.values()))


class SimulatedCrowd:
    """Workers of the given kinds play a study over HTTP, round by round."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        study_id: int,
        hit_type: str,
        records: list[dict[str, Any]],
        mix: Mapping[str, int],
        seed: int = 0,
        items_per_worker: int = 10,
        prefix: str = "sim",
    ) -> None:
        self.simulator = get_hit_type(hit_type).simulator()
        kinds = self.simulator.kinds
        unknown = set(mix) - set(kinds)
        if unknown:
            raise ValidationError(
                f"unknown {hit_type} worker kinds {sorted(unknown)}: use {', '.join(kinds)}"
            )
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.study_id = study_id
        self.truths = self.simulator.truths(records)
        self.items_per_worker = items_per_worker
        master = random.Random(seed)
        self.workers = [
            SimWorker(f"{prefix}-{kind}-{n:02d}", kind, random.Random(master.random()))
            for kind, count in sorted(mix.items())
            for n in range(count)
        ]
        master.shuffle(self.workers)
        self.errors: list[str] = []
        self._local = threading.local()

    def _http(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def _post(self, path: str, body: Mapping[str, Any], worker: SimWorker | None) -> Any:
        headers = {"X-Crowd-Worker": worker.token} if worker and worker.token else {}
        if worker is None:
            headers["Authorization"] = f"Bearer {self.api_key}"
        response = self._http().post(self.base_url + path, json=body, headers=headers, timeout=30)
        if response.status_code >= 400:
            raise RuntimeError(f"POST {path}: {response.status_code} {response.text[:200]}")
        return response.json()

    def join(self, worker: SimWorker) -> None:
        data = self._post(
            "/api/work/join", {"provider": "sim", "external_id": worker.external_id}, None
        )
        worker.token = data["worker_token"]

    def play_one(self, worker: SimWorker) -> bool:
        """Play one item; False when the study has nothing left for this worker."""
        if worker.token is None:
            self.join(worker)
        view = self._post(f"/api/work/studies/{self.study_id}/next", {}, worker)
        if view.get("done"):
            return False
        task = view["task"]
        truth = self.truths.get(self.simulator.key(task))
        if truth is None:
            raise RuntimeError(
                f"the simulator does not know item {self.simulator.key(task)[:40]!r}"
            )
        path = f"/api/work/assignments/{view['assignment_id']}"
        read = 0
        while "task" in view and not view.get("answered"):
            task = view["task"]
            body = self.simulator.act(worker.kind, worker.rng, task, truth)
            # Simulated workers report their simulated time; the server only accepts it
            # from workers of the sim provider (people are timed by the server's clock).
            shown = text_chars(task)
            seconds = self.simulator.seconds(worker.kind, worker.rng, max(shown - read, 0))
            read = max(read, shown)
            body = {**body, "step": task["step"], "sim_seconds": round(seconds, 3)}
            view = self._post(f"{path}/step", body, worker)
        if view.get("needs_followup"):
            body = self.simulator.followup(worker.kind, worker.rng, view["task"], truth)
            view = self._post(f"{path}/explanation", body, worker)
        if "feedback" not in view:
            raise RuntimeError(f"assignment {view.get('assignment_id')} ended without feedback")
        return True

    def _turn(self, worker: SimWorker) -> None:
        with worker.lock:
            if worker.finished or worker.items >= self.items_per_worker:
                return
            try:
                if self.play_one(worker):
                    worker.items += 1
                else:
                    worker.finished = True
            except (RuntimeError, requests.RequestException) as error:
                worker.finished = True
                self.errors.append(f"{worker.external_id}: {error}")
                log.warning("simulated worker %s stopped: %s", worker.external_id, error)

    def run(self, threads: int = 4) -> SimResult:
        """Every worker plays one item per round, until all are done or out of work."""
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for _round in range(self.items_per_worker):
                list(pool.map(self._turn, self.workers))
                if all(w.finished for w in self.workers):
                    break
        return SimResult(
            workers={w.external_id: w.kind for w in self.workers},
            items_done={w.external_id: w.items for w in self.workers},
            errors=list(self.errors),
        )
