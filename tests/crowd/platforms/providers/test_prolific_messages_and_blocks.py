"""A reviewer's notify and block reach Prolific, through queued jobs, against the stand-in.

notify sends Prolific messages: the study's pending notifications with the same text go out as
one bulk message. block puts the participant in the experimenter's participant group of
blocked participants, made once, which every Prolific study published for the experimenter
excludes; unblock takes them out again.
"""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import delete, select

from crowd.platforms.actions import ActionLedger
from crowd.platforms.providers import PROVIDERS
from crowd.platforms.providers.base import ActionTarget
from crowd.platforms.providers.prolific_api import ProlificClient
from crowd.queue.runner import run_worker
from crowd.settings import Settings
from crowd.storage import ActionStatus, Database, PlatformAccount, PlatformAction, Worker
from tests.conftest import passage
from tests.crowd.platforms.providers.prolific_server import ProlificServer
from tests.crowd.platforms.providers.prolific_support import done
from tests.crowd.platforms.providers.prolific_support import publish as publish_study
from tests.crowd.platforms.providers.test_mturk_provider import do_items, open_page, worker_header

# The stand-in and settings pointing at it, shared with the other Prolific provider tests.
from tests.crowd.platforms.providers.test_prolific_provider import prolific as prolific
from tests.crowd.platforms.providers.test_prolific_provider import publish
from tests.crowd.platforms.providers.test_prolific_provider import settings as settings
from tests.crowd.platforms.providers.test_prolific_provider import study_id as study_id

BLOCKLIST = "participant_group_blocklist"


def take_part(client: FlaskClient, prolific: ProlificServer, remote_id: str, study_id: int) -> str:
    """A participant starts the Prolific study and does their items on our page; their id."""
    submission, _ = prolific.start_submission(remote_id)
    who = worker_header(open_page(client, prolific.participant_url(submission))[1])
    do_items(client, who, study_id)
    return prolific.submissions[submission].participant_id


def our_worker(db: Database, participant: str) -> int:
    with db.session() as session:
        found = session.scalar(
            select(Worker.id).where(
                Worker.provider == "prolific", Worker.external_id == participant
            )
        )
        assert found is not None, participant
        return found


def act(client: FlaskClient, auth: dict[str, str], study_id: int, worker: int, **body: Any) -> None:
    reply = client.post(
        f"/api/studies/{study_id}/workers/{worker}/actions", json=body, headers=auth
    )
    assert reply.status_code == 200, reply.get_json()


def second_study(make_study: Any, client: FlaskClient, auth: dict[str, str]) -> tuple[int, str]:
    other = int(
        make_study(
            [passage(f"q{i}", 2) for i in range(4)],
            {"annotations_per_item": 1, "attention_rate": 0.0},
            ("local",),
        )
    )
    return other, publish(client, auth, other)


def test_notify_sends_one_bulk_message_to_the_participants_it_names(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    prolific: ProlificServer,
    db: Database,
    settings: Settings,
) -> None:
    remote_id = publish(client, auth, study_id)
    first, second = (take_part(client, prolific, remote_id, study_id) for _ in range(2))
    workers = [our_worker(db, first), our_worker(db, second)]
    note = {"action": "notify", "subject": "Thanks", "reason": "A follow-up study is open."}
    for worker in workers:
        act(client, auth, study_id, worker, **note)
    run_worker(settings, burst=True)
    assert prolific.calls_to("bulk_message") == 1 and prolific.calls_to("send_message") == 0
    text = "Thanks\n\nA follow-up study is open."
    assert [(m.recipient_id, m.study_id, m.body, m.bulk) for m in prolific.messages] == [
        (first, remote_id, text, True),
        (second, remote_id, text, True),
    ]
    with db.session() as session:
        rows = session.scalars(select(PlatformAction).order_by(PlatformAction.id)).all()
        assert [row.status for row in rows] == [ActionStatus.DONE, ActionStatus.DONE]
        assert {row.result["batch"] for row in rows} == {rows[0].id}
        assert rows[1].result["messaged"] == {remote_id: sorted([first, second])}

    # One participant, another text: one message, not a bulk one.
    act(client, auth, study_id, workers[1], action="notify", reason="One more thing.")
    run_worker(settings, burst=True)
    assert prolific.calls_to("send_message") == 1 and prolific.calls_to("bulk_message") == 1
    last = prolific.messages[-1]
    assert (last.recipient_id, last.bulk) == (second, False)
    assert last.body.endswith("One more thing.")


