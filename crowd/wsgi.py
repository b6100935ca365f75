"""The WSGI entry point for production servers.

    gunicorn -c deploy/gunicorn.conf.py crowd.wsgi:app

Run `crowd init` once before starting (and after each upgrade): it applies the database
migrations. The app never migrates on import, because several gunicorn workers starting
at once would race to change the schema.

Settings come from the CROWD_* environment variables (see crowd.settings). Set
CROWD_SECRET_KEY explicitly: every worker process must sign worker tokens with the same key.
"""

from __future__ import annotations

from flask import Flask

from crowd.app import create_app

app: Flask = create_app()
