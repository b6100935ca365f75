"""What MTurk accepts, checked before anything is sent: amounts in dollars and MTurk's fees,
the ExternalQuestion XML, qualification requirements, ids, texts and durations within MTurk's
documented limits; and reading the Answer XML of submitted work.

Pure code: the calls themselves are in mturk_api.py, which checks its arguments here, so a
bad reward or URL fails with a hint instead of as an opaque RequestError from MTurk.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from crowd.exceptions import ValidationError

EXTERNAL_QUESTION_NS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
    "ExternalQuestion.xsd"
)
MAX_URL_LENGTH = 1024
MAX_FRAME_HEIGHT = 4000

# System qualification types every MTurk account has.
APPROVAL_RATE_QUALIFICATION = "000000000000000000L0"  # Worker_PercentAssignmentsApproved
LOCALE_QUALIFICATION = "00000000000000000071"  # Worker_Locale
COMPARATORS = (
    "LessThan",
    "LessThanOrEqualTo",
    "GreaterThan",
    "GreaterThanOrEqualTo",
    "EqualTo",
    "NotEqualTo",
    "Exists",
    "DoesNotExist",
    "In",
    "NotIn",
)
# Comparators that test presence only and take no value.
VALUELESS_COMPARATORS = ("Exists", "DoesNotExist")
MAX_QUALIFICATION_REQUIREMENTS = 10

# MTurk's published pricing (https://www.mturk.com/pricing): a 20% commission on rewards and
# bonuses, 20% more on the reward of HITs with 10 or more assignments, and at least $0.01
# per assignment or bonus.
FEE_RATE = Decimal("0.20")
LARGE_HIT_FEE_RATE = Decimal("0.40")
LARGE_HIT_ASSIGNMENTS = 10
MINIMUM_FEE = Decimal("0.01")
CENT = Decimal("0.01")
MAX_REWARD = Decimal("1000")

# MTurk's documented limits (API reference, 2017-01-17).
MAX_TITLE = 128
MAX_DESCRIPTION = 2000
MAX_KEYWORDS = 1000
MIN_DURATION_S = 30
MAX_DURATION_S = 365 * 24 * 3600
MAX_AUTO_APPROVAL_DELAY_S = 30 * 24 * 3600
MAX_ASSIGNMENTS = 1_000_000
MAX_FEEDBACK = 1024
MAX_TOKEN = 64
MAX_SUBJECT = 200
MAX_MESSAGE = 4096
ELLIPSIS = "\u2026"

ENTITY_ID = re.compile(r"^[A-Z0-9]{1,64}$")
WORKER_ID = re.compile(r"^A[A-Z0-9]{1,63}$")
COUNTRY = re.compile(r"^[A-Z]{2}$")


def dollars(amount: Decimal | str | float | int, where: str) -> Decimal:
    # bool is an int; True dollars is a bug, not an amount.
    if isinstance(amount, bool) or not isinstance(amount, Decimal | str | float | int):
        raise ValidationError(f"{amount!r} is not an amount of dollars: use e.g. '0.50'", where)
    try:
        # Through str() so that a float like 0.1 means 0.1, not its binary expansion.
        value = amount if isinstance(amount, Decimal) else Decimal(str(amount).strip())
    except InvalidOperation:
        raise ValidationError(
            f"{amount!r} is not an amount of dollars: use e.g. '0.50'", where
        ) from None
    if not value.is_finite():
        raise ValidationError(f"{amount!r} is not an amount of dollars: use e.g. '0.50'", where)
    return value


def format_reward(amount: Decimal | str | float | int, where: str = "reward") -> str:
    """The dollar amount as MTurk's CurrencyAmount string with two decimals, e.g. '0.50'."""
    value = dollars(amount, where)
    if value <= 0:
        raise ValidationError(f"{amount!r} must be more than $0.00: use e.g. '0.50'", where)
    if value > MAX_REWARD:
        raise ValidationError(
            f"{amount!r} is more than ${MAX_REWARD}: this is surely a typo; split large "
            "payments into smaller bonuses if it is not",
            where,
        )
    if value != value.quantize(CENT):
        raise ValidationError(
            f"{amount!r} has fractions of a cent; MTurk pays whole cents: round it, e.g. "
            f"'{value.quantize(CENT, ROUND_HALF_UP)}'",
            where,
        )
    return str(value.quantize(CENT))


