"""Gunicorn settings for crowd: `gunicorn -c deploy/gunicorn.conf.py crowd.wsgi:app`.

PORT and WEB_CONCURRENCY follow the usual platform conventions (Heroku, Render, ...);
flags on the gunicorn command line still override anything set here.
"""

from __future__ import annotations

import os

# Each worker process holds its own SQLAlchemy pool (up to 30 PostgreSQL connections) and
# its own copy of the app, so the default is capped: more processes than this on one
# machine mostly add memory and database connections, not throughput.
MAX_DEFAULT_WORKERS = 12


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise SystemExit(f"{name}={value!r} is not a whole number") from None
    if number < 1:
        raise SystemExit(f"{name} must be at least 1, not {number}")
    return number


def default_workers() -> int:
    """The classic 2 x cores + 1, capped at MAX_DEFAULT_WORKERS."""
    return min(2 * (os.cpu_count() or 1) + 1, MAX_DEFAULT_WORKERS)


# 0.0.0.0: inside a container the published port must be reachable from outside it.
bind = f"0.0.0.0:{_int_env('PORT', 8000)}"
workers = _int_env("WEB_CONCURRENCY", default_workers())
# Threads overlap the waits on the database and Redis inside one process; gthread also
# keeps idle keep-alive connections from pinning a whole worker.
worker_class = "gthread"
threads = 4
timeout = 60
graceful_timeout = 30
keepalive = 5
accesslog = "-"
errorlog = "-"
# No preload_app: create_app opens a database engine and a Redis client, and sockets
# inherited across fork() would be shared between workers.
preload_app = False
# gunicorn >= 25.1 opens a control socket at $HOME/.gunicorn/gunicorn.ctl by default; two
# servers under one user (or containers sharing a home volume) would fight over it, and
# nothing here uses gunicornc. Older gunicorn versions ignore the unknown setting.
control_socket_disable = True
# Restart workers now and then so that a slow leak cannot grow without bound; the jitter
# keeps them from all restarting at the same moment.
max_requests = 5000
max_requests_jitter = 500
