"""An RL loop's round through the Scale-compatible API: comparisons out, signed choices back.

Runs examples/scale_rl_loop.py against the live server: scaleapi creates the project, a batch
of 4-way comparisons with a callback URL and releases it; simulated workers answer over HTTP;
the queue jobs complete the tasks and deliver the callbacks to a local receiver.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from scaleapi import ScaleClient
from sqlalchemy import select

from crowd.delivery.signed import verify_signature
from crowd.queue.runner import run_worker
from crowd.settings import Settings
from crowd.storage import Database, Delivery, DeliveryStatus, ScaleTask, utcnow
from examples.scale_rl_loop import (
    CallbackReceiver,
    authentic,
    callback_auth_key,
    send_round,
    simulate,
    toy_samples,
)


def _state(db: Database) -> str:
    """What the tasks and their callbacks' deliveries say, for a failure's message (the test
    once saw 2 callbacks of 8 in a full run of the suite, and never alone)."""
    with db.session() as session:
        tasks = [(t.status, t.delivery_id) for t in session.scalars(select(ScaleTask))]
        deliveries = [(d.id, d.status, d.attempts, d.last_error)
                      for d in session.scalars(select(Delivery))]  # fmt: skip
    return (f"tasks (status, delivery): {tasks}; "
            f"deliveries (id, status, attempts, error): {deliveries}")


@pytest.mark.slow
def test_a_round_of_comparisons_comes_back_as_signed_callbacks(
    live_server: Any, api_key: str, settings: Settings, db: Database
) -> None:
    samples = toy_samples(8, seed=1)
    with CallbackReceiver() as receiver:
        round_ = send_round(live_server.url, api_key, samples, callback_url=receiver.url)
        result = simulate(live_server.url, api_key, round_.study_id, samples, seed=2)
        assert result.errors == []
        run_worker(settings, burst=True)
    key = callback_auth_key(live_server.url, api_key)
    by_task = {callback.payload["task_id"]: callback for callback in receiver.received}
    assert set(by_task) == set(round_.task_ids.values()), _state(db)
    assert len(receiver.received) == len(samples)  # one callback per task, none twice
    client = ScaleClient(api_key, api_instance_url=f"{live_server.url}/v1")
    agree = 0
    for sample in samples:
        callback = by_task[round_.task_ids[sample.id]]
        assert callback.headers["scale-callback-auth"] == key
        assert verify_signature(key, callback.body, callback.headers["X-Crowd-Signature"])
        assert authentic(callback, key)
        response = callback.payload["response"]
        assert callback.payload["task"]["status"] == "completed"
        assert callback.payload["task"]["response"] == response
        assert response["chosen"] == sample.candidates[response["choice"]]
        assert response["responses"] == 3 and sum(response["votes"]) == 3
        agree += response["choice"] == sample.best
        task = client.get_task(round_.task_ids[sample.id])
        assert task.callback_succeeded is True
        assert task.metadata == {"sample": sample.id}
    assert agree >= 6, f"the crowd found the hidden best in only {agree} of {len(samples)}"
    assert not authentic(receiver.received[0], "another key")


def test_a_callback_given_up_after_a_day_is_recorded(
    live_server: Any, api_key: str, settings: Settings, db: Database
) -> None:
    samples = toy_samples(1)
    # Nothing listens on the discard port: every attempt is refused.
    round_ = send_round(live_server.url, api_key, samples, callback_url="http://127.0.0.1:9/",
                        annotations_per_item=1)  # fmt: skip
    simulate(live_server.url, api_key, round_.study_id, samples)
    run_worker(settings, burst=True)
    client = ScaleClient(api_key, api_instance_url=f"{live_server.url}/v1")
    task = client.get_task(round_.task_ids["s0"])
    assert task.status == "completed" and task.callback_succeeded is None  # still retrying
    with db.session() as session:
        delivery = session.scalars(select(Delivery)).one()
        assert delivery.attempts == 1 and delivery.status == DeliveryStatus.PENDING
        delivery.created_at = utcnow() - timedelta(hours=25)
        delivery.next_attempt_at = utcnow()
    run_worker(settings, burst=True)
    assert client.get_task(round_.task_ids["s0"]).callback_succeeded is False
