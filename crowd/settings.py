"""One typed, frozen settings object built from CROWD_* environment variables."""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from crowd.exceptions import ConfigurationError

SECRET_FILE = "secret_key"


@dataclass(frozen=True)
class Settings:
    """Everything the platform reads from its environment, checked once at start."""

    data_dir: Path
    database_url: str
    secret_key: str
    # None means: start an embedded Redis server in the data dir (see crowd.queue.embedded).
    redis_url: str | None = None
    # Public base URL of the web server, used in links printed by the CLI.
    base_url: str = "http://127.0.0.1:5000"
    # Seconds between two sweeps of the outbox by `crowd worker`.
    sweep_interval: float = 10.0
    # Seconds an open assignment may sit untouched before the sweep abandons it.
    assignment_timeout: float = 1800.0
    # Seconds between two batches of a study's answer events in one `crowd worker` (each
    # batch refreshes QC for every worker with unread answers, at a cost the study's size
    # sets); the answers stored meanwhile wait for the next. 0: a batch as soon as one waits.
    qc_refresh_interval: float = 2.0
    testing: bool = False
    # MTurk: another endpoint than AWS's (tests, other regions); AWS credentials come from
    # boto3's usual places (AWS_ACCESS_KEY_ID, ~/.aws, an instance role).
    mturk_endpoint_url: str | None = None
    # Extra origins our MTurk page may post finished work to (besides MTurk's own two).
    mturk_submit_origins: tuple[str, ...] = ()
    prolific_api_url: str = "https://api.prolific.com"
    prolific_token: str | None = None
    # Seconds between two syncs of published studies with their platforms by `crowd worker`.
    platform_sync_interval: float = 300.0
    # Whether webhooks and callbacks may go to loopback or private addresses (development,
    # tests, receivers inside one's own network); off, so experimenters cannot reach ours.
    delivery_allow_private: bool = False
    # The experimenter the CLI acts as (CROWD_EXPERIMENTER; `crowd --as NAME` wins); None:
    # the only one in the database. The web app knows its experimenter from the request.
    experimenter: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        data_dir = Path(env.get("CROWD_DATA_DIR", ".crowd")).expanduser().resolve()
        database_url = env.get("CROWD_DATABASE_URL") or f"sqlite:///{data_dir / 'crowd.db'}"
        if not database_url.startswith(("sqlite:", "postgresql")):
            raise ConfigurationError(
                f"CROWD_DATABASE_URL={database_url!r} is not supported: use sqlite:///PATH "
                "or postgresql+psycopg://USER@HOST:PORT/DB"
            )
        if database_url.startswith("postgresql://"):
            # SQLAlchemy's default PostgreSQL driver is psycopg2; we ship psycopg 3.
            database_url = "postgresql+psycopg://" + database_url[len("postgresql://") :]
        redis_url = env.get("CROWD_REDIS_URL") or None
        if redis_url is not None and not redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(
                f"CROWD_REDIS_URL={redis_url!r} is not a Redis URL: use redis://HOST:PORT/DB, "
                "or leave it unset for the embedded Redis"
            )
        sweep_interval = _seconds(env, "CROWD_SWEEP_INTERVAL", 10)
        assignment_timeout = _seconds(env, "CROWD_ASSIGNMENT_TIMEOUT", 1800)
        qc_refresh_interval = _seconds(env, "CROWD_QC_REFRESH_INTERVAL", 2, zero=True)
        mturk_endpoint = env.get("CROWD_MTURK_ENDPOINT_URL") or None
        origins = tuple(
            _url(origin.strip(), "CROWD_MTURK_SUBMIT_ORIGINS").rstrip("/")
            for origin in env.get("CROWD_MTURK_SUBMIT_ORIGINS", "").split(",")
            if origin.strip()
        )
        return cls(
            data_dir=data_dir,
            database_url=database_url,
            secret_key=env.get("CROWD_SECRET_KEY") or load_or_create_secret(data_dir),
            redis_url=redis_url,
            base_url=env.get("CROWD_BASE_URL", "http://127.0.0.1:5000").rstrip("/"),
            sweep_interval=sweep_interval,
            assignment_timeout=assignment_timeout,
            qc_refresh_interval=qc_refresh_interval,
            mturk_endpoint_url=_url(mturk_endpoint, "CROWD_MTURK_ENDPOINT_URL")
            if mturk_endpoint
            else None,
            mturk_submit_origins=origins,
            prolific_api_url=_url(
                env.get("CROWD_PROLIFIC_API_URL") or "https://api.prolific.com",
                "CROWD_PROLIFIC_API_URL",
            ).rstrip("/"),
            prolific_token=env.get("CROWD_PROLIFIC_TOKEN") or None,
            platform_sync_interval=_seconds(env, "CROWD_PLATFORM_SYNC_INTERVAL", 300),
            delivery_allow_private=env.get("CROWD_DELIVERY_ALLOW_PRIVATE", "").lower()
            in ("1", "true", "yes"),
            experimenter=env.get("CROWD_EXPERIMENTER", "").strip() or None,
        )

    def with_changes(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def reports_dir(self) -> Path:
        return self.data_dir / "reports"

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


def _seconds(env: Mapping[str, str], name: str, default: float, zero: bool = False) -> float:
    try:
        value = float(env.get(name, default))
    except ValueError:
        raise ConfigurationError(f"{name} must be a number of seconds") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        floor = "0 seconds or more" if zero else "more than 0 seconds"
        raise ConfigurationError(f"{name} must be a finite number of seconds, {floor}")
    return value


def _url(value: str, name: str) -> str:
    if not value.startswith(("https://", "http://")) or len(value) > 500:
        raise ConfigurationError(f"{name}={value!r} is not a URL: use https://HOST[:PORT]")
    return value


def load_or_create_secret(data_dir: Path) -> str:
    """Read the signing secret from the data dir, creating it (mode 0600) on first use."""
    path = data_dir / SECRET_FILE
    if path.exists():
        secret = path.read_text().strip()
        if len(secret) < 32:
            raise ConfigurationError(f"{path} holds a secret shorter than 32 characters: delete it")
        return secret
    data_dir.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(48)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    return secret
