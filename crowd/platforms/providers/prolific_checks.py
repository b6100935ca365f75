"""What Prolific accepts, checked before a request goes out: ids, whole numbers, texts and
money within its limits, the study URL with Prolific's placeholders, and our completion codes
(derived from a secret, so a participant cannot guess another's and we need not store them).

Pure code: the client that calls Prolific is prolific_api.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from crowd.exceptions import ValidationError

# Where a participant goes back to when done; Prolific records the code given as `cc`.
COMPLETE_URL = "https://app.prolific.com/submissions/complete?cc="

# Prolific fills these in when it sends a participant to the study URL. They must reach
# Prolific verbatim: percent-encoded braces are not substituted.
URL_PARAMETERS = (
    ("PROLIFIC_PID", "{{%PROLIFIC_PID%}}"),
    ("STUDY_ID", "{{%STUDY_ID%}}"),
    ("SESSION_ID", "{{%SESSION_ID%}}"),
)

# Studies, submissions, participants and workspaces all have MongoDB ObjectIds.
OBJECT_ID = re.compile(r"^[0-9a-f]{24}$")
STUDY_CODE = re.compile(r"^[A-Z0-9]{4,32}$")
DEVICES = ("desktop", "tablet", "mobile")
# As Prolific spells them in answers: with spaces, and TIMED-OUT with a hyphen.
SUBMISSION_STATUSES = (
    "RESERVED",
    "ACTIVE",
    "TIMED-OUT",
    "AWAITING REVIEW",
    "APPROVED",
    "PARTIALLY APPROVED",
    "RETURNED",
    "REJECTED",
    "SCREENED OUT",
    "UNKNOWN",
)
REJECTION_CATEGORIES = (
    "TOO_QUICKLY",
    "TOO_SLOWLY",
    "FAILED_INSTRUCTIONS",
    "INCOMP_LONGITUDINAL",
    "FAILED_CHECK",
    "LOW_EFFORT",
    "MALINGERING",
    "NO_CODE",
    "BAD_CODE",
    "NO_DATA",
    "UNSUPP_DEVICE",
    "OTHER",
)
# Documented for SubmissionTransition: a rejection message must be at least 100 characters.
MIN_REJECTION_MESSAGE = 100
# Our own caps against typos; Prolific does not document upper limits for these.
MAX_NAME = 255
MAX_DESCRIPTION = 20_000
MAX_MESSAGE = 5_000
MAX_REWARD = 100_000  # cents/pence per place
MAX_BONUS = 100_000  # cents/pence per participant
MAX_PLACES = 100_000
# Prolific times a submission out within 24 hours, and allows at least twice the estimate.
MAX_ESTIMATED_MINUTES = 600
MAX_PAGE_SIZE = 100
# Prolific's bulk message reaches at most this many participants ("Send a broadcast": as many
# as a bulk message, 4,000 by default).
MAX_MESSAGE_RECIPIENTS = 4000
# The filter that leaves out a participant group's members; selected_values are group ids
# ("Advanced filtering", Participant Groups).
GROUP_BLOCKLIST = "participant_group_blocklist"

MIN_SECRET_BYTES = 16
CODE_LENGTH = 10


def check_object_id(value: str, where: str) -> str:
    if not isinstance(value, str) or not OBJECT_ID.match(value):
        raise ValidationError(
            f"{value!r} is not a Prolific id (24 lowercase hex characters, e.g. "
            "60ffe5c8371090c7041d43f8): copy it from Prolific's answer or the URL parameters",
            where,
        )
    return value


def check_whole(value: int, where: str, low: int, high: int, unit: str = "") -> int:
    # bool is an int; True places is a bug, not a number.
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{value!r} is not a whole number{unit} in {low}..{high}", where)
    return value


def check_text(value: str, where: str, limit: int, minimum: int = 1) -> str:
    if not isinstance(value, str) or len(value.strip()) < minimum:
        needed = "is empty" if minimum == 1 else f"is shorter than {minimum} characters"
        raise ValidationError(f"{needed}: Prolific requires it and shows it to participants", where)
    if len(value) > limit:
        raise ValidationError(f"is {len(value)} characters long; shorten it to {limit}", where)
    return value


def check_cents(value: int, where: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            f"{value!r} is not a whole number of cents/pence: Prolific counts money in the "
            "smallest unit, e.g. 150 for 1.50",
            where,
        )
    if not 1 <= value <= high:
        raise ValidationError(
            f"{value} is not in 1..{high} cents/pence; the amount is in the smallest unit "
            "(150 means 1.50)",
            where,
        )
    return value


def check_url(url: str, allow_http: bool, where: str) -> tuple[str, str, str, str, str]:
    if not isinstance(url, str) or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise ValidationError(
            f"{url!r} is not a URL without spaces or control characters: percent-encode them",
            where,
        )
    parts = urlsplit(url)
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes or not parts.hostname:
        raise ValidationError(
            f"{url!r} is not an https URL: Prolific sends participants to it, so serve the "
            "study over https (CROWD_BASE_URL=https://...)",
            where,
        )
    return parts.scheme, parts.netloc, parts.path, parts.query, parts.fragment


def external_url(base_task_url: str, allow_http: bool = False) -> str:
    """The study URL Prolific sends participants to: the task URL with Prolific's placeholders."""
    scheme, netloc, path, query, fragment = check_url(base_task_url, allow_http, "task_url")
    names = {pair.split("=", 1)[0] for pair in query.split("&") if pair}
    taken = sorted(names & {name for name, _ in URL_PARAMETERS})
    if taken:
        raise ValidationError(
            f"{base_task_url!r} already has {', '.join(taken)}: pass the task URL without "
            "Prolific's parameters; they are added here",
            "task_url",
        )
    # Joined by hand: urlencode would percent-encode the braces Prolific looks for.
    added = "&".join(f"{name}={placeholder}" for name, placeholder in URL_PARAMETERS)
    return urlunsplit((scheme, netloc, path, f"{query}&{added}" if query else added, fragment))


