"""The Prolific client's calls about participants: messages, participant groups, and the
workspaces and projects that groups and studies belong to.

Messages (https://docs.prolific.com/api-reference/messages): ``POST /messages/`` sends one
participant a message about a study (``recipient_id``, ``body``, ``study_id``); ``POST
/messages/bulk/`` sends several the same one (``ids``, ``body``, ``study_id``) and answers
204. Neither takes a request token, so neither is retried after a lost answer; a message
whose answer was lost and that is sent again by a later retry arrives twice, which we prefer
to a message that never arrives.

Participant groups (https://docs.prolific.com/api-reference/participant-groups): a group
belongs to a workspace; adding members that are in it already, or removing ones that are
not, is ignored, so those calls are retried. A study whose filters hold
``{"filter_id": "participant_group_blocklist", "selected_values": [group id]}`` is not shown
to the group's members, including those added after it was published.

Workspaces and projects (https://docs.prolific.com/api-reference/workspaces, .../projects):
``GET /workspaces/`` lists the researcher's workspaces; ``GET /projects/{id}/`` gives a
project's ``workspace``, where the studies of the project are.

ParticipantCalls is a part of ProlificClient (prolific_api.py), which sends the requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from crowd.exceptions import ProlificError
from crowd.platforms.providers.prolific_checks import (
    MAX_MESSAGE,
    MAX_MESSAGE_RECIPIENTS,
    MAX_NAME,
    MAX_PLACES,
    check_object_id,
    check_participants,
    check_text,
)

# Our cap on a group's description (Prolific documents none).
MAX_GROUP_DESCRIPTION = 1000


class ParticipantCalls:
    """Messages and participant groups; mixed into ProlificClient."""

    if TYPE_CHECKING:

        def _call(
            self,
            method: str,
            path: str,
            *,
            retry: bool,
            json: Mapping[str, Any] | None = None,
            params: Mapping[str, Any] | None = None,
        ) -> Any: ...

    # -- workspaces and projects -----------------------------------------------------------

    def workspaces(self) -> list[dict[str, Any]]:
        """The workspaces the token's researcher belongs to (GET /workspaces/)."""
        body = self._call("GET", "/workspaces/", retry=True)
        return list(body.get("results", [])) if isinstance(body, dict) else []

    def get_project(self, project_id: str) -> dict[str, Any]:
        """A project (GET /projects/{id}/): its title, and the `workspace` it is in."""
        path = f"/projects/{check_object_id(project_id, 'project')}/"
        body = self._call("GET", path, retry=True)
        if not isinstance(body, dict):
            raise ProlificError(
                f"Prolific answered {str(body)[:200]!r} where a project was expected: report "
                "this to Prolific support"
            )
        return body

    # -- messages --------------------------------------------------------------------------

    def send_message(self, participant_ids: Sequence[str], body: str, study_id: str) -> None:
        """Send `body` to the participants about a study: one message, or a bulk message to
        several (at most MAX_MESSAGE_RECIPIENTS). Not retried after a lost answer."""
        ids = check_participants(list(participant_ids), "participant_ids", MAX_MESSAGE_RECIPIENTS)
        text = check_text(body, "body", MAX_MESSAGE)
        study = check_object_id(study_id, "study_id")
        if len(ids) == 1:
            message = {"recipient_id": ids[0], "body": text, "study_id": study}
            self._call("POST", "/messages/", json=message, retry=False)
        else:
            bulk = {"ids": ids, "body": text, "study_id": study}
            self._call("POST", "/messages/bulk/", json=bulk, retry=False)

    # -- participant groups ----------------------------------------------------------------

    def create_group(
        self,
        name: str,
        workspace_id: str,
        description: str = "",
        participant_ids: Sequence[str] = (),
    ) -> dict[str, Any]:
        """A new participant group in a workspace, with its first members; its `id` is what
        filters name. Not retried after a lost answer, which would leave a second group."""
        body: dict[str, Any] = {
            "name": check_text(name, "name", MAX_NAME),
            "workspace_id": check_object_id(workspace_id, "workspace_id"),
        }
        if description:
            body["description"] = check_text(description, "description", MAX_GROUP_DESCRIPTION)
        if participant_ids:
            body["participant_ids"] = check_participants(
                list(participant_ids), "participant_ids", MAX_PLACES
            )
        return self._call("POST", "/participant-groups/", json=body, retry=False)

    def _members_path(self, group_id: str) -> str:
        return f"/participant-groups/{check_object_id(group_id, 'group_id')}/participants/"

    def add_to_group(self, group_id: str, participant_ids: Sequence[str]) -> list[str]:
        """Add participants to a group (members already in it are ignored); its members."""
        ids = check_participants(list(participant_ids), "participant_ids", MAX_PLACES)
        body = self._call(
            "POST", self._members_path(group_id), json={"participant_ids": ids}, retry=True
        )
        return _member_ids(body)

    def remove_from_group(self, group_id: str, participant_ids: Sequence[str]) -> list[str]:
        """Take participants out of a group (non-members are ignored); its members."""
        ids = check_participants(list(participant_ids), "participant_ids", MAX_PLACES)
        body = self._call(
            "DELETE", self._members_path(group_id), json={"participant_ids": ids}, retry=True
        )
        return _member_ids(body)


def _member_ids(body: Any) -> list[str]:
    """The ids in a membership answer: {"results": [{"participant_id", "datetime_created"}]}."""
    if not isinstance(body, dict) or not isinstance(body.get("results"), list):
        raise ProlificError(
            f"Prolific answered {str(body)[:200]!r} where a list of group members was expected: "
            "report this to Prolific support"
        )
    return [str(row.get("participant_id")) for row in body["results"] if isinstance(row, dict)]
