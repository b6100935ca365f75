"""One round of an RL-from-human-preferences loop through the Scale-compatible API.

The loop of "Fine-tuning LMs from human preferences" (Ziegler et al., 2019): for each query x
the policy samples four continuations y0..y3, humans pick the best, and the chosen index
trains the reward model. Here the official `scaleapi` client sends each (x, y0..y3) as a
comparison task to a crowd server (any URL speaking our /v1 API), the study is published to
a crowd, and the chosen indices come back as signed callbacks (or by polling get_task).

    python examples/scale_rl_loop.py --url http://127.0.0.1:5000 --key crowd_... --simulate

`--simulate` lets simulated workers answer (they need this checkout's `crowd` package);
without it the tasks wait for whichever crowd you publish to (`--providers local`). The
toy samples carry a hidden best candidate, so the script can say how often the crowd found it.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import random
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests
from scaleapi import ScaleClient
from scaleapi.exceptions import ScaleResourceNotFound
from scaleapi.tasks import TaskType

CALLBACK_AUTH_HEADER = "scale-callback-auth"
SIGNATURE_HEADER = "X-Crowd-Signature"
INSTRUCTION = (
    "Read the beginning of the story, then pick the continuation that is the most positive "
    "and happy."
)
SUBJECTS = ("The old lighthouse keeper", "My neighbour's cat", "The night train", "Grandma")
ENDINGS = (
    ("smiled at the warm sunrise and laughed with joy.", 3.0),
    ("hummed a cheerful tune on the way home.", 2.0),
    ("stared at the grey wall for an hour.", 1.0),
    ("broke the last cup and cried all evening.", 0.0),
)


@dataclass(frozen=True)
class Sample:
    """A query, four policy samples and (hidden from the crowd) how good each one is."""

    id: str
    query: str
    candidates: list[str]
    utility: list[float]

    @property
    def best(self) -> int:
        return max(range(len(self.utility)), key=self.utility.__getitem__)

    def record(self) -> dict[str, Any]:
        """The item as a simulated worker's truth (crowd.platforms.providers.sim) reads it."""
        return {"id": self.id, "query": self.query, "candidates": self.candidates,
                "meta": {"utility": self.utility}}  # fmt: skip


def toy_samples(n: int, seed: int = 0) -> list[Sample]:
    """n queries with four continuations in random order; the happiest is the best."""
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        endings = list(ENDINGS)
        rng.shuffle(endings)
        subject = f"{rng.choice(SUBJECTS)} (story {i})"
        samples.append(
            Sample(
                id=f"s{i}",
                query=f"{subject} opened the door and",
                candidates=[f"{subject} {text}" for text, _ in endings],
                utility=[u for _, u in endings],
            )
        )
    return samples


