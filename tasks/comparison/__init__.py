"""Best-of-K comparison HIT (being built)."""
