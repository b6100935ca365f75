"""crowd: a crowdsourcing backend for NLP evaluation and human-feedback data."""

__version__ = "0.1.0"
