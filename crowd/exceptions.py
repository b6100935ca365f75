"""Every error the platform raises on purpose; messages say how to fix the problem."""

from __future__ import annotations


class CrowdError(Exception):
    """Base class; `status` is the HTTP status the web layer answers with."""

    status = 400


class ConfigurationError(CrowdError):
    status = 500


class RegistryError(CrowdError):
    """A plugin registered twice: the code is at fault, not the request."""

    status = 500


class UnknownName(RegistryError):
    """A name no plugin is registered under (a HIT type, a provider): the name is at fault."""

    status = 422


class ValidationError(CrowdError):
    """Input that does not fit the schema; `where` points at the offending field or line."""

    status = 422

    def __init__(self, message: str, where: str | None = None) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.message = message
        self.where = where


class InvalidItem(ValidationError):
    pass


class InvalidConfig(ValidationError):
    pass


class InvalidAction(ValidationError):
    status = 409


class AuthenticationError(CrowdError):
    status = 401


class PermissionDenied(CrowdError):
    status = 403


class NotFound(CrowdError):
    status = 404


class InvalidTransition(CrowdError):
    status = 409


class AlreadyExists(CrowdError):
    """A name, unique_id or idempotency key that is taken by something else."""

    status = 409


class StudyNotOpen(CrowdError):
    status = 409


class NoWorkLeft(CrowdError):
    """The worker has seen every item they may get in this study."""

    status = 200


class SessionComplete(NoWorkLeft):
    """The worker has done every item of their platform session (an MTurk HIT)."""


class PaymentUnknown(CrowdError):
    """A call that moves money failed, and so did asking the platform whether it paid: the
    call is retried, and the retry asks the platform's records before paying."""

    # Bad Gateway: the platform upstream of us failed, not the request made to us.
    status = 502


class ProlificError(CrowdError):
    """Prolific refused or failed a call: `http_status` is its answer (None: no answer came back),
    `detail` its error detail (a string, a list, or {field: [messages]})."""

    # Bad Gateway: the platform upstream of us failed, not the request made to us.
    status = 502

    def __init__(self, message: str, http_status: int | None = None, detail: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.detail = detail
