"""The deploy files agree with each other and with the README (no Docker engine needed).

They are checked by parsing: the compose file as YAML, the Dockerfile's CMD, the gunicorn
config by running it, and crowd/wsgi.py as text (importing it would build an app and
create a data dir).
"""

from __future__ import annotations

import json
import re
import runpy
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
GUNICORN_CONF = DEPLOY / "gunicorn.conf.py"
README = ROOT / "README.md"

WEB_COMMAND = "gunicorn -c deploy/gunicorn.conf.py crowd.wsgi:app"
WORKER_COMMAND = "crowd worker --queue crowd-events --queue crowd-reports --queue crowd-deliveries"
MODELS_WORKER_COMMAND = "crowd worker --queue crowd-models"
MIGRATE_COMMAND = "crowd init"
SERVICES = {"postgres", "redis", "migrate", "web", "worker", "models-worker"}


def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict), "docker-compose.yml must be a mapping"
    return data


def _services() -> dict[str, Any]:
    services = _compose().get("services")
    assert isinstance(services, dict), "docker-compose.yml has no services mapping"
    return services


def _command(service: dict[str, Any]) -> str:
    """A compose command as one string, whether written as a list or as a string."""
    command = service.get("command")
    if isinstance(command, list):
        return shlex.join(str(part) for part in command)
    assert isinstance(command, str), f"no command in {service}"
    return " ".join(shlex.split(command))


def _production_code(readme: str) -> str:
    """The text of the code blocks in the README's '## Production' section."""
    match = re.search(r"^## Production[^\n]*\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    assert match, "README.md has no '## Production' section"
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", match.group(1), re.S | re.M)
    assert blocks, "the README's '## Production' section has no code block"
    return "\n".join(blocks)


def _dockerfile_cmd() -> str:
    # Join continuation lines first so a CMD split over several lines is still one line.
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    cmds = [line[4:].strip() for line in lines if line.startswith("CMD ")]
    assert len(cmds) == 1, f"expected exactly one CMD in the Dockerfile, found {cmds}"
    value = cmds[0]
    if value.startswith("["):
        parts = json.loads(value)
        assert all(isinstance(part, str) for part in parts)
        return shlex.join(parts)
    return " ".join(shlex.split(value))


def test_compose_has_the_services() -> None:
    services = _services()
    assert set(services) >= SERVICES
    assert services["postgres"]["image"].startswith("postgres:16")
    assert "healthcheck" in services["postgres"]
    assert services["redis"]["image"].startswith("redis:7")


def test_compose_commands() -> None:
    services = _services()
    assert _command(services["web"]) == WEB_COMMAND
    assert _command(services["worker"]) == WORKER_COMMAND
    assert _command(services["migrate"]) == MIGRATE_COMMAND
    assert services["worker"]["deploy"]["replicas"] == 2
    # Every queue has workers: training and LLM evaluation on their own.
    assert _command(services["models-worker"]) == MODELS_WORKER_COMMAND
    from crowd.queue import ALL_QUEUES

    listened = " ".join(_command(services[n]) for n in ("worker", "models-worker")).split()
    assert set(ALL_QUEUES) <= set(listened)


def test_web_and_worker_wait_for_migrations() -> None:
    services = _services()
    for name in ("web", "worker", "models-worker"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


@pytest.mark.parametrize("name", ["migrate", "web", "worker", "models-worker"])
def test_compose_environment(name: str) -> None:
    env = _services()[name]["environment"]
    assert isinstance(env, dict), "write environment as a mapping"
    assert env["CROWD_DATABASE_URL"] == "postgresql+psycopg://crowd:crowd@postgres:5432/crowd"
    assert env["CROWD_REDIS_URL"] == "redis://redis:6379/0"
    # Compose refuses to start without the key rather than each worker inventing its own.
    assert env["CROWD_SECRET_KEY"] == "${CROWD_SECRET_KEY:?set it}"


def test_compose_commands_are_the_documented_ones() -> None:
    assert README.exists(), "README.md is missing: it documents the production commands"
    code = _production_code(README.read_text())
    services = _services()
    for name in ("migrate", "web", "worker", "models-worker"):
        command = _command(services[name])
        assert command in code, f"the {name} command {command!r} is not in README's Production"


def test_dockerfile() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert _dockerfile_cmd() == WEB_COMMAND == _command(_services()["web"])
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0"), "the image must not run as root"
    assert re.search(r"pip install\b.*\s\"?\.(\[ml\])?\"?(\s|$)", text), (
        "the Dockerfile must install the package (with its ml extra)"
    )
    # torch pinned, from a CPU index by default (PyPI's build brings GBs of CUDA).
    assert re.search(r"pip install torch==2\.13\.0 --index-url", text)


def _gunicorn(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    monkeypatch.delenv("PORT", raising=False)
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return runpy.run_path(str(GUNICORN_CONF))


def test_gunicorn_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = _gunicorn(monkeypatch)
    assert conf["bind"] == "0.0.0.0:8000"
    assert conf["workers"] == conf["default_workers"]()
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert conf["default_workers"]() == 5
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    assert conf["default_workers"]() == conf["MAX_DEFAULT_WORKERS"]
    assert conf["threads"] == 4
    assert conf["timeout"] == 60
    assert conf["accesslog"] == "-"


def test_gunicorn_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = _gunicorn(monkeypatch, PORT="9123", WEB_CONCURRENCY="3")
    assert conf["bind"] == "0.0.0.0:9123"
    assert conf["workers"] == 3


def test_gunicorn_refuses_a_bad_port(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit, match="PORT"):
        _gunicorn(monkeypatch, PORT="eighty")


def test_wsgi_module_builds_the_app() -> None:
    text = (ROOT / "crowd" / "wsgi.py").read_text()
    assert re.search(r"^app\b[^=\n]*=\s*create_app\(\)", text, re.M)
    assert "crowd init" in text, "the docstring must say to run `crowd init` first"
