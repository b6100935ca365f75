"""A simulated crowd for the QC benchmark, written apart from the project's own simulators.

It imports nothing from crowd/, tasks/ or qc/: workers join with the experimenter's API key
as provider "sim" and play a study over HTTP only, as people do (join, next, step,
explanation), reporting simulated time in `sim_seconds`. Each worker knows the truth of every
item from the experimenter's records and finds an item by what its page shows (a passage's
first sentence, a Likert text, a comparison's query and candidates, a form's first
attachment); its kind decides how it uses that truth. Every kind reads at a human pace, so
no kind is caught by speed alone. What a worker does on an item is drawn from the worker's
seed and the item alone (`BenchCrowd.play`), so the same crowd answers a QC study and its
control alike item by item: the control's labels differ only where QC changed who answered.

Kinds (KINDS): careful and noisy readers; slow_random (random answers at reading pace);
colluder (groups of `group_size` share one answer per item, and on boundary passages one
explanation); drifter (careful for 8 items, then slow_random); paster (pastes an LLM's answer:
a function of the item, identical across pasters, unrelated to the truth); position_biased
(first shown candidate, a middle-of-the-scale straight line, always sentence 2).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import requests
from qc_words import (
    generic_explanation,
    item_hash,
    llm_explanation,
    pasted,
    reader_explanation,
    typed,
)

KINDS: tuple[str, ...] = (
    "careful", "noisy", "slow_random", "colluder", "drifter", "paster", "position_biased",
)  # fmt: skip
HIT_TYPES: tuple[str, ...] = ("boundary", "likert", "comparison", "form")
DRIFT_AFTER = 8  # a drifter's careful items (attention and gold included)
REASON_TAGS: tuple[str, ...] = (
    "grammar", "repetition", "irrelevant", "contradicts_sentence", "contradicts_knowledge",
    "common_sense", "coreference", "generic", "other",
)  # fmt: skip


@dataclass(frozen=True)
class Reader:
    """How a worker who reads answers: boundary rates, rating and ranking noise."""

    detect: float  # chance of calling a machine sentence machine
    false_alarm: float  # chance of calling a human sentence machine
    rating_sd: float
    utility_sd: float
    attention: float  # chance of following an attention check's instruction


READERS: dict[str, Reader] = {
    "careful": Reader(detect=0.55, false_alarm=0.03, rating_sd=0.6, utility_sd=0.5, attention=0.97),
    "noisy": Reader(detect=0.35, false_alarm=0.1, rating_sd=1.1, utility_sd=1.2, attention=0.9),
}
RANDOM_MACHINE = 0.2  # slow_random: chance of "machine" at each boundary step
BIASED_SHARE = 0.8  # position_biased: first shown candidate / favourite rating
BIASED_SENTENCE, BIASED_BOUNDARY_SHARE = 2, 0.85


@dataclass(frozen=True)
class Truth:
    """What the crowd knows of an item, found by what its page shows."""

    kind: str  # real, gold or attention
    boundary: int | None = None  # boundary: the first machine sentence (n: all human)
    quality: Mapping[str, float] | None = None  # likert: true quality by attribute
    expected_rating: int | None = None  # likert attention: the number asked for
    utility: Mapping[str, float] | None = None  # comparison: utility by candidate text
    best_text: str | None = None  # comparison gold/attention: the labelled best
    fields: Mapping[str, Any] | None = None  # form: the true (or asked-for) value by field

    @property
    def attention(self) -> bool:
        return self.kind == "attention"


def _texts(candidates: list[Any]) -> list[str]:
    return [str(c["text"] if isinstance(c, Mapping) else c).strip() for c in candidates]


def _comparison_key(query: str, texts: list[str]) -> str:
    return "\x1e".join([query.strip(), *sorted(texts)])


def page_key(hit_type: str, task: Mapping[str, Any]) -> str:
    """Which item the page shows, whatever was revealed or shuffled."""
    if hit_type == "boundary":
        return str(task["sentences"][0]).strip()
    if hit_type == "likert":
        return str(task["text"]).strip()
    if hit_type == "form":
        return str(task["attachments"][0]["content"]).strip()
    return _comparison_key(str(task["query"]), _texts(list(task["candidates"])))


def truths_of(hit_type: str, records: list[dict[str, Any]]) -> dict[str, Truth]:
    """The truth of each record, keyed as page_key finds it."""
    if hit_type not in HIT_TYPES:
        raise ValueError(f"unknown HIT type {hit_type!r}: use one of {', '.join(HIT_TYPES)}")
    truths: dict[str, Truth] = {}
    for record in records:
        kind = str(record.get("kind", "real"))
        meta = record.get("meta") or {}
        if hit_type == "boundary":
            sentences = [str(s) for s in record["sentences"]]
            boundary = int(record.get("boundary", len(sentences)))
            truths[sentences[0].strip()] = Truth(kind, boundary=boundary)
        elif hit_type == "likert":
            quality = meta.get("quality") or record.get("expected_ratings") or {}
            expected = record.get("expected_rating") if kind == "attention" else None
            truths[str(record["text"]).strip()] = Truth(
                kind,
                quality={str(k): float(v) for k, v in quality.items()},
                expected_rating=None if expected is None else int(expected),
            )
        elif hit_type == "form":
            wanted = record.get("expected") if kind == "attention" else None
            fields = wanted or (meta.get("truth") or {})
            key = str(record["attachments"][0]["content"]).strip()
            truths[key] = Truth(kind, fields=dict(fields))
        else:
            texts = _texts(list(record["candidates"]))
            utility = meta.get("utility")
            best = record.get("best")
            truths[_comparison_key(str(record["query"]), texts)] = Truth(
                kind,
                utility=dict(zip(texts, [float(u) for u in utility], strict=True))
                if utility is not None
                else None,
                best_text=texts[int(best)] if best is not None else None,
            )
    return truths


def clip_round(value: float, low: int, high: int) -> int:
    """Round half up, clip to the scale."""
    return min(high, max(low, int(value + 0.5) if value >= 0 else -int(-value + 0.5)))


def new_chars(value: Any, seen: set[str]) -> int:
    """Characters of the page's texts not shown before in this assignment (marks them seen)."""
    if isinstance(value, str):
        if value in seen:
            return 0
        seen.add(value)
        return len(value)
    if isinstance(value, Mapping):
        return sum(new_chars(v, seen) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(new_chars(v, seen) for v in value)
    return 0


def reading_seconds(rng: random.Random, chars: int) -> float:
    """A step at a human pace: 1.5 s, plus the new text at 12 to 25 characters a second."""
    return 1.5 + chars / rng.uniform(12.0, 25.0)


@dataclass
class BenchWorker:
    external_id: str
    kind: str
    seed: float  # with an item's key, seeds what the worker does on it (Play.rng)
    group: str | None = None
    favourite: int = 0  # position_biased: 0 for the scale's middle, 1 for one above
    token: str | None = None
    items: int = 0
    finished: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def mode(self) -> str:
        """How the worker plays its next item (a drifter changes after DRIFT_AFTER items)."""
        if self.kind == "drifter":
            return "careful" if self.items < DRIFT_AFTER else "slow_random"
        return self.kind


@dataclass
class BenchResult:
    workers: dict[str, str]  # external id -> kind
    items_done: dict[str, int]
    errors: list[str]
    groups: dict[str, str]  # external id -> collusion group (colluders only)

    def by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for kind in self.workers.values():
            counts[kind] = counts.get(kind, 0) + 1
        return counts


class HttpError(RuntimeError):
    def __init__(self, path: str, status: int, text: str) -> None:
        super().__init__(f"POST {path}: {status} {text[:200]}")
        self.status = status


class Stopped(Exception):
    """The server has nothing more for this worker: done, blocked or the study closed."""


@dataclass
class Play:
    """One worker on one assignment: what it decided up front, what it has read."""

    worker: BenchWorker
    mode: str
    key: str
    truth: Truth
    follows_check: bool  # reads and follows an attention check's instruction
    rng: random.Random  # the worker's draws on this item
    shared_rng: random.Random  # the draws a colluder's ring shares on this item
    seen: set[str] = field(default_factory=set)


class BenchCrowd:
    """Workers of the given kinds play a study over HTTP, one item each per round."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        study_id: int,
        hit_type: str,
        records: list[dict[str, Any]],
        mix: Mapping[str, int],
        seed: int = 0,
        items_per_worker: int = 30,
        prefix: str = "bench",
        group_size: int = 4,
    ) -> None:
        unknown = sorted(set(mix) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown worker kinds {unknown}: use {', '.join(KINDS)}")
        if group_size < 1:
            raise ValueError("group_size must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.study_id = study_id
        self.hit_type = hit_type
        self.truths = truths_of(hit_type, records)
        self.items_per_worker = items_per_worker
        self.seed = seed
        master = random.Random(seed)
        self.workers: list[BenchWorker] = []
        colluders = 0
        for kind in KINDS:
            for n in range(mix.get(kind, 0)):
                worker = BenchWorker(f"{prefix}-{kind}-{n:02d}", kind, master.random())
                worker.favourite = master.choice((0, 1))
                if kind == "colluder":
                    worker.group = f"{prefix}-ring-{colluders // group_size:02d}"
                    colluders += 1
                self.workers.append(worker)
        master.shuffle(self.workers)
        self.errors: list[str] = []
        self._errors_lock = threading.Lock()
        self._shared: dict[tuple[str, str], dict[str, Any]] = {}  # (group, item) -> answers
        self._shared_lock = threading.Lock()
        self._local = threading.local()

    # -- HTTP --------------------------------------------------------------------------------
    def _http(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def _post(self, path: str, body: Mapping[str, Any], worker: BenchWorker | None) -> Any:
        if worker is None:
            headers = {"Authorization": f"Bearer {self.api_key}"}
        else:
            headers = {"X-Crowd-Worker": worker.token or ""}
        response = self._http().post(self.base_url + path, json=body, headers=headers, timeout=60)
        if response.status_code >= 400:
            raise HttpError(path, response.status_code, response.text)
        return response.json()

    def join(self, worker: BenchWorker) -> None:
        data = self._post(
            "/api/work/join", {"provider": "sim", "external_id": worker.external_id}, None
        )
        worker.token = str(data["worker_token"])

    # -- one item ----------------------------------------------------------------------------
    def play_one(self, worker: BenchWorker) -> None:
        """Play the worker's next item; raises Stopped when the server has none for them."""
        if worker.token is None:
            self.join(worker)
        try:
            view = self._post(f"/api/work/studies/{self.study_id}/next", {}, worker)
        except HttpError as error:
            # 403: the worker is blocked; 409: the study is closed (or not for sim workers).
            if error.status in (403, 409):
                raise Stopped(str(error)) from None
            raise
        if view.get("done"):
            raise Stopped(str(view.get("message", "done")))
        task = view["task"]
        key = page_key(self.hit_type, task)
        truth = self.truths.get(key)
        if truth is None:
            raise RuntimeError(f"the crowd does not know the item {key[:60]!r}")
        play = self.play(worker, key, truth)
        answer = self.plan(play)
        path = f"/api/work/assignments/{view['assignment_id']}"
        while "task" in view and not view.get("answered"):
            task = view["task"]
            seconds = reading_seconds(play.rng, new_chars(task, play.seen))
            body = {**answer(task), "step": task["step"], "sim_seconds": round(seconds, 3)}
            view = self._post(f"{path}/step", body, worker)
        if view.get("needs_followup"):
            view = self._post(f"{path}/explanation", self._explanation(play, view["task"]), worker)
        if "feedback" not in view:
            raise RuntimeError(f"assignment {view.get('assignment_id')} ended without feedback")

    def play(self, worker: BenchWorker, key: str, truth: Truth) -> Play:
        """The worker's play of the item `key` in its current mode.

        Every draw on an item comes from the worker's (or the ring's) seed and the item, not
        from one stream that the order of items shifts: a worker answers an item alike in a QC
        study and in its control, whatever each served before, so the labels' comparison is
        paired (common random numbers), not two samples of the crowd's noise."""
        mode = worker.mode()
        rng = random.Random(f"{worker.seed}:{key}")
        shared_rng = random.Random(f"{self.seed}:{worker.group}:{key}")
        follows = mode in ("colluder", "paster") or (
            mode in READERS and rng.random() < READERS[mode].attention
        )
        return Play(worker, mode, key, truth, follows, rng, shared_rng)

    def plan(self, play: Play) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        """How the play answers each step of its page."""
        return {"boundary": self._boundary_plan, "likert": self._likert_plan,
                "comparison": self._comparison_plan, "form": self._form_plan,
                }[self.hit_type](play)  # fmt: skip

    def _shared_answer(self, play: Play, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The group's answer to the item: the first member to reach it decides."""
        group = play.worker.group or play.worker.external_id
        with self._shared_lock:
            answer = self._shared.get((group, play.key))
            if answer is None:
                answer = self._shared[(group, play.key)] = make()
            return answer

    # -- boundary ----------------------------------------------------------------------------
    def _boundary_guess(self, play: Play, n: int) -> int | None:
        """A guess fixed up front (n: all human), or None to decide sentence by sentence."""
        rng, mode, truth = play.rng, play.mode, play.truth
        if truth.attention and play.follows_check:
            return n
        if mode in READERS and truth.attention:
            return rng.randint(1, n - 1)  # a slip: the check's instruction was missed
        if mode == "colluder":
            ring = play.shared_rng.randint(1, n)
            return int(self._shared_answer(play, lambda: {"guess": ring})["guess"])
        if mode == "paster":
            return 1 + item_hash("boundary", play.key) % n
        if mode == "position_biased":
            if rng.random() < BIASED_BOUNDARY_SHARE:
                return min(BIASED_SENTENCE, n)
            return rng.randint(1, n)
        return None

    def _boundary_plan(self, play: Play) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        guess: list[int | None] = []  # decided at the first step, when n is known

        def answer(task: Mapping[str, Any]) -> dict[str, Any]:
            step = int(task["step"])
            n = int(task.get("n_sentences") or play.truth.boundary or 10)
            if not guess:
                guess.append(self._boundary_guess(play, n))
            if step == 0:
                return {"choice": "human"}
            fixed = guess[0]
            if fixed is not None:
                return {"choice": "machine" if step == fixed else "human"}
            if play.mode in READERS:
                reader = READERS[play.mode]
                boundary = play.truth.boundary if play.truth.boundary is not None else n
                chance = reader.detect if step >= boundary else reader.false_alarm
            else:
                chance = RANDOM_MACHINE
            return {"choice": "machine" if play.rng.random() < chance else "human"}

        return answer

    def _explanation(self, play: Play, task: Mapping[str, Any]) -> dict[str, Any]:
        rng, step = play.rng, int(task.get("step", 0))
        if play.mode == "paster":
            text, reasons = llm_explanation(play.key, step)
            return {"explanation": text, "reasons": reasons, "typing": pasted(rng, text)}
        if play.mode == "colluder":

            def make() -> dict[str, Any]:
                text, reasons = reader_explanation(play.shared_rng, step)
                return {"text": text, "reasons": reasons}

            shared = self._shared_answer(play, lambda: {})
            with self._shared_lock:
                if "text" not in shared:
                    shared.update(make())
                text, reasons = str(shared["text"]), list(shared["reasons"])
        elif play.mode in READERS:
            text, reasons = reader_explanation(rng, step)
        else:
            text, reasons = generic_explanation(rng)
        return {"explanation": text, "reasons": reasons, "typing": typed(rng, text)}

    # -- likert ------------------------------------------------------------------------------
    def _likert_plan(self, play: Play) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        rng, mode, truth = play.rng, play.mode, play.truth

        def answer(task: Mapping[str, Any]) -> dict[str, Any]:
            attribute = task["attribute"]
            name = str(attribute["name"])
            low, high = (int(end) for end in attribute["scale"])
            if truth.attention and play.follows_check and truth.expected_rating is not None:
                return {"rating": clip_round(truth.expected_rating, low, high)}
            if mode in READERS:
                quality = (truth.quality or {}).get(name, (low + high) / 2)
                noisy = clip_round(quality, low, high) + rng.gauss(0.0, READERS[mode].rating_sd)
                return {"rating": clip_round(noisy, low, high)}
            if mode == "colluder":
                shared = self._shared_answer(play, lambda: {})
                with self._shared_lock:
                    rating = shared.setdefault(name, play.shared_rng.randint(low, high))
                return {"rating": int(rating)}
            if mode == "paster":  # an LLM's ratings: high, fixed by the item and question
                pool = (high - 2, high - 1, high - 1, high - 1, high, high, high)
                return {"rating": max(low, pool[item_hash("likert", play.key, name) % len(pool)])}
            if mode == "position_biased":  # the middle of the scale, nearly always the same
                favourite = (low + high) // 2 + play.worker.favourite
                other = (low + high) // 2 + 1 - play.worker.favourite
                value = favourite if rng.random() < BIASED_SHARE else other
                return {"rating": min(high, max(low, value))}
            return {"rating": rng.randint(low, high)}

        return answer

    # -- comparison --------------------------------------------------------------------------
    def _comparison_plan(self, play: Play) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        rng, mode, truth = play.rng, play.mode, play.truth

        def answer(task: Mapping[str, Any]) -> dict[str, Any]:
            shown = _texts(list(task["candidates"]))
            # Draws go to texts in one order, not to the page's positions: each page has its
            # own order, and the same worker picks the same text on any of them.
            texts, k = sorted(shown), len(shown)
            best = truth.best_text
            if truth.attention and play.follows_check and best in shown:
                return {"choice": shown.index(best)}
            if mode in READERS and truth.attention:  # a slip: another candidate
                return {"choice": shown.index(rng.choice([t for t in texts if t != best]))}
            if mode in READERS:
                utility = truth.utility or {}
                sd = READERS[mode].utility_sd
                noisy = {text: utility.get(text, 0.0) + rng.gauss(0.0, sd) for text in texts}
                return {"choice": shown.index(max(texts, key=noisy.__getitem__))}
            if mode == "colluder":
                ring = play.shared_rng.choice(texts)
                text = self._shared_answer(play, lambda: {"text": ring})["text"]
                return {"choice": shown.index(text)}
            if mode == "paster":
                return {"choice": shown.index(texts[item_hash("comparison", play.key) % k])}
            if mode == "position_biased" and rng.random() < BIASED_SHARE:
                return {"choice": 0}
            return {"choice": shown.index(texts[rng.randrange(k)])}

        return answer

    # -- form --------------------------------------------------------------------------------
    def _form_plan(self, play: Play) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        """Rating fields as the Likert plan rates, single-choice category fields as the
        comparison plan picks (the truth's utility 1, the others' 0, plus reading noise)."""
        mode, truth = play.mode, play.truth
        rng = play.shared_rng if mode == "colluder" else play.rng  # a ring fills in one form
        wanted = dict(truth.fields or {})

        def rating(field: Mapping[str, Any]) -> int:
            name = str(field["id"])
            low, high = (int(end) for end in field["scale"])
            if truth.attention and play.follows_check:
                return clip_round(float(wanted[name]), low, high)
            if mode in READERS and not truth.attention:
                noisy = clip_round(float(wanted[name]), low, high)
                return clip_round(noisy + rng.gauss(0.0, READERS[mode].rating_sd), low, high)
            if mode == "paster":  # an LLM's ratings: high, fixed by the item and question
                pool = (high - 2, high - 1, high - 1, high - 1, high, high, high)
                return max(low, pool[item_hash("form", play.key, name) % len(pool)])
            if mode == "position_biased":  # the middle of the scale, nearly always
                favourite = (low + high) // 2 + play.worker.favourite
                other = (low + high) // 2 + 1 - play.worker.favourite
                return min(high, max(low, favourite if rng.random() < BIASED_SHARE else other))
            return rng.randint(low, high)

        def choice(field: Mapping[str, Any]) -> list[str]:
            name = str(field["id"])
            values = [str(c["value"]) for c in field["choices"]]
            true = wanted.get(name)
            true = true[0] if isinstance(true, list) else true
            if truth.attention and play.follows_check:
                return [str(true)]
            if mode in READERS and not truth.attention:
                sd = READERS[mode].utility_sd
                noisy = [(v == true) + rng.gauss(0.0, sd) for v in values]
                return [values[noisy.index(max(noisy))]]
            if mode == "paster":
                return [values[item_hash("form", play.key, name) % len(values)]]
            if mode == "position_biased" and rng.random() < BIASED_SHARE:
                return [values[0]]
            return [rng.choice(values)]

        def answer(task: Mapping[str, Any]) -> dict[str, Any]:
            def fresh() -> dict[str, Any]:
                return {
                    str(f["id"]): rating(f) if f["type"] == "rating" else choice(f)
                    for f in task["fields"]
                }

            if mode == "colluder" and not (truth.attention and play.follows_check):
                return {"fields": self._shared_answer(play, fresh)}
            return {"fields": fresh()}

        return answer

    # -- the run -----------------------------------------------------------------------------
    def _turn(self, worker: BenchWorker) -> None:
        with worker.lock:
            if worker.finished or worker.items >= self.items_per_worker:
                return
            try:
                self.play_one(worker)
                worker.items += 1
            except Stopped:
                worker.finished = True
            except (RuntimeError, KeyError, ValueError, requests.RequestException) as error:
                worker.finished = True
                with self._errors_lock:
                    self.errors.append(f"{worker.external_id}: {error}")

    def run(
        self, threads: int = 4, between_rounds: Callable[[], None] | None = None
    ) -> BenchResult:
        """Every worker plays one item per round, until all are done or out of work;
        `between_rounds` is called after each round (to pace the crowd)."""
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for _round in range(self.items_per_worker):
                list(pool.map(self._turn, self.workers))
                if all(w.finished or w.items >= self.items_per_worker for w in self.workers):
                    break
                if between_rounds is not None:
                    between_rounds()
        return BenchResult(
            workers={w.external_id: w.kind for w in self.workers},
            items_done={w.external_id: w.items for w in self.workers},
            errors=list(self.errors),
            groups={w.external_id: w.group for w in self.workers if w.group is not None},
        )
