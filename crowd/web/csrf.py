"""Cross-site request forgery: no other site can make a visitor's browser act here.

Browsers attach our cookies (the dashboard's and the reviewer's session, the worker cookie)
to requests that other sites start. Two defences, each covering what the other cannot:

- **Forms carry a synchronizer token** (OWASP's CSRF cheat sheet): a random value kept in the
  signed session cookie, written into each form signed and timestamped, and compared on the
  server. The login forms carry one too, bound to the pre-session cookie their page sets, so
  another site cannot log a visitor in to the other site's account ("login CSRF"). A
  blueprint of forms calls `protect_forms(bp)`: every unsafe request to it needs the token.
- **Browsers' cross-origin requests that could change something are refused**, whatever
  they carry: the JSON APIs that the worker cookie authenticates (their bodiless posts, such
  as giving an assignment back, pass no content-type check), and pages of another port of
  the same host, which SameSite cookies count as the same site. The browser says where a
  request comes from: Sec-Fetch-Site (every current browser), else Origin. A request with
  neither is not a browser's (curl, the API clients, which authenticate by header) or one
  too old to say; forms still need their token. This is the check of Go's
  net/http.CrossOriginProtection (Filippo Valsorda, "Cross-Site Request Forgery", 2025).

The cookies are SameSite=Lax as well (crowd.app, crowd.web.work), which keeps them off other
sites' posts in the first place. On MTurk and Prolific the worker page is our origin inside
their frame: its calls are same-origin and carry the worker token in a header.

Flask-WTF's CSRFProtect was not used: it guards views, not credentials, so every API-key and
Scale route would need an exemption and the worker pages' JSON calls a token of their own;
it answers 400 and ties a form's life to its one-hour token.
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, Flask, current_app, request, session
from itsdangerous import BadData, SignatureExpired, URLSafeTimedSerializer

from crowd.context import platform
from crowd.exceptions import PermissionDenied

# The hidden field of every form and the session key of the token it is checked against.
FIELD = "csrf"
SESSION_KEY = "csrf"
SALT = "crowd.web.csrf"
# A form left open for a working day still posts; an older one asks for a reload.
MAX_AGE_SECONDS = 24 * 3600
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
# What Sec-Fetch-Site says of a request another origin cannot have started: one of our pages,
# or the person themselves (a bookmark, the address bar).
OWN = frozenset({"same-origin", "none"})
RELOAD = "reload the page and submit the form again"
# The port an origin leaves out (RFC 6454 section 4: an origin's port is the scheme's default).
DEFAULT_PORTS = {"http": 80, "https": 443}


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.secret_key or "", salt=SALT)


def form_token() -> str:
    """The value of a form's hidden `csrf` field (templates call it as csrf_token())."""
    raw = session.get(SESSION_KEY)
    if not isinstance(raw, str):
        raw = secrets.token_urlsafe(32)
        session[SESSION_KEY] = raw
    return _serializer().dumps(raw)


def check_form() -> None:
    """Refuse the posted form unless its token is this session's and at most a day old."""
    expected = session.get(SESSION_KEY)
    if not isinstance(expected, str):
        raise PermissionDenied(
            "refused: this form came without the session it was made for (a form from "
            f"another site, cookies blocked for this site, or the session ended): {RELOAD}"
        )
    sent = request.form.get(FIELD, "")
    if not sent:
        raise PermissionDenied(f"refused: the form has no security token: {RELOAD}")
    try:
        raw = _serializer().loads(sent, max_age=MAX_AGE_SECONDS)
    except SignatureExpired:
        raise PermissionDenied(f"refused: the form is more than a day old: {RELOAD}") from None
    except BadData:
        invalid = f"refused: the form's security token is not valid: {RELOAD}"
        raise PermissionDenied(invalid) from None
    # Compared as bytes: compare_digest refuses str with non-ASCII characters (a TypeError).
    if not isinstance(raw, str) or not secrets.compare_digest(raw.encode(), expected.encode()):
        raise PermissionDenied(
            f"refused: the form was made for another session (another login?): {RELOAD}"
        )


def protect_forms(bp: Blueprint) -> None:
    """Every POST, PUT, PATCH and DELETE to the blueprint needs its form's token."""

    @bp.before_request
    def _check() -> None:
        if request.method not in SAFE_METHODS:
            check_form()


def _host_key(netloc: str, default_port: int | None) -> str | None:
    """host[:port] lower-cased, the port left out where it is `default_port`; None if malformed."""
    try:
        parts = urlsplit(f"//{netloc}")
        port = parts.port  # a port that is not a number, or out of range, raises
    except ValueError:
        return None
    host = parts.hostname
    if not host or parts.username is not None or parts.password is not None:
        return None
    if ":" in host:
        host = f"[{host}]"  # IPv6, as a Host header writes it
    return host if port is None or port == default_port else f"{host}:{port}"


def _is_own_origin(origin: str) -> bool:
    """Whether an Origin header names one of the hosts our pages are served under.

    A browser may write the scheme's default port or leave it out, and a proxy may pass the
    Host on either way, so `https://example.com` is `Host: example.com:443`. The schemes are
    not compared: behind a proxy that ends TLS, the request itself says http.
    """
    try:
        parts = urlsplit(origin)
    except ValueError:  # "http://[::1" and the like: no browser sends it
        return False
    default_port = DEFAULT_PORTS.get(parts.scheme.lower())
    if default_port is None or parts.path or parts.query or parts.fragment:
        return False
    key = _host_key(parts.netloc, default_port)
    if key is None:
        return False
    base = urlsplit(platform().settings.base_url).netloc
    ours = {_host_key(host, default_port) for host in (request.host, base) if host}
    return key in ours


def refuse_cross_origin() -> None:
    """Refuse an unsafe request that the browser says another origin started."""
    if request.method in SAFE_METHODS:
        return
    origin = request.headers.get("Origin")
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        if site.lower() in OWN:
            return
    elif origin is None:
        return  # not sent by a browser, or by one too old to say: forms keep their token
    elif origin != "null" and _is_own_origin(origin):
        return
    source = origin if origin and origin != "null" else "another site"
    raise PermissionDenied(
        f"refused: this request came from {source}, not from a page of {request.host}; "
        "only this site's own pages may post here (API clients call without a browser)"
    )


def init_app(app: Flask) -> None:
    """Check every request's origin and give templates csrf_token()."""
    app.before_request(refuse_cross_origin)

    @app.context_processor
    def _inject() -> dict[str, Any]:
        return {"csrf_token": form_token}
