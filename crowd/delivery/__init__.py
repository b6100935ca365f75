"""Signed HTTP deliveries with retries (signed), and the experimenters' webhooks built on them
(webhooks). Scale callbacks are deliveries too (crowd.scale.completion).
"""
