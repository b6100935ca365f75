"""`python -m crowd.cli ...`: the `crowd` command where its script is not installed."""

from __future__ import annotations

from crowd.cli import main

main(prog_name="crowd")