def external_question(url: str, frame_height: int = 0, allow_http: bool = False) -> str:
    """MTurk's ExternalQuestion XML that shows `url` in a frame (height 0: the whole window)."""
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise ValidationError(
            f"{url!r} contains spaces or control characters: percent-encode them", "url"
        )
    parts = urlsplit(url)
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes or not parts.hostname:
        raise ValidationError(
            f"{url!r} is not an https URL: MTurk shows only https pages in its frame; "
            "serve the study over https (CROWD_BASE_URL=https://...)",
            "url",
        )
    if len(url) > MAX_URL_LENGTH:
        raise ValidationError(
            f"the URL is {len(url)} characters long; MTurk takes at most {MAX_URL_LENGTH}: "
            "move parameters into the study instead of the query string",
            "url",
        )
    if isinstance(frame_height, bool) or not isinstance(frame_height, int):
        raise ValidationError(f"{frame_height!r} is not a whole number of pixels", "frame_height")
    if not 0 <= frame_height <= MAX_FRAME_HEIGHT:
        raise ValidationError(
            f"{frame_height} is not between 0 and {MAX_FRAME_HEIGHT} pixels "
            "(0 lets the frame fill the window)",
            "frame_height",
        )
    return (
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_NS}">'
        f"<ExternalURL>{escape(url)}</ExternalURL>"
        f"<FrameHeight>{frame_height}</FrameHeight>"
        "</ExternalQuestion>"
    )


def check_entity_id(value: str, where: str) -> str:
    if not isinstance(value, str) or not ENTITY_ID.match(value):
        raise ValidationError(
            f"{value!r} is not an MTurk id (capital letters and digits, at most 64): "
            "copy it from the requester site or from the API's answer",
            where,
        )
    return value


def check_worker_id(value: str, where: str = "worker_id") -> str:
    if not isinstance(value, str) or not WORKER_ID.match(value):
        raise ValidationError(
            f"{value!r} is not an MTurk worker id (an A followed by capital letters and "
            "digits, e.g. A1B2C3D4E5F6G7)",
            where,
        )
    return value


def qualification_requirements(
    approval_rate: int | None = 95,
    locales: Sequence[str] | None = ("US",),
    custom: Sequence[tuple[str, str, int | None]] = (),
    block_qualification_id: str | None = None,
) -> list[dict[str, Any]]:
    """MTurk's QualificationRequirements: approval rate, countries, custom ones, our block list."""
    requirements: list[dict[str, Any]] = []
    if approval_rate is not None:
        if isinstance(approval_rate, bool) or not isinstance(approval_rate, int):
            raise ValidationError(f"{approval_rate!r} is not a whole percent", "approval_rate")
        if not 0 <= approval_rate <= 100:
            raise ValidationError(
                f"{approval_rate} is not a percent between 0 and 100", "approval_rate"
            )
        requirements.append(
            {
                "QualificationTypeId": APPROVAL_RATE_QUALIFICATION,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [approval_rate],
            }
        )
    if locales:
        countries = []
        for locale in locales:
            country = locale.upper() if isinstance(locale, str) else ""
            if not COUNTRY.match(country):
                raise ValidationError(
                    f"{locale!r} is not a two-letter ISO 3166 country code, e.g. 'US', 'GB'",
                    "locales",
                )
            if country not in countries:
                countries.append(country)
        requirements.append(
            {
                "QualificationTypeId": LOCALE_QUALIFICATION,
                "Comparator": "In",
                "LocaleValues": [{"Country": country} for country in countries],
            }
        )
    for index, entry in enumerate(custom):
        where = f"custom[{index}]"
        if not isinstance(entry, tuple | list) or len(entry) != 3:
            raise ValidationError(
                f"{entry!r} is not (qualification_type_id, comparator, value)", where
            )
        type_id, comparator, value = entry
        check_entity_id(type_id, where)
        if comparator not in COMPARATORS:
            raise ValidationError(
                f"{comparator!r} is not an MTurk comparator: use one of {', '.join(COMPARATORS)}",
                where,
            )
        requirement: dict[str, Any] = {"QualificationTypeId": type_id, "Comparator": comparator}
        if comparator in VALUELESS_COMPARATORS:
            if value is not None:
                raise ValidationError(f"{comparator} takes no value: use None", where)
        elif isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"{comparator} needs a whole number, not {value!r}", where)
        else:
            requirement["IntegerValues"] = [value]
        requirements.append(requirement)
    if block_qualification_id is not None:
        check_entity_id(block_qualification_id, "block_qualification_id")
        # Guarding discovery too means blocked workers do not even see the HIT listed.
        requirements.append(
            {
                "QualificationTypeId": block_qualification_id,
                "Comparator": "DoesNotExist",
                "ActionsGuarded": "DiscoverPreviewAndAccept",
            }
        )
    if len(requirements) > MAX_QUALIFICATION_REQUIREMENTS:
        raise ValidationError(
            f"{len(requirements)} qualification requirements; MTurk takes at most "
            f"{MAX_QUALIFICATION_REQUIREMENTS}: drop some custom ones",
            "qualification_requirements",
        )
    return requirements


