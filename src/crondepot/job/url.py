"""A webhook target's URL, checked when the job is written: the URL a worker will be able
to call, or an ``InvalidJob`` naming ``target.url``.

A URL is refused here when httpx would refuse it at dispatch (a control character, a port
out of range, a host that is neither a name nor an address), so that a job never waits for
its first run to fail. A *literal* address (``http://169.254.169.254/``, ``http://[::1]/``,
``http://2130706433/``) is judged now by the worker's own rule, ``AddressGuard`` with
``CRONDEPOT_TARGET_ALLOWLIST`` (one definition: job/guard.py). Host *names* are
not resolved here: what a name points at can change, so the worker checks the address it
resolves at call time (as it also does for literal addresses).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import unicodedata
from functools import lru_cache
from urllib.parse import urlsplit

import httpx

from crondepot.base.errors import InvalidJob
from crondepot.job import fields as F
from crondepot.job.guard import (
    ALLOWLIST_ENV,
    AddressGuard,
    IPAddress,
    TargetRefused,
    is_host_name,
    looks_like_address,
)

MAX_URL_LENGTH = 2048
FIELD = "target.url"


def check_target_url(url: str, allow: str) -> None:
    """Refuse ``url`` unless a worker whose allow-list is ``allow`` (the text of
    ``CRONDEPOT_TARGET_ALLOWLIST``) could call it."""
    try:
        parts = urlsplit(url)       # refuses a bracketed host that is not an IPv6 address
    except ValueError as exc:
        raise InvalidJob(f"target.url is not a URL: {exc}", field=FIELD) from None
    if parts.scheme not in ("http", "https"):
        raise InvalidJob(f"expected target.url to use http or https, got {parts.scheme or 'no'}"
                         " scheme", field=FIELD)
    if not parts.hostname:
        raise InvalidJob("target.url has no host", field=FIELD)
    if parts.username or parts.password or "@" in parts.netloc:
        raise InvalidJob("target.url must not carry credentials", field=FIELD)
    authority = url.find("//") + 2
    _check_characters(url, range(authority, authority + len(parts.netloc)))
    try:
        # httpx reads the authority as urlsplit does (up to the first '/', '?' or '#'), and
        # refuses nothing in the rest that _check_characters has not refused already (ASCII
        # controls; a path after an authority starts with '/'): only the authority is handed
        # to it, so that it does not scan a 2 KiB URL character by character in Python.
        parsed = httpx.URL(f"{parts.scheme}://{parts.netloc}")
    except httpx.InvalidURL as exc:
        raise InvalidJob(f"target.url is not a URL a webhook can be sent to: {exc}",
                         field=FIELD) from None
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise InvalidJob(f"expected target.url's port to be from 1 to 65535, got {parsed.port}",
                         field=FIELD)
    try:
        host = parsed.raw_host.decode("ascii")
    except (UnicodeError, ValueError):      # httpx let a non-ASCII host through unencoded
        raise InvalidJob("target.url's host is not a host name or an address a webhook can "
                         "be sent to", field=FIELD) from None
    address = _literal_address(host)
    if address is not None:
        _check_address(host, address, allow)


def allow_list() -> str:
    """The allow-list in force, as text (a cache key: a change applies at once)."""
    return os.environ.get(ALLOWLIST_ENV, "")


def check_allow_list() -> None:
    """Raise ValueError, naming ``CRONDEPOT_TARGET_ALLOWLIST`` and the entry at fault, if
    the allow-list in force does not parse: a process that checks target URLs calls this at
    start, as the worker builds its guard at start, rather than failing each create."""
    _guard(allow_list())


# The characters _refused_char may refuse: in ASCII exactly the refused ones (controls,
# whitespace: all of \x00-\x20 and \x7f), beyond it any (checked one by one). An ASCII URL
# is checked by one search in C; only the non-ASCII characters of an IDN URL reach Python.
_SUSPECT = re.compile(r"[\x00-\x20\x7f-\U0010ffff]")


# Zero-width non-joiner and joiner: format characters (Cf), yet part of valid IDN labels in
# some scripts (Persian نامه‌ای, Devanagari क्‍ष). In the host they are left to IDNA, whose
# CONTEXTJ rule (RFC 5892) httpx's encoding enforces: a joiner in the wrong place is refused
# there ("Invalid IDNA hostname").
_JOINERS = frozenset("\u200c\u200d")


def _check_characters(url: str, authority: range = range(0)) -> None:
    """No whitespace or control character anywhere (but for IDNA's joiners in
    ``authority``, the positions of the host): httpx refuses most of them, quietly
    percent-encodes a space (``http://ex ample.com/`` becomes a host no resolver knows),
    and a CR or LF in a header-bound value is a request-splitting attempt."""
    for found in _SUSPECT.finditer(url):
        char = found.group()
        if char in _JOINERS and found.start() in authority:
            continue
        if char <= "\x7f" or _refused_char(char):
            raise InvalidJob(f"target.url has {_describe(char)} at position {found.start()}; "
                             "expected no whitespace or control characters (percent-encode "
                             "them)", field=FIELD)


def _refused_char(char: str) -> bool:
    return char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")


@lru_cache(maxsize=1)
def schema_pattern() -> str:
    """The rules above that JSON Schema can spell, as a pattern (ECMA-262 and Python alike):
    http or https, an authority without ``@`` (no credentials), no refused character. The
    refused characters are listed from the Basic Multilingual Plane only, the plane both
    dialects escape alike: the few format characters beyond it (U+E0001 …) are refused by
    the check, not by the schema."""
    refused = "".join(chr(c) for c in range(0x10000)
                      if not 0xD800 <= c <= 0xDFFF and _refused_char(chr(c)))
    authority = F.char_class("".join(c for c in refused if c not in _JOINERS) + "@/?#",
                             negate=True)
    rest = F.char_class(refused, negate=True)
    return f"^[Hh][Tt][Tt][Pp][Ss]?://{authority}+(?:[/?#]{rest}*)?$"


def _describe(char: str) -> str:
    return "a space" if char == " " else f"the character U+{ord(char):04X}"


def _literal_address(host: str) -> IPAddress | None:
    """The address ``host`` spells, or None for a host name; an InvalidJob for a host that
    is neither. Numeric IPv4 forms that resolvers read as addresses (``2130706433``,
    ``0x7f.1``, ``127.1``) count as addresses, as the guard's own entries do."""
    if ":" in host:
        try:
            return ipaddress.ip_address(host)
        except ValueError:
            raise InvalidJob(f"target.url's host {host!r} is not a valid IPv6 address",
                             field=FIELD) from None
    if looks_like_address(host.rstrip(".")):
        try:
            return ipaddress.ip_address(socket.inet_aton(host.rstrip(".")))
        except OSError:
            raise InvalidJob(f"target.url's host {host!r} is not a valid IPv4 address",
                             field=FIELD) from None
    if not is_host_name(host):
        raise InvalidJob(f"target.url's host {host!r} is not a host name (labels of letters, "
                         "digits, '-' and '_', at most 63 characters each)", field=FIELD)
    return None


def _check_address(host: str, address: IPAddress, allow: str) -> None:
    try:
        _guard(allow).check(host, str(address))
    except TargetRefused as exc:
        raise InvalidJob(f"target.url names an address webhooks may not call: {exc}",
                         field=FIELD) from None


@lru_cache(maxsize=8)
def _guard(allow: str) -> AddressGuard:
    return AddressGuard.from_env({ALLOWLIST_ENV: allow})
