"""Format checkers for JSON Schema's ``format`` keyword, asserting on every draft.

Every checker refuses bad values itself (python-jsonschema's FormatChecker
passes many formats silently when an optional package is missing) and runs in
time linear in the string: the grammars are RE2 patterns or plain code, never
a backtracking ``re`` on payload text. Calendar rules (days in a month, leap
seconds) are checked in code after the pattern matched.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from unicodedata import bidirectional
from unicodedata import normalize

import idna

from narad import hookimpl
from narad.formats import PatternError
from narad.formats import compile_pattern
from narad.formats import regex_search

__all__ = ("CHECKERS", "narad_format_checkers")


def _full(pattern: str) -> Callable[[str], bool]:
    return regex_search("^(?:" + pattern + ")$")


# -- dates and times (RFC 3339) ------------------------------------------------

_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _number(text: str) -> int:
    """The value of an ASCII digit string, or -1 for anything else."""
    return int(text) if text.isascii() and text.isdigit() else -1


# Dates and times are plain slicing, not patterns: fixed positions, and the
# one variable part (a fraction of a second) is skipped with str.lstrip.


def is_date(value: str) -> bool:
    if len(value) != 10 or value[4] != "-" or value[7] != "-":
        return False
    year, month, day = _number(value[:4]), _number(value[5:7]), _number(value[8:])
    if year < 0 or not 1 <= month <= 12 or not 1 <= day <= _DAYS[month - 1]:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return month != 2 or day <= 28 or leap


def _offset_minutes(zone: str) -> int | None:
    if zone in ("Z", "z"):
        return 0
    if len(zone) != 6 or zone[0] not in "+-" or zone[3] != ":":
        return None
    hours, minutes = _number(zone[1:3]), _number(zone[4:])
    if not 0 <= hours <= 23 or not 0 <= minutes <= 59:
        return None
    return (hours * 60 + minutes) * (1 if zone[0] == "+" else -1)


def is_time(value: str) -> bool:
    if len(value) < 9 or value[2] != ":" or value[5] != ":":
        return False
    hour, minute, second = _number(value[:2]), _number(value[3:5]), _number(value[6:8])
    zone = value[8:]
    if zone[:1] == ".":
        zone = zone[1:].lstrip("0123456789")
        if len(zone) == len(value) - 9:
            return False  # a dot with no digits
    offset = _offset_minutes(zone)
    if offset is None or not (0 <= hour <= 23 and 0 <= minute <= 59):
        return False
    if not 0 <= second <= 60:
        return False
    # A leap second exists only at 23:59:60 UTC.
    return second < 60 or (hour * 60 + minute - offset) % 1440 == 23 * 60 + 59


def is_date_time(value: str) -> bool:
    date, sep, time = value.partition("T") if "T" in value else value.partition("t")
    return bool(sep) and is_date(date) and is_time(time)


# RFC 3339 appendix A: each unit may only be followed by the next smaller one
# (P1Y2D and PT1H2S skip one and are invalid).
_DURATION_TIME = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
is_duration = _full(
    r"P(?:[0-9]+W|(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
    r"(?:" + _DURATION_TIME + r")?|" + _DURATION_TIME + r")"
)
is_uuid = _full(
    r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
)


# -- internet addresses and names ----------------------------------------------


def is_ipv4(value: str) -> bool:
    parts = value.split(".", 4)
    if len(parts) != 4:
        return False
    for part in parts:
        if not (part.isascii() and part.isdigit()) or len(part) > 3:
            return False
        if (part.startswith("0") and part != "0") or int(part) > 255:
            return False
    return True


def is_ipv6(value: str) -> bool:
    if len(value) > 45 or "%" in value or not value.isascii():
        return False
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


_LABEL = regex_search(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def is_hostname(value: str) -> bool:
    if not value or len(value) > 253:
        return False
    for label in value.split("."):
        if not _LABEL(label):
            return False
        if label[2:4] == "--":
            # Only a valid A-label may have hyphens in the 3rd and 4th place.
            if label[:4].lower() != "xn--":
                return False
            try:
                idna.decode(label)
            except idna.IDNAError:
                return False
    return True


# The full stops IDNA reads as label separators (RFC 3490 section 3.1).
_DOTS = ".\u3002\uff0e\uff61"
_RTL = frozenset({"R", "AL", "AN"})


def is_idn_hostname(value: str) -> bool:
    # A hostname is at most 253 ASCII characters, so a U-label form cannot be
    # much longer; refusing early keeps the IDNA tables off hostile input.
    if not value or len(value) > 1024 or value[-1] in _DOTS:
        return False
    try:
        encoded = idna.encode(value, uts46=False)
        labels = encoded.decode("ascii").split(".")
        # RFC 5893: in a domain with a right-to-left label, every label (the
        # left-to-right ones too) keeps the Bidi rule.
        if any(_RTL.intersection(map(bidirectional, value))):
            for label in labels:
                idna.check_bidi(idna.decode(label), check_ltr=True)
    except (idna.IDNAError, UnicodeError, ValueError):
        return False
    return len(encoded) <= 253


_ATEXT = r"A-Za-z0-9!#$%&'*+/=?^_`{|}~\-"
_QUOTED = r'"(?:[^"\\\r\n]|\\.)*"'
_LOCAL = regex_search(rf"^(?:[{_ATEXT}]+(?:\.[{_ATEXT}]+)*|{_QUOTED})$")
_U = r"\x{80}-\x{10FFFF}"
_IDN_LOCAL = regex_search(rf"^(?:[{_ATEXT}{_U}]+(?:\.[{_ATEXT}{_U}]+)*|{_QUOTED})$")


def _email(
    value: str, local: Callable[[str], bool], domain: Callable[[str], bool]
) -> bool:
    at = value.rfind("@")
    if at <= 0 or at > 64:
        return False
    if not local(value[:at]):
        return False
    host = value[at + 1 :]
    if host.startswith("[") and host.endswith("]"):
        literal = host[1:-1]
        if literal[:5].lower() == "ipv6:":
            return is_ipv6(literal[5:])
        return is_ipv4(literal)
    return domain(host)


def is_email(value: str) -> bool:
    return _email(value, _LOCAL, is_hostname)


def is_idn_email(value: str) -> bool:
    # RFC 6531 takes the domain as written; IDNA wants its labels in NFC.
    return _email(
        value, _IDN_LOCAL, lambda host: is_idn_hostname(normalize("NFC", host))
    )


# -- URIs and IRIs (RFC 3986, RFC 3987) ----------------------------------------


def _uri_grammar(iri: bool) -> tuple[str, str]:
    """The RFC 3986 grammar as RE2 text: (absolute URI, URI reference)."""
    pct = r"%[0-9A-Fa-f]{2}"
    extra = r"\x{A0}-\x{10FFFF}" if iri else ""
    unreserved = r"A-Za-z0-9\-._~" + extra
    sub = r"!$&'()*+,;="
    pchar = rf"(?:[{unreserved}{sub}:@]|{pct})"
    nc = rf"(?:[{unreserved}{sub}@]|{pct})"
    query = rf"(?:{pchar}|[/?])*"
    ip_literal = rf"\[(?:[0-9A-Fa-f:.]+|[vV][0-9A-Fa-f]+\.[{unreserved}{sub}:]+)\]"
    reg_name = rf"(?:[{unreserved}{sub}]|{pct})*"
    userinfo = rf"(?:[{unreserved}{sub}:]|{pct})*"
    authority = rf"(?:{userinfo}@)?(?:{ip_literal}|{reg_name})(?::[0-9]*)?"
    abempty = rf"(?:/{pchar}*)*"
    absolute = rf"/(?:{pchar}+{abempty})?"
    rootless = rf"{pchar}+{abempty}"
    noscheme = rf"{nc}+{abempty}"
    tail = rf"(?:\?{query})?(?:#{query})?"
    scheme = r"[A-Za-z][A-Za-z0-9+\-.]*"
    hier = rf"(?://{authority}{abempty}|{absolute}|{rootless}|)"
    relative = rf"(?://{authority}{abempty}|{absolute}|{noscheme}|)"
    full = rf"{scheme}:{hier}{tail}"
    return full, rf"{full}|{relative}{tail}"


def _ip_literal_ok(value: str) -> bool:
    # The grammar admits any hex, colons and dots in brackets; check it is a
    # real IPv6 address (linear: the pattern already bounded the characters).
    start = value.find("//[")
    if start < 0:
        return True
    end = value.find("]", start)
    literal = value[start + 3 : end]
    return literal[:1] in ("v", "V") or is_ipv6(literal)


def _uri_checker(pattern: str) -> Callable[[str], bool]:
    search = _full(pattern)
    return lambda value: search(value) and _ip_literal_ok(value)


_URI, _URI_REFERENCE = _uri_grammar(iri=False)
_IRI, _IRI_REFERENCE = _uri_grammar(iri=True)
is_uri = _uri_checker(_URI)
is_uri_reference = _uri_checker(_URI_REFERENCE)
is_iri = _uri_checker(_IRI)
is_iri_reference = _uri_checker(_IRI_REFERENCE)

_VARCHAR = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})"
_VARSPEC = rf"{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
is_uri_template = _full(
    rf"(?:[^{{}}\x00-\x20\x7f\"<>\\^`|]|\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\}})*"
)


# -- JSON pointers and regular expressions -------------------------------------

is_json_pointer = _full(r"(?:/(?:[^~/]|~[01])*)*")
is_relative_json_pointer = _full(r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)")


_MAX_REGEX = 32 * 1024


def is_regex(value: str) -> bool:
    """A pattern the validator can run: RE2 syntax, as ``pattern`` uses."""
    # RE2's default memory budget holds no program much longer than this, and
    # compiling costs time per character before it finds out.
    if len(value) > _MAX_REGEX:
        return False
    try:
        compile_pattern(value)
    except PatternError:
        return False
    return True


CHECKERS: dict[str, Callable[[str], bool]] = {
    "date": is_date,
    "date-time": is_date_time,
    "duration": is_duration,
    "email": is_email,
    "hostname": is_hostname,
    "idn-email": is_idn_email,
    "idn-hostname": is_idn_hostname,
    "ipv4": is_ipv4,
    "ipv6": is_ipv6,
    "iri": is_iri,
    "iri-reference": is_iri_reference,
    "json-pointer": is_json_pointer,
    "regex": is_regex,
    "relative-json-pointer": is_relative_json_pointer,
    "time": is_time,
    "uri": is_uri,
    "uri-reference": is_uri_reference,
    "uri-template": is_uri_template,
    "uuid": is_uuid,
}


@hookimpl
def narad_format_checkers() -> dict[str, Callable[[str], bool]]:
    return dict(CHECKERS)
