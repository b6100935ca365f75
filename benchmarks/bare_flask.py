"""The baseline for benchmarks/submit_rps.py: one JSON POST endpoint and nothing else.

Served by the same gunicorn config as crowd, it shows what the server, Flask and the load
generator cost on their own, so the gap to crowd's numbers is crowd's own work.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, jsonify, request

app = Flask(__name__)


@app.post("/submit")
def submit() -> Any:
    # Parse the body like crowd's json_body() does, so both sides pay for JSON both ways.
    body = request.get_json(silent=True) or {}
    return jsonify(ok=True, step=body.get("step"), choice=body.get("choice"))
