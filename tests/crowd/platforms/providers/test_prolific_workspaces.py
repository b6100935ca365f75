"""The experimenter's groups of blocked participants on Prolific, one per workspace, against
the stand-in: a publish finds the workspace from its project (a token may be in several),
the group is kept before the publish so that a failed publish and its retry make one group,
and a block or unblock reaches the group of every workspace the experimenter publishes in.
"""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from sqlalchemy import column, select, table, text

from crowd.cli import main
from crowd.queue.runner import run_worker
from crowd.settings import Settings
from crowd.storage import Database, PlatformAccount, Publication, utcnow
from crowd.storage.base import JSONType, UTCDateTime
from tests.conftest import passage
from tests.crowd.platforms.providers.prolific_server import ProlificServer
from tests.crowd.platforms.providers.test_prolific_messages_and_blocks import (
    BLOCKLIST,
    act,
    our_worker,
    take_part,
)

# The stand-in and settings pointing at it, shared with the other Prolific provider tests.
from tests.crowd.platforms.providers.test_prolific_provider import OPTIONS
from tests.crowd.platforms.providers.test_prolific_provider import prolific as prolific
from tests.crowd.platforms.providers.test_prolific_provider import settings as settings
from tests.crowd.platforms.providers.test_prolific_provider import study_id as study_id

# platform_accounts as migration 0010 made it.
ACCOUNTS_0010 = table(
    "platform_accounts",
    column("experimenter_id"),
    column("provider"),
    column("settings", JSONType),
    column("created_at", UTCDateTime()),
    column("updated_at", UTCDateTime()),
)


def publish(
    client: FlaskClient, auth: dict[str, str], study_id: int, **options: Any
) -> tuple[int, dict[str, Any]]:
    body = {"providers": ["prolific"], "options": {"prolific": {**OPTIONS, **options}}}
    reply = client.post(f"/api/studies/{study_id}/publish", json=body, headers=auth)
    return reply.status_code, reply.get_json()


def remote_id(answer: dict[str, Any]) -> str:
    return str(answer["links"]["prolific"]["study"]).rsplit("/", 1)[1]


def excluded_groups(prolific: ProlificServer, remote: str) -> list[str]:
    filters = prolific.studies[remote].fields.get("filters") or []
    return [g for f in filters if f["filter_id"] == BLOCKLIST for g in f["selected_values"]]


def another_study(make_study: Any) -> int:
    items = [passage(f"q{i}", 2) for i in range(4)]
    return int(make_study(items, {"annotations_per_item": 1, "attention_rate": 0.0}, ("local",)))


def test_a_token_in_several_workspaces_publishes_to_a_project_in_its_workspace(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    make_study: Any,
    prolific: ProlificServer,
    db: Database,
) -> None:
    home, other = prolific.workspace_id, prolific.add_workspace()
    project = prolific.add_project(other)
    status, answer = publish(client, auth, study_id, project=project)
    assert status == 200, answer
    (group,) = prolific.groups.values()
    assert group.workspace_id == other
    remote = remote_id(answer)
    assert prolific.studies[remote].fields["project"] == project
    assert excluded_groups(prolific, remote) == [group.id]
    with db.session() as session:
        (kept,) = session.scalars(select(PlatformAccount)).all()
        assert kept.workspace == other and kept.settings["exclusion_group_id"] == group.id
        publication = session.scalar(select(Publication))
        assert publication is not None and publication.remote["workspace_id"] == other

    # Neither a project nor a workspace: which workspace's group to exclude is unknown; a
    # project in one workspace with another named, or an unknown project, is a mistake. Each
    # is said before anything is made.
    later = another_study(make_study)
    status, answer = publish(client, auth, later)
    assert status == 422 and answer["field"] == "workspace_id", answer
    assert "project" in answer["error"]
    status, answer = publish(client, auth, later, project=project, workspace_id=home)
    assert status == 422 and answer["field"] == "workspace_id", answer
    status, answer = publish(client, auth, later, project="0" * 24)
    assert status == 422 and answer["field"] == "project", answer
    assert len(prolific.groups) == 1 and len(prolific.studies) == 1


