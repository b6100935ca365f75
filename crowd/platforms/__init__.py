"""Crowds and the platforms they come from: our records of publications, sessions, syncs and
the platform calls we owe (sync.py, split by concern next), and the providers that speak to
each platform (providers/).
"""
