"""A simulated crowd that plays through the real HTTP endpoints, like people do.

Simulated workers know the truth of each item (an oracle built from the experimenter's
items, found by the text the page shows), and a behaviour per worker kind decides how well
they use it. They join with the experimenter's API key, so nobody else can pose as them.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

import requests

from crowd.exceptions import ValidationError
from crowd.providers.base import Provider
from tasks.boundary import simulate as boundary_sim

log = logging.getLogger(__name__)

WORKER_KINDS = tuple(boundary_sim.BEHAVIOURS)


class SimProvider(Provider):
    name: ClassVar[str] = "sim"


@dataclass(frozen=True)
class Truth:
    boundary: int
    kind: str


def boundary_oracle(records: Iterable[Mapping[str, Any]]) -> dict[str, Truth]:
    """Truth per passage, keyed by its first sentence (what a worker sees first)."""
    oracle = {}
    for record in records:
        sentences = record["sentences"]
        kind = record.get("kind", "real")
        boundary = record.get("boundary", len(sentences))
        oracle[sentences[0].strip()] = Truth(boundary=int(boundary), kind=kind)
    return oracle


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
    """Workers of the given kinds play a boundary study over HTTP, round by round."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        study_id: int,
        oracle: Mapping[str, Truth],
        mix: Mapping[str, int],
        seed: int = 0,
        items_per_worker: int = 10,
        prefix: str = "sim",
    ) -> None:
        unknown = set(mix) - set(WORKER_KINDS)
        if unknown:
            raise ValidationError(f"unknown worker kinds {sorted(unknown)}: use {WORKER_KINDS}")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.study_id = study_id
        self.oracle = oracle
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
        behaviour = boundary_sim.BEHAVIOURS[worker.kind]
        first = view["task"]["sentences"][0]
        truth = self.oracle.get(first.strip())
        if truth is None:
            raise RuntimeError(f"the simulator does not know the passage starting {first[:40]!r}")
        path = f"/api/work/assignments/{view['assignment_id']}"
        while "task" in view and not view.get("answered"):
            step = view["task"]["step"]
            choice = boundary_sim.choose(
                behaviour, worker.rng, step, truth.boundary, truth.kind == "attention"
            )
            view = self._post(f"{path}/step", {"step": step, "choice": choice}, worker)
        if view.get("needs_followup"):
            text, reasons = boundary_sim.explain(behaviour, worker.rng, view["task"]["step"])
            view = self._post(
                f"{path}/explanation", {"explanation": text, "reasons": reasons}, worker
            )
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