def test_a_publish_that_fails_after_the_group_is_made_is_retried_with_the_same_group(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    prolific: ProlificServer,
    db: Database,
) -> None:
    prolific.balance = 0  # Prolific refuses to publish the study: top up, then retry
    status, answer = publish(client, auth, study_id)
    assert status == 502 and "Insufficient balance" in answer["error"], answer
    (group,) = prolific.groups.values()
    with db.session() as session:  # kept, though the publish rolled back
        assert session.scalars(select(PlatformAccount.settings)).all() == [
            {"exclusion_group_id": group.id, "workspace_id": prolific.workspace_id}
        ]
        assert session.scalar(select(Publication)) is None

    prolific.balance = 100_000
    status, answer = publish(client, auth, study_id)
    assert status == 200, answer
    assert list(prolific.groups) == [group.id]  # no second group
    assert excluded_groups(prolific, remote_id(answer)) == [group.id]
    assert sum(1 for name, _ in prolific.calls if name == "create_group") == 1


def test_a_block_reaches_the_group_of_every_workspace_the_experimenter_publishes_in(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    make_study: Any,
    prolific: ProlificServer,
    db: Database,
    settings: Settings,
) -> None:
    home = prolific.workspace_id
    status, answer = publish(client, auth, study_id)  # in the token's only workspace
    assert status == 200, answer
    first = remote_id(answer)
    participant = take_part(client, prolific, first, study_id)
    worker = our_worker(db, participant)
    act(client, auth, study_id, worker, action="block", reason="copied answers elsewhere")
    run_worker(settings, burst=True)

    # A study in a workspace the researcher joined since excludes that workspace's own
    # group, made with everyone blocked so far.
    away = prolific.add_workspace()
    other = another_study(make_study)
    status, answer = publish(client, auth, other, project=prolific.add_project(away))
    assert status == 200, answer
    second = remote_id(answer)
    by_workspace = {group.workspace_id: group for group in prolific.groups.values()}
    assert sorted(by_workspace) == sorted([home, away])
    assert excluded_groups(prolific, first) == [by_workspace[home].id]
    assert excluded_groups(prolific, second) == [by_workspace[away].id]
    assert list(by_workspace[away].members) == [participant]
    with pytest.raises(PermissionError):
        prolific.start_submission(second, participant)
    with db.session() as session:
        kept = session.scalars(select(PlatformAccount).order_by(PlatformAccount.id)).all()
        assert [row.workspace for row in kept] == [home, away]

    act(client, auth, study_id, worker, action="unblock", reason="a mistake")
    run_worker(settings, burst=True)
    assert [group.members for group in by_workspace.values()] == [{}, {}]
    act(client, auth, study_id, worker, action="block", reason="did it again")
    run_worker(settings, burst=True)
    assert [list(group.members) for group in by_workspace.values()] == [[participant]] * 2
    with pytest.raises(PermissionError):
        prolific.start_submission(second, participant)


def test_the_help_says_which_studies_a_block_cannot_reach() -> None:
    shown = CliRunner().invoke(main, ["prolific", "--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "Studies published before it existed" in text
    assert "Prolific lets a published study change only its internal name" in text


def test_a_group_kept_before_workspaces_were_kept_apart_is_its_workspaces(
    database_url: str,
) -> None:
    """Migration 0011: the one row 0010 kept per experimenter is the group of the workspace
    it was made in; a downgrade keeps the first row of each experimenter."""
    db = Database(database_url)
    db.upgrade("0010")
    home, away = "a" * 24, "b" * 24
    with db.engine.begin() as connection:
        connection.execute(
            text("INSERT INTO experimenters (id, name, created_at) VALUES (1, 'ada', :now)"),
            {"now": utcnow()},
        )
        connection.execute(
            ACCOUNTS_0010.insert().values(
                experimenter_id=1,
                provider="prolific",
                settings={"exclusion_group_id": "c" * 24, "workspace_id": home},
                created_at=utcnow(),
                updated_at=utcnow(),
            )
        )
    db.upgrade()
    with db.session() as session:
        (row,) = session.scalars(select(PlatformAccount)).all()
        assert row.workspace == home
        session.add(
            PlatformAccount(
                experimenter_id=1,
                provider="prolific",
                workspace=away,
                settings={"exclusion_group_id": "d" * 24, "workspace_id": away},
            )
        )
    db.downgrade("0010")
    with db.engine.connect() as connection:
        kept = connection.execute(select(ACCOUNTS_0010.c.settings)).scalars().all()
    assert kept == [{"exclusion_group_id": "c" * 24, "workspace_id": home}]
    db.dispose()