def completion_url(code: str) -> str:
    """Where our server sends a participant who is done, carrying their completion code."""
    if not isinstance(code, str) or not re.match(r"^[A-Za-z0-9]{1,64}$", code):
        raise ValidationError(f"{code!r} is not a completion code (letters and digits)", "code")
    return COMPLETE_URL + quote(code)


def secret_key(secret: str | bytes) -> bytes:
    key = secret.encode() if isinstance(secret, str) else secret
    if not isinstance(key, bytes) or len(key) < MIN_SECRET_BYTES:
        raise ValidationError(
            f"the completion-code secret must be at least {MIN_SECRET_BYTES} bytes: use a "
            "random one, e.g. secrets.token_hex(32), and keep it across restarts",
            "secret",
        )
    return key


def completion_code(secret: str | bytes, session_id: str) -> str:
    """The code for one submission (Prolific's SESSION_ID): 10 uppercase letters and digits.

    HMAC-SHA256 of the session id under our secret, in base32 (A-Z, 2-7), cut to 50 bits: a
    participant cannot guess another's code, and we need not store it to check it.
    """
    message = b"prolific-completion-code:" + check_object_id(session_id, "session_id").encode()
    digest = hmac.new(secret_key(secret), message, hashlib.sha256).digest()
    return base64.b32encode(digest).decode()[:CODE_LENGTH]


def code_matches(secret: str | bytes, session_id: str, code: str) -> bool:
    """Whether `code` (as the participant typed it: case and outer spaces ignored) is theirs."""
    expected = completion_code(secret, session_id)
    if not isinstance(code, str):
        return False
    # compare_digest: the time taken must not tell how many leading characters were right.
    return hmac.compare_digest(code.strip().upper().encode(), expected.encode())


def check_participants(values: object, where: str, most: int) -> list[str]:
    """1 to `most` distinct Prolific participant ids."""
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise ValidationError("must be a list of Prolific participant ids", where)
    ids = [check_object_id(value, where) for value in values]
    if not 1 <= len(ids) <= most or len(set(ids)) < len(ids):
        raise ValidationError(f"name 1 to {most} participants, each once (got {len(ids)})", where)
    return ids


def excluding_group(filters: object, group_id: str) -> list[Any]:
    """The study's filters with participant group `group_id` left out: added to a blocklist
    filter already there (Prolific takes each filter once), or as a new one."""
    check_object_id(group_id, "exclusion_group_id")
    if filters is not None and not isinstance(filters, list):
        raise ValidationError(
            "must be a list of Prolific filters: see GET /api/v1/filters/", "filters"
        )
    out = [dict(item) if isinstance(item, Mapping) else item for item in filters or []]
    for item in out:
        if isinstance(item, dict) and item.get("filter_id") == GROUP_BLOCKLIST:
            values = item.get("selected_values")
            values = list(values) if isinstance(values, list) else []
            item["selected_values"] = values if group_id in values else [*values, group_id]
            return out
    return [*out, {"filter_id": GROUP_BLOCKLIST, "selected_values": [group_id]}]