# -- callbacks ---------------------------------------------------------------------------------
def signature_ok(secret: str, body: bytes, header: str, tolerance: float = 300.0) -> bool:
    """Check `X-Crowd-Signature: t=<unix time>,v1=<HMAC-SHA256(secret, "<t>.<body>")>`."""
    parts = dict(part.strip().partition("=")[::2] for part in header.split(","))
    try:
        sent = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - sent) > tolerance:
        return False
    expected = hmac.new(secret.encode(), f"{sent}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), parts.get("v1", "").encode())


@dataclass
class Callback:
    headers: dict[str, str]
    body: bytes
    payload: dict[str, Any]


@dataclass
class CallbackReceiver:
    """A local HTTP endpoint that records every callback POSTed to it (answers 200)."""

    host: str = "127.0.0.1"
    received: list[Callback] = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append(
                    Callback(dict(self.headers.items()), body, json.loads(body))
                )
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer((self.host, 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.server.server_port}/scale-callback"

    def __enter__(self) -> CallbackReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.thread.join()


def callback_auth_key(base_url: str, api_key: str) -> str:
    """The secret our server puts in every callback's scale-callback-auth header."""
    reply = requests.get(f"{base_url}/v1/callback_auth_key", auth=(api_key, ""), timeout=30)
    reply.raise_for_status()
    return str(reply.json()["callback_auth_key"])


def authentic(callback: Callback, key: str) -> bool:
    """Whether a callback carries our server's auth header and a valid signature."""
    headers = {name.lower(): value for name, value in callback.headers.items()}
    given = headers.get(CALLBACK_AUTH_HEADER, "").encode()
    return hmac.compare_digest(given, key.encode()) and signature_ok(
        key, callback.body, headers.get(SIGNATURE_HEADER.lower(), "")
    )


# -- one round ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Round:
    project: str
    study_id: int
    batch: str
    task_ids: dict[str, str]  # sample id -> task id


def send_round(
    base_url: str,
    api_key: str,
    samples: list[Sample],
    project: str = "rl-loop",
    round_number: int = 0,
    callback_url: str | None = None,
    providers: tuple[str, ...] = ("sim",),
    annotations_per_item: int = 3,
) -> Round:
    """Send one batch of comparisons, release it and publish the project's study."""
    client = ScaleClient(api_key, api_instance_url=f"{base_url}/v1")
    try:
        created = client.get_project(project)
    except ScaleResourceNotFound:
        created = client.create_project(project, TaskType.Comparison, params={
            "instruction": INSTRUCTION,
            # Best of K: workers pick the best attachment (Scale's own comparison asks one
            # of the task's choices instead).
            "crowd": {"pick": "attachment", "annotations_per_item": annotations_per_item,
                      "attention_rate": 0.0},
        })  # fmt: skip
    study_id = int(created.as_dict()["study_id"])
    batch = f"{project}-round-{round_number}"
    client.create_batch(project, batch, metadata={"round": round_number})
    task_ids = {}
    for sample in samples:
        task = client.create_task(
            TaskType.Comparison,
            project=project,
            batch=batch,
            instruction=sample.query,
            attachment_type="text",
            attachments=sample.candidates,
            callback_url=callback_url,
            # Sending the round again (after a crash) gives back the same tasks.
            unique_id=f"{project}/{round_number}/{sample.id}",
            metadata={"sample": sample.id},
        )
        task_ids[sample.id] = task.id
    client.finalize_batch(batch)
    reply = requests.post(
        f"{base_url}/api/studies/{study_id}/publish",
        json={"providers": list(providers)},
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=30,
    )
    reply.raise_for_status()
    return Round(project, study_id, batch, task_ids)


def simulate(base_url: str, api_key: str, study_id: int, samples: list[Sample],
             seed: int = 0) -> Any:  # fmt: skip
    """Simulated workers (mostly careful, one noisy) answer every task over HTTP."""
    from crowd.platforms.providers.sim import SimulatedCrowd

    crowd = SimulatedCrowd(base_url, api_key, study_id, "comparison",
                           [sample.record() for sample in samples], {"skilled": 3, "noisy": 1},
                           seed=seed, items_per_worker=len(samples))  # fmt: skip
    return crowd.run(threads=4)


def wait_for_choices(
    base_url: str, api_key: str, round_: Round, timeout: float = 600.0
) -> dict[str, int]:
    """Poll get_task until every task is completed; the chosen index of each sample."""
    client = ScaleClient(api_key, api_instance_url=f"{base_url}/v1")
    deadline = time.monotonic() + timeout
    chosen: dict[str, int] = {}
    while len(chosen) < len(round_.task_ids):
        for sample_id, task_id in round_.task_ids.items():
            if sample_id not in chosen:
                task = client.get_task(task_id)
                if task.status == "completed":
                    chosen[sample_id] = int(task.response["choice"])
        if len(chosen) < len(round_.task_ids):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(chosen)} of {len(round_.task_ids)} tasks completed")
            time.sleep(2.0)
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:5000", help="the crowd server")
    parser.add_argument("--key", required=True, help="an experimenter API key")
    parser.add_argument("--project", default="rl-loop")
    parser.add_argument("--round", type=int, default=0, help="the round number (batch name)")
    parser.add_argument("--tasks", type=int, default=8, help="queries in this round")
    parser.add_argument("--providers", default="sim", help="comma-separated crowds")
    parser.add_argument("--simulate", action="store_true", help="let simulated workers answer")
    args = parser.parse_args()
    samples = toy_samples(args.tasks, seed=args.round)
    with CallbackReceiver() as receiver:
        round_ = send_round(args.url, args.key, samples, args.project, args.round,
                            receiver.url, tuple(args.providers.split(",")))  # fmt: skip
        print(f"sent {len(samples)} comparisons to study {round_.study_id}")
        if args.simulate:
            print(f"simulated crowd: {simulate(args.url, args.key, round_.study_id, samples)}")
        chosen = wait_for_choices(args.url, args.key, round_)
        key = callback_auth_key(args.url, args.key)
        ok = sum(authentic(callback, key) for callback in receiver.received)
        print(
            f"{ok} authentic callbacks of {len(receiver.received)} received (a `crowd "
            "worker` must run for callbacks to go out)"
        )
    agree = sum(chosen[s.id] == s.best for s in samples)
    print(f"the crowd picked the hidden best in {agree} of {len(samples)} comparisons")
    for sample in samples:
        print(f"  {sample.id}: chose y{chosen[sample.id]} (best y{sample.best})")


if __name__ == "__main__":
    main()
