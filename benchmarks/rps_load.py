"""The load generator of benchmarks/submit_rps.py: keep-alive clients that answer items.

It runs in the client processes (spawned by submit_rps.py), so it must not import crowd.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any


class Client:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1 that reconnects after an error."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: http.client.HTTPConnection | None = None

    def post(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            self.conn.request(
                "POST", path, json.dumps(body), {"Content-Type": "application/json", **headers}
            )
            response = self.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        if response.getheader("Connection", "").lower() == "close":
            self.close()
        return response.status, json.loads(data) if data else None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass
class LoadResult:
    """Latencies in milliseconds per request kind, and what went wrong."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    answers: int = 0
    ran_out: int = 0
    started: float = 0.0
    finished: float = 0.0

    def add(self, kind: str, seconds: float) -> None:
        self.latencies.setdefault(kind, []).append(seconds * 1000)

    def error(self, message: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(message[:300])

    def merge(self, other: LoadResult) -> None:
        for kind, values in other.latencies.items():
            self.latencies.setdefault(kind, []).extend(values)
        self.errors += other.errors
        self.error_samples.extend(other.error_samples[: max(0, 5 - len(self.error_samples))])
        self.answers += other.answers
        self.ran_out += other.ran_out
        self.started = min(self.started, other.started) if self.started else other.started
        self.finished = max(self.finished, other.finished)

    @property
    def requests(self) -> int:
        return sum(len(values) for values in self.latencies.values())


@dataclass(frozen=True)
class LoadSpec:
    port: int
    mode: str  # "bare" or "submit"
    study_id: int
    tokens: tuple[str, ...]  # one worker token per thread ("submit"); empty strings for "bare"
    start_at: float  # wall-clock time.time() at which every thread starts
    duration: float
    max_requests: int


class Budget:
    """A request count shared by the threads of one process, so a run is bounded."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left <= 0:
                return False
            self.left -= 1
            return True


# How an attention check's first sentence begins in the studies the benchmarks make.
CHECK = "Check "


def _bare_loop(spec: LoadSpec, result: LoadResult, budget: Budget, deadline: float) -> None:
    client = Client(spec.port)
    body = {"step": 1, "choice": "machine"}
    try:
        while time.perf_counter() < deadline and budget.take():
            began = time.perf_counter()
            try:
                status, data = client.post("/submit", body, {})
            except (OSError, http.client.HTTPException, ValueError) as error:
                result.error(f"bare: {error!r}")
                continue
            result.add("submit", time.perf_counter() - began)
            if status != 200 or not data or not data.get("ok"):
                result.error(f"bare: HTTP {status} {data!r}")
    finally:
        client.close()


def _submit_loop(
    spec: LoadSpec, token: str, result: LoadResult, budget: Budget, deadline: float
) -> None:
    """Answer items one after the other as one worker: next, reveal step, store step."""
    client = Client(spec.port)
    headers = {"X-Crowd-Worker": token}

    def call(kind: str, path: str, body: dict[str, Any]) -> Any:
        began = time.perf_counter()
        try:
            status, data = client.post(path, body, headers)
        except (OSError, http.client.HTTPException, ValueError) as error:
            result.error(f"{kind}: {error!r}")
            return None
        result.add(kind, time.perf_counter() - began)
        if status != 200:
            result.error(f"{kind}: HTTP {status} {data!r}")
            return None
        return data

    try:
        while time.perf_counter() < deadline and budget.take():
            view = call("next", f"/api/work/studies/{spec.study_id}/next", {})
            if view is None:
                continue
            if view.get("done"):
                result.ran_out += 1
                return
            path = f"/api/work/assignments/{view['assignment_id']}/step"
            # An attention check (benchmarks/queue_rps.py serves them; its first sentence
            # says so) is answered as it asks, all human, as a reader would: QC stops a
            # worker who fails them.
            check = str((view.get("task") or {}).get("sentences", [""])[0]).startswith(CHECK)
            # A view left half-way by the warm-up resumes where it is: follow its step.
            while view is not None and "task" in view and not view.get("answered"):
                if time.perf_counter() >= deadline or not budget.take():
                    return
                step = view["task"]["step"]
                if step == 0:
                    view = call("reveal", path, {"step": 0, "choice": "human"})
                else:
                    choice = "human" if check else "machine"
                    view = call("store", path, {"step": step, "choice": choice})
                    if view is not None and view.get("answered"):
                        result.answers += 1
    finally:
        client.close()


def run_load(spec: LoadSpec) -> LoadResult:
    """Run one thread per token until the duration or the request budget is spent."""
    result = LoadResult()
    budget = Budget(spec.max_requests)
    # Every process starts on the same wall-clock instant, then times with perf_counter.
    time.sleep(max(0.0, spec.start_at - time.time()))
    start = time.perf_counter()
    deadline = start + spec.duration
    threads = []
    for token in spec.tokens:
        if spec.mode == "bare":
            target: Any = _bare_loop
            args: tuple[Any, ...] = (spec, result, budget, deadline)
        else:
            target, args = _submit_loop, (spec, token, result, budget, deadline)
        threads.append(threading.Thread(target=target, args=args, daemon=True))
    result.started = time.time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.finished = time.time()
    return result


def drive(
    pool: ProcessPoolExecutor,
    processes: int,
    port: int,
    mode: str,
    study_id: int,
    tokens: list[str],
    duration: float,
    max_requests: int,
) -> LoadResult:
    """Split the client threads over the processes of `pool` and merge their results."""
    start_at = time.time() + 0.5
    shares = [tokens[i::processes] for i in range(processes)]
    specs = [
        LoadSpec(port, mode, study_id, tuple(share), start_at, duration, max_requests // processes)
        for share in shares
        if share
    ]
    total = LoadResult()
    for part in pool.map(run_load, specs):
        total.merge(part)
    return total
