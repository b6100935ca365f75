"""Settings from the environment, the stored secret, API keys."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from crowd.exceptions import AuthenticationError, ConfigurationError
from crowd.security import WorkerSigner, api_key_matches, generate_api_key, split_api_key
from crowd.settings import Settings


def test_defaults_are_embedded(tmp_path: Path) -> None:
    settings = Settings.from_env({"CROWD_DATA_DIR": str(tmp_path)})
    assert settings.database_url == f"sqlite:///{tmp_path / 'crowd.db'}"
    assert settings.redis_url is None
    secret_file = tmp_path / "secret_key"
    assert secret_file.read_text().strip() == settings.secret_key
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    # The secret is stable across starts.
    assert Settings.from_env({"CROWD_DATA_DIR": str(tmp_path)}).secret_key == settings.secret_key


def test_explicit_values_win(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "CROWD_DATA_DIR": str(tmp_path),
            "CROWD_DATABASE_URL": "postgresql://u@h:5432/d",
            "CROWD_REDIS_URL": "redis://h:6379/1",
            "CROWD_SECRET_KEY": "s" * 40,
        }
    )
    assert settings.database_url == "postgresql+psycopg://u@h:5432/d"
    assert settings.redis_url == "redis://h:6379/1"
    assert settings.secret_key == "s" * 40
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.parametrize(
    "env",
    [
        {"CROWD_DATABASE_URL": "mysql://x"},
        {"CROWD_REDIS_URL": "http://x"},
        {"CROWD_SWEEP_INTERVAL": "soon"},
        {"CROWD_SWEEP_INTERVAL": "0"},
        {"CROWD_QC_REFRESH_INTERVAL": "-1"},
        {"CROWD_QC_REFRESH_INTERVAL": "nan"},
    ],
)
def test_bad_settings_are_refused_with_a_hint(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError):
        Settings.from_env({"CROWD_DATA_DIR": str(tmp_path), "CROWD_SECRET_KEY": "k" * 40, **env})


def test_the_qc_refresh_interval_may_be_zero_and_defaults_to_two_seconds(tmp_path: Path) -> None:
    env = {"CROWD_DATA_DIR": str(tmp_path), "CROWD_SECRET_KEY": "k" * 40}
    assert Settings.from_env(env).qc_refresh_interval == 2.0
    assert Settings.from_env({**env, "CROWD_QC_REFRESH_INTERVAL": "0"}).qc_refresh_interval == 0


def test_api_keys_are_stored_as_hashes() -> None:
    key = generate_api_key()
    assert key.token not in key.key_hash and len(key.key_hash) == 64
    assert split_api_key(key.token) == key.prefix
    assert api_key_matches(key.token, key.key_hash)
    assert not api_key_matches(key.token + "x", key.key_hash)
    with pytest.raises(AuthenticationError):
        split_api_key("not-a-key")


def test_worker_tokens_are_signed() -> None:
    signer = WorkerSigner("a" * 40)
    token = signer.sign(42)
    assert signer.verify(token) == 42
    with pytest.raises(AuthenticationError):
        WorkerSigner("b" * 40).verify(token)
    with pytest.raises(AuthenticationError):
        signer.verify(token, max_age=-1)
