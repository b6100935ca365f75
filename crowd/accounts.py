"""Experimenters, their API keys, and the people who log in to review."""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.exceptions import AuthenticationError, ConfigurationError, NotFound, ValidationError
from crowd.security import api_key_matches, generate_api_key, split_api_key
from crowd.storage import ApiKey, Experimenter, Role, User, utcnow


def get_or_create_experimenter(session: Session, name: str) -> Experimenter:
    """The experimenter called `name`, created if new: only for what creates one on purpose
    (`crowd keys create NAME`); everything else looks them up (find_experimenter)."""
    name = name.strip()
    if not name or len(name) > 200:
        raise ValidationError("an experimenter name is 1 to 200 characters", "name")
    experimenter = session.scalar(select(Experimenter).where(Experimenter.name == name))
    if experimenter is None:
        experimenter = Experimenter(name=name)
        session.add(experimenter)
        session.flush()
    return experimenter


def find_experimenter(session: Session, name: str) -> Experimenter:
    """The experimenter called `name`, or NotFound saying how to create them."""
    name = name.strip()
    found = session.scalar(select(Experimenter).where(Experimenter.name == name)) if name else None
    if found is None:
        shown = name if name and name.isprintable() and " " not in name else repr(name)
        raise NotFound(
            f"no experimenter {name!r}: create them with `crowd keys create {shown}` "
            "(the ones there are: `crowd keys list`)"
        )
    return found


# How many experimenters' names an error lists before it says "...".
NAMES_SHOWN = 5


def acting_experimenter(session: Session, name: str | None) -> Experimenter:
    """The experimenter called `name`; without a name, the only experimenter there is. No
    experimenter, or several and no name, is an error saying what to run: nobody is made
    up (the CLI acts as this experimenter: `crowd --as NAME` or CROWD_EXPERIMENTER)."""
    if name is not None and name.strip():
        return find_experimenter(session, name)
    found = list(
        session.scalars(select(Experimenter).order_by(Experimenter.id).limit(NAMES_SHOWN + 1))
    )
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigurationError(
            "no experimenter yet: create yours with `crowd keys create NAME` (then the CLI "
            "acts as NAME)"
        )
    names = ", ".join(e.name for e in found[:NAMES_SHOWN]) + (
        ", ..." if len(found) > NAMES_SHOWN else ""
    )
    raise ConfigurationError(
        f"several experimenters ({names}): say which one the CLI acts as with "
        "`crowd --as NAME ...` or CROWD_EXPERIMENTER=NAME (all of them: `crowd keys list`)"
    )


def create_api_key(session: Session, name: str) -> str:
    """Create a key for experimenter `name` (created if new); the clear key is returned once."""
    experimenter = get_or_create_experimenter(session, name)
    key = generate_api_key()
    session.add(ApiKey(experimenter_id=experimenter.id, prefix=key.prefix, key_hash=key.key_hash))
    session.flush()
    return key.token


def api_keys(session: Session, experimenter: str | None = None) -> list[ApiKey]:
    """Every API key (of `experimenter`, by name), oldest first; the secrets are not kept."""
    query = select(ApiKey).join(ApiKey.experimenter).order_by(ApiKey.id)
    if experimenter is not None:
        query = query.where(Experimenter.name == experimenter.strip())
    return list(session.scalars(query))


def revoke_api_key(session: Session, key: str) -> ApiKey:
    """Revoke the key whose prefix (what `crowd keys list` shows) or whole token is `key`;
    revoking a revoked key changes nothing."""
    prefix = split_api_key(key) if key.startswith("crowd_") else key.strip()
    found = session.scalar(select(ApiKey).where(ApiKey.prefix == prefix))
    if found is None:
        raise ValidationError(f"no API key {prefix!r}: list them with `crowd keys list`", "key")
    if found.revoked_at is None:
        found.revoked_at = utcnow()
    return found


def authenticate(session: Session, token: str) -> Experimenter:
    """The experimenter owning an API key, or AuthenticationError."""
    prefix = split_api_key(token)
    key = session.scalar(select(ApiKey).where(ApiKey.prefix == prefix))
    if key is None or key.revoked_at is not None or not api_key_matches(token, key.key_hash):
        raise AuthenticationError("unknown or revoked API key: create one with `crowd keys create`")
    return key.experimenter


MIN_PASSWORD = 10


def create_user(
    session: Session, experimenter_name: str, name: str, role: str, password: str
) -> User:
    """A login to the reviewer UI for one experimenter's studies; the password is hashed."""
    # werkzeug where passwords are hashed only: `crowd keys list` need not load it.
    from werkzeug.security import generate_password_hash

    name = name.strip()
    if not name or len(name) > 100 or not name.replace("-", "").replace("_", "").isalnum():
        raise ValidationError("a user name is 1 to 100 letters, digits, - or _", "name")
    if role not in {r.value for r in Role}:
        raise ValidationError(f"role must be one of {', '.join(r.value for r in Role)}", "role")
    if not isinstance(password, str) or len(password) < MIN_PASSWORD:
        raise ValidationError(f"a password has at least {MIN_PASSWORD} characters", "password")
    if session.scalar(select(User).where(User.name == name)) is not None:
        raise ValidationError(f"there is already a user {name!r}", "name")
    experimenter = get_or_create_experimenter(session, experimenter_name)
    user = User(
        experimenter_id=experimenter.id,
        name=name,
        role=Role(role),
        password_hash=generate_password_hash(password),
    )
    session.add(user)
    session.flush()
    return user


def check_login(session: Session, name: str, password: str) -> User:
    """The user with this name and password, or AuthenticationError (the same for both)."""
    from werkzeug.security import check_password_hash

    user = session.scalar(select(User).where(User.name == name.strip()))
    # Hash even for unknown names, so response time does not tell which names exist.
    stored = user.password_hash if user is not None else _dummy_hash()
    if not check_password_hash(stored, password) or user is None:
        raise AuthenticationError("wrong user name or password")
    return user


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    from werkzeug.security import generate_password_hash

    return generate_password_hash("not-a-real-password")
