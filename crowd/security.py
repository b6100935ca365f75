"""API keys (stored hashed) and signed worker identities."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

from crowd.exceptions import AuthenticationError

KEY_PREFIX = "crowd"
WORKER_SALT = "crowd.worker"
RECORD_SALT = "crowd.record"
# A worker token stays valid for 30 days; the page asks for a new one after that.
WORKER_TOKEN_MAX_AGE = 30 * 24 * 3600


@dataclass(frozen=True)
class NewApiKey:
    """A freshly generated key: `token` is shown once, only `prefix` and `key_hash` are stored."""

    token: str
    prefix: str
    key_hash: str


def hash_api_key(token: str) -> str:
    # API keys carry 256 bits of randomness, so a plain SHA-256 is enough: slow password
    # hashes exist to protect low-entropy secrets and would only slow every request down.
    return hashlib.sha256(token.encode()).hexdigest()


def generate_api_key() -> NewApiKey:
    prefix = secrets.token_hex(6)
    token = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    return NewApiKey(token=token, prefix=prefix, key_hash=hash_api_key(token))


def split_api_key(token: str) -> str:
    """Return the lookup prefix of a presented key, or raise if it is not one of ours."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or len(parts[1]) != 12:
        raise AuthenticationError("malformed API key: expected crowd_<prefix>_<secret>")
    return parts[1]


def api_key_matches(token: str, key_hash: str) -> bool:
    return hmac.compare_digest(hash_api_key(token), key_hash)


class WorkerSigner:
    """Signs and checks the worker id that every worker request carries."""

    def __init__(self, secret_key: str) -> None:
        self._serializer = URLSafeTimedSerializer(secret_key, salt=WORKER_SALT)
        self._records = URLSafeTimedSerializer(secret_key, salt=RECORD_SALT)

    def sign(self, worker_id: int, platform_session: int | None = None) -> str:
        """A token for the worker; on a crowd platform's page, also for its session there."""
        claims: dict[str, int] = {"w": worker_id}
        if platform_session is not None:
            claims["s"] = platform_session
        return self._serializer.dumps(claims)

    def verify(self, token: str, max_age: int = WORKER_TOKEN_MAX_AGE) -> int:
        return self.claims(token, max_age)[0]

    def claims(self, token: str, max_age: int = WORKER_TOKEN_MAX_AGE) -> tuple[int, int | None]:
        """The worker id and platform session id (or None) a token was signed for."""
        try:
            data = self._serializer.loads(token, max_age=max_age)
        except BadSignature:
            raise AuthenticationError(
                "the worker token is invalid or expired: reload the task page to get a new one"
            ) from None
        worker_id = data.get("w") if isinstance(data, dict) else None
        if not isinstance(worker_id, int):
            raise AuthenticationError("the worker token carries no worker id")
        session_id = data.get("s")
        return worker_id, session_id if isinstance(session_id, int) else None

    def sign_record(self, record: Any) -> str:
        """Sign data our server vouches for (answers a page hands to a crowd platform)."""
        return self._records.dumps(record)

    def load_record(self, token: str) -> Any:
        """Data signed by sign_record; raises if it was changed."""
        try:
            return self._records.loads(token)
        except BadSignature:
            raise AuthenticationError("the record's signature does not match") from None
