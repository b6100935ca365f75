"""The bodies each blueprint takes and returns, declared once (see crowd.web.contract)."""