def fee(reward: Decimal, assignments: int) -> Decimal:
    """MTurk's commission on one payment of `reward` on a HIT with `assignments` assignments.

    MTurk's published pricing: 20% of the reward (and of any bonus: use assignments=1), 40%
    when the HIT has 10 or more assignments, at least $0.01, in whole cents.
    """
    amount = dollars(reward, "reward")
    check_count(assignments, "assignments")
    rate = LARGE_HIT_FEE_RATE if assignments >= LARGE_HIT_ASSIGNMENTS else FEE_RATE
    return max(MINIMUM_FEE, (amount * rate).quantize(CENT, ROUND_HALF_UP))


def check_count(value: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{value!r} is not a whole number of at least 1", where)
    return value


def cost(reward: Decimal, assignments: int, hits: int) -> Decimal:
    """What `hits` HITs of `assignments` assignments at `reward` each cost with MTurk's fees."""
    amount = dollars(reward, "reward")
    return (amount + fee(amount, assignments)) * assignments * check_count(hits, "hits")


def check_text(value: str, where: str, limit: int, required: bool = True) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValidationError("is empty: MTurk requires it", where)
    if len(value) > limit:
        raise ValidationError(
            f"is {len(value)} characters long; MTurk takes at most {limit}: shorten it", where
        )
    return value


def shorten(value: str, limit: int) -> str:
    """`value` cut to at most `limit` characters, ending with an ellipsis where it was cut;
    a cut never parts a letter from the accents (combining marks) that follow it."""
    if len(value) <= limit:
        return value
    end = limit - len(ELLIPSIS)
    while end > 0 and unicodedata.combining(value[end]):
        end -= 1
    return value[:end].rstrip() + ELLIPSIS


def check_seconds(value: int, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{value!r} is not a whole number of seconds in {low}..{high}", where)
    return value


def check_token(value: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_TOKEN:
        raise ValidationError(
            f"{value!r} must be 1 to {MAX_TOKEN} characters: derive it from our own ids",
            "unique_request_token",
        )
    return value


def external_url(question_xml: str) -> str | None:
    """The ExternalURL of a HIT's Question (None when it is no ExternalQuestion)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(question_xml)
    except ET.ParseError:
        return None
    if root.tag != f"{{{EXTERNAL_QUESTION_NS}}}ExternalQuestion":
        return None
    url = root.findtext(f"{{{EXTERNAL_QUESTION_NS}}}ExternalURL")
    return url.strip() if url is not None else None


def answer_fields(answer_xml: str) -> dict[str, str]:
    """The fields of MTurk's Answer XML (QuestionFormAnswers): identifier -> free text."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(answer_xml)
    except ET.ParseError:
        return {}
    fields: dict[str, str] = {}
    for answer in root.iter():
        if not answer.tag.endswith("Answer") or answer.tag.endswith("QuestionFormAnswers"):
            continue
        name = text = None
        for child in answer:
            if child.tag.endswith("QuestionIdentifier"):
                name = child.text or ""
            elif child.tag.endswith("FreeText"):
                text = child.text or ""
        if name is not None and text is not None:
            fields[name] = text
    return fields
