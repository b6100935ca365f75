"""Experimenters and API keys."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.exceptions import AuthenticationError, ValidationError
from crowd.security import api_key_matches, generate_api_key, split_api_key
from crowd.storage import ApiKey, Experimenter


def get_or_create_experimenter(session: Session, name: str) -> Experimenter:
    name = name.strip()
    if not name or len(name) > 200:
        raise ValidationError("an experimenter name is 1 to 200 characters", "name")
    experimenter = session.scalar(select(Experimenter).where(Experimenter.name == name))
    if experimenter is None:
        experimenter = Experimenter(name=name)
        session.add(experimenter)
        session.flush()
    return experimenter


def create_api_key(session: Session, name: str) -> str:
    """Create a key for experimenter `name` (created if new); the clear key is returned once."""
    experimenter = get_or_create_experimenter(session, name)
    key = generate_api_key()
    session.add(ApiKey(experimenter_id=experimenter.id, prefix=key.prefix, key_hash=key.key_hash))
    session.flush()
    return key.token


def authenticate(session: Session, token: str) -> Experimenter:
    """The experimenter owning an API key, or AuthenticationError."""
    prefix = split_api_key(token)
    key = session.scalar(select(ApiKey).where(ApiKey.prefix == prefix))
    if key is None or key.revoked_at is not None or not api_key_matches(token, key.key_hash):
        raise AuthenticationError("unknown or revoked API key: create one with `crowd keys create`")
    return key.experimenter