def test_block_excludes_the_participant_from_every_study_of_the_experimenter_until_unblocked(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    make_study: Any,
    prolific: ProlificServer,
    db: Database,
    settings: Settings,
) -> None:
    remote_id = publish(client, auth, study_id)
    (group,) = prolific.groups.values()  # made on the first publish, in the only workspace
    assert group.name == "crowd: blocked by tester" and group.members == {}
    assert group.workspace_id == prolific.workspace_id
    filters = prolific.studies[remote_id].fields["filters"]
    assert filters == [{"filter_id": BLOCKLIST, "selected_values": [group.id]}]

    participant = take_part(client, prolific, remote_id, study_id)
    worker = our_worker(db, participant)
    act(client, auth, study_id, worker, action="block", reason="copied answers elsewhere")
    run_worker(settings, burst=True)
    assert list(group.members) == [participant]
    with db.session() as session:
        block = session.scalar(select(PlatformAction).where(PlatformAction.action == "block"))
        assert block is not None and block.status == ActionStatus.DONE
        assert block.result == {"exclusion_groups": {prolific.workspace_id: group.id}}

    # Another study of the experimenter: the same group, and the blocked participant is
    # turned away by Prolific itself while others take part.
    _other, other_remote = second_study(make_study, client, auth)
    assert len(prolific.groups) == 1
    other_filters = prolific.studies[other_remote].fields["filters"]
    assert other_filters == [{"filter_id": BLOCKLIST, "selected_values": [group.id]}]
    with pytest.raises(PermissionError):
        prolific.start_submission(other_remote, participant)
    prolific.start_submission(other_remote)

    act(client, auth, study_id, worker, action="unblock", reason="a mistake")
    run_worker(settings, burst=True)
    assert group.members == {}
    prolific.start_submission(other_remote, participant)


def test_a_block_with_no_group_yet_makes_it_once_with_everyone_blocked_before(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    make_study: Any,
    prolific: ProlificServer,
    db: Database,
    settings: Settings,
) -> None:
    remote_id = publish(client, auth, study_id)
    # As if the study had been published before we kept a group: none is known.
    with db.session() as session:
        session.execute(delete(PlatformAccount))
    prolific.groups.clear()
    first, second = (take_part(client, prolific, remote_id, study_id) for _ in range(2))
    act(client, auth, study_id, our_worker(db, first), action="block", reason="bots")
    act(client, auth, study_id, our_worker(db, second), action="block", reason="bots")
    run_worker(settings, burst=True)
    (group,) = prolific.groups.values()  # once, though two blocks needed it
    assert sorted(group.members) == sorted([first, second])
    made = [body for name, body in prolific.calls if name == "create_group"]
    assert made[-1]["participant_ids"] == [first, second]
    with db.session() as session:
        account = session.scalar(select(PlatformAccount))
        assert account is not None and account.settings["exclusion_group_id"] == group.id
        assert account.workspace == prolific.workspace_id
        statuses = session.scalars(select(PlatformAction.status)).all()
        assert statuses == [ActionStatus.DONE, ActionStatus.DONE]
    _other, other_remote = second_study(make_study, client, auth)
    filters = prolific.studies[other_remote].fields["filters"]
    assert filters == [{"filter_id": BLOCKLIST, "selected_values": [group.id]}]
    for participant in (first, second):
        with pytest.raises(PermissionError):
            prolific.start_submission(other_remote, participant)


def test_a_notification_goes_per_prolific_study_and_a_retry_skips_who_got_it(
    prolific: ProlificServer, settings: Settings
) -> None:
    client = ProlificClient(prolific.token, base_url=prolific.base_url)
    studies = [publish_study(client), publish_study(client)]
    taking_part = studies * 2  # two participants in each
    ids = [prolific.submissions[done(prolific, study)].participant_id for study in taking_part]
    targets = [
        ActionTarget(who, task_remote_id=study) for who, study in zip(ids, taking_part, strict=True)
    ]
    # A retry after the first study's message went out and the second one's failed.
    ledger = {f"message {studies[0]}": f"{ids[0]} {ids[2]}"}
    params = {"subject": "", "message": "Thanks!"}
    result = PROVIDERS.get("prolific").perform_many(settings, "notify", targets, params, ledger)
    assert [(m.recipient_id, m.study_id) for m in prolific.messages] == [
        (ids[1], studies[1]),
        (ids[3], studies[1]),
    ]
    assert ledger[f"message {studies[1]}"] == f"{ids[1]} {ids[3]}"
    assert result == {"messaged": {studies[0]: sorted(ids[0::2]), studies[1]: sorted(ids[1::2])}}


def test_a_single_notification_notes_its_message_in_the_actions_empty_ledger(
    prolific: ProlificServer, settings: Settings, db: Database
) -> None:
    client = ProlificClient(prolific.token, base_url=prolific.base_url)
    study = publish_study(client)
    participant = prolific.submissions[done(prolific, study)].participant_id
    with db.session() as session:
        row = PlatformAction(provider="prolific", action="notify")
        session.add(row)
        session.flush()
        action_id = row.id
    ledger = ActionLedger(db, action_id)
    assert not ledger  # empty, so falsy: still the ledger to note the message in
    target = ActionTarget(participant, task_remote_id=study)
    params = {"subject": "", "message": "Thanks!"}
    PROVIDERS.get("prolific").perform(settings, "notify", target, params, ledger)
    assert dict(ledger) == {f"message {study}": participant}
    # A retry of the call (its answer lost, say) sends nothing again.
    PROVIDERS.get("prolific").perform(settings, "notify", target, params, ledger)
    assert [m.recipient_id for m in prolific.messages] == [participant]
