"""The Prolific stand-in's participant operations: workspaces, projects, messages, participant
groups.

Shapes from https://docs.prolific.com/api-reference: SendMessage (recipient_id, body,
study_id) and SendBulkMessage (ids, body, study_id), both required, answered 204 (documented
for the bulk message; assumed for the single one, whose page says only "The message has been
sent"); CreateParticipantGroup (name, and a workspace_id or an organisation_id: "Either a
workspace or organisation ID must be specified"), ParticipantGroup, and memberships
{"results": [{"participant_id", "datetime_created"}]} as the official CLI reads them (adding
a member twice or removing a non-member is ignored, as documented).

Workspaces and projects: GET /workspaces/ ({"results": [Workspace]}) and GET /projects/{id}/
(Project, whose ``workspace`` is the workspace id); a study is in its ``project``'s
workspace.

Assumed, not documented: a message goes only to a participant who took part in the study it
is about (documented for broadcasts: "Every recipient must have a submission for the study"),
and a refused one is a 400 naming the field, like Prolific's other validation errors; a study
created without a project goes to the researcher's first workspace; a study's group filters
may name only groups of the study's own workspace (a group belongs to one), and an
unknown project is refused as a 400 naming the field.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.crowd.platforms.providers.prolific_state import (
    OBJECT_ID,
    ApiError,
    Study,
    Submission,
    _invalid,
    _now,
)

GROUP_FILTERS = ("participant_group_allowlist", "participant_group_blocklist")
MESSAGE_FIELDS = {"recipient_id", "body", "study_id"}
BULK_MESSAGE_FIELDS = {"ids", "body", "study_id"}
GROUP_FIELDS = {"name", "workspace_id", "organisation_id", "description", "participant_ids"}
ROUTES = (
    ("GET", r"/api/v1/workspaces/", "workspaces"),
    ("GET", r"/api/v1/projects/(\w+)/", "get_project"),
    ("POST", r"/api/v1/messages/", "send_message"),
    ("POST", r"/api/v1/messages/bulk/", "bulk_message"),
    ("POST", r"/api/v1/participant-groups/", "create_group"),
    ("POST", r"/api/v1/participant-groups/(\w+)/participants/", "add_to_group"),
    ("DELETE", r"/api/v1/participant-groups/(\w+)/participants/", "remove_from_group"),
)


@dataclass
class Message:
    recipient_id: str
    study_id: str
    body: str
    bulk: bool


@dataclass
class Project:
    id: str
    title: str
    workspace_id: str


@dataclass
class ParticipantGroup:
    id: str
    name: str
    workspace_id: str
    description: str | None
    members: dict[str, str] = field(default_factory=dict)  # participant id -> when added


def _fields(body: Any, allowed: set[str], required: set[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "The body must be a JSON object.")
    for name in sorted(set(body) - allowed):
        raise _invalid(name, "Unknown field.")
    for name in sorted(required - set(body)):
        raise _invalid(name, "This field is required.")
    return body


def _text(body: dict[str, Any], name: str) -> str:
    value = body[name]
    if not isinstance(value, str):
        raise _invalid(name, "Not a valid string.")
    if not value.strip():
        raise _invalid(name, "This field may not be blank.")
    return value


def _ids(body: dict[str, Any], name: str, allow_empty: bool = False) -> list[str]:
    values = body.get(name, [] if allow_empty else None)
    if not isinstance(values, list) or (not values and not allow_empty):
        raise _invalid(name, "Expected a non-empty list of participant ids.")
    for value in values:
        if not isinstance(value, str) or not OBJECT_ID.match(value):
            raise _invalid(name, f"{value!r} is not a valid participant id.")
    return list(values)


class ParticipantOperations:
    """Mixed into ProlificServer, whose state (studies, submissions, lock) it uses."""

    lock: threading.RLock
    user_id: str
    workspace_id: str
    studies: dict[str, Study]
    submissions: dict[str, Submission]

    if TYPE_CHECKING:

        def _new_id(self) -> str: ...

        def _study(self, study_id: str) -> Study: ...

    def _init_participants(self) -> None:
        self.messages: list[Message] = []
        self.groups: dict[str, ParticipantGroup] = {}
        # Workspace id -> title; the first is where studies without a project go.
        self.workspaces: dict[str, str] = {self.workspace_id: "My workspace"}
        self.projects: dict[str, Project] = {}

    # -- test hooks ------------------------------------------------------------------------

    def add_workspace(self, title: str = "Another workspace") -> str:
        """Another workspace the researcher belongs to; its id."""
        with self.lock:
            workspace_id = self._new_id()
            self.workspaces[workspace_id] = title
            return workspace_id

    def add_project(self, workspace_id: str, title: str = "A project") -> str:
        """A project in a workspace; its id."""
        with self.lock:
            if workspace_id not in self.workspaces:
                raise ValueError(f"no workspace {workspace_id}")
            project = Project(self._new_id(), title, workspace_id)
            self.projects[project.id] = project
            return project.id

    def study_workspace(self, fields: dict[str, Any]) -> str:
        """The workspace of a study with these fields: its project's, else the first one."""
        project = self.projects.get(str(fields.get("project") or ""))
        return project.workspace_id if project else self.workspace_id

    def eligible(self, study: Study, participant_id: str) -> bool:
        """Whether the study's participant group filters let the participant see it."""
        for item in study.fields.get("filters") or []:
            if item.get("filter_id") not in GROUP_FILTERS:
                continue
            inside = any(
                participant_id in self.groups[group].members
                for group in item.get("selected_values", [])
                if group in self.groups
            )
            if inside == (item["filter_id"] == "participant_group_blocklist"):
                return False
        return True

    def check_study_workspace(self, fields: dict[str, Any]) -> None:
        """A create_study's project must exist, and its group filters must name groups of
        the study's workspace."""
        project = fields.get("project")
        if project is not None and project not in self.projects:
            raise _invalid("project", f"Project {project} not found.")
        workspace = self.study_workspace(fields)
        for index, item in enumerate(fields.get("filters") or []):
            if item.get("filter_id") not in GROUP_FILTERS:
                continue
            values = item.get("selected_values")
            if not isinstance(values, list) or not values:
                raise _invalid(f"filters[{index}]", "Name at least one participant group.")
            unknown = [value for value in values if value not in self.groups]
            if unknown:
                raise _invalid(f"filters[{index}]", f"Unknown participant groups: {unknown}.")
            elsewhere = [v for v in values if self.groups[v].workspace_id != workspace]
            if elsewhere:
                raise _invalid(
                    f"filters[{index}]",
                    f"Participant groups {elsewhere} are not in the study's workspace.",
                )

    # -- operations ------------------------------------------------------------------------

    def op_workspaces(self, query: Any, body: Any) -> tuple[int, Any]:
        return 200, {
            "results": [
                {"id": workspace, "title": title, "description": ""}
                for workspace, title in self.workspaces.items()
            ]
        }

    def op_get_project(self, project_id: str, query: Any, body: Any) -> tuple[int, Any]:
        project = self.projects.get(project_id)
        if project is None:
            raise ApiError(404, f"Project {project_id} not found.", "Not found")
        return 200, {
            "id": project.id,
            "title": project.title,
            "type": "PRIVATE",
            "description": "",
            "owner": self.user_id,
            "public_details": None,
            "users": [],
            "workspace": project.workspace_id,
            "naivety_distribution_rate": None,
        }

    def _recipient(self, study: Study, participant_id: str, name: str) -> None:
        if not any(
            s.study_id == study.id and s.participant_id == participant_id
            for s in self.submissions.values()
        ):
            raise _invalid(name, f"Participant {participant_id} has not taken part in the study.")

    def op_send_message(self, query: Any, body: Any) -> tuple[int, Any]:
        body = _fields(body, MESSAGE_FIELDS, MESSAGE_FIELDS)
        text, recipient = _text(body, "body"), _text(body, "recipient_id")
        study = self._study(_text(body, "study_id"))
        self._recipient(study, recipient, "recipient_id")
        self.messages.append(Message(recipient, study.id, text, bulk=False))
        return 204, None

    def op_bulk_message(self, query: Any, body: Any) -> tuple[int, Any]:
        body = _fields(body, BULK_MESSAGE_FIELDS, BULK_MESSAGE_FIELDS)
        text, recipients = _text(body, "body"), _ids(body, "ids")
        study = self._study(_text(body, "study_id"))
        for recipient in recipients:
            self._recipient(study, recipient, "ids")
        self.messages.extend(Message(r, study.id, text, bulk=True) for r in recipients)
        return 204, None

    def op_create_group(self, query: Any, body: Any) -> tuple[int, Any]:
        body = _fields(body, GROUP_FIELDS, {"name"})
        name = _text(body, "name")
        if not body.get("workspace_id") and not body.get("organisation_id"):
            raise _invalid(
                "workspace_id", "Either a workspace or organisation ID must be specified."
            )
        if body.get("organisation_id"):
            raise _invalid("organisation_id", "The stand-in has no organisations.")
        if body["workspace_id"] not in self.workspaces:
            raise _invalid("workspace_id", f"Workspace {body['workspace_id']} not found.")
        description = _text(body, "description") if "description" in body else None
        group = ParticipantGroup(self._new_id(), name, body["workspace_id"], description)
        for participant in _ids(body, "participant_ids", allow_empty=True):
            group.members.setdefault(participant, _now())
        self.groups[group.id] = group
        return 201, self._group_view(group)

    def _group(self, group_id: str) -> ParticipantGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise ApiError(404, f"Participant group {group_id} not found.", "Not found")
        return group

    def op_add_to_group(self, group_id: str, query: Any, body: Any) -> tuple[int, Any]:
        group = self._group(group_id)
        body = _fields(body, {"participant_ids"}, {"participant_ids"})
        for participant in _ids(body, "participant_ids"):
            group.members.setdefault(participant, _now())
        return 200, self._members_view(group)

    def op_remove_from_group(self, group_id: str, query: Any, body: Any) -> tuple[int, Any]:
        group = self._group(group_id)
        body = _fields(body, {"participant_ids"}, {"participant_ids"})
        for participant in _ids(body, "participant_ids"):
            group.members.pop(participant, None)
        return 200, self._members_view(group)

    def _group_view(self, group: ParticipantGroup) -> dict[str, Any]:
        return {
            "id": group.id,
            "name": group.name,
            "workspace_id": group.workspace_id,
            "organisation_id": None,
            "project_id": None,
            "description": group.description,
            "participant_count": len(group.members),
            "feeder_studies": [],
            "is_deleted": False,
        }

    def _members_view(self, group: ParticipantGroup) -> dict[str, Any]:
        return {
            "results": [
                {"participant_id": participant, "datetime_created": added}
                for participant, added in group.members.items()
            ]
        }
