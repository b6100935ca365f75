"""Likert rating HIT (being built)."""
