"""The ``http`` target: a signed webhook POST to a URL a worker can call (``job/url.py``
checks it now, by the worker's own address rule)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from crondepot.base.errors import InvalidJob
from crondepot.job import url
from crondepot.job.checks import boolean, json_kind, no_extra, seconds, variant_members
from crondepot.job.fields import Field, Variant

URL = Field(path=url.FIELD, type="string", max_length=url.MAX_URL_LENGTH,
            schema_pattern=url.schema_pattern,
            description="an http or https URL without credentials, whitespace or control "
                        "characters, with a host name or a public address (others are "
                        "refused unless allow-listed) and a port from 1 to 65535")
TIMEOUT_S = Field(path="target.timeout_s", type="number", above=0, high=300, default=10,
                  description="seconds to wait for the answer")
DEDUPES = Field(path="target.dedupes", type="boolean", default=False,
                description="the target drops repeated Idempotency-Keys, so a call whose "
                            "outcome is unknown may be retried")
VARIANT = Variant(tag="http", title="HttpTarget", fields=(URL, TIMEOUT_S, DEDUPES),
                  required=("url",))
_MEMBERS = variant_members(VARIANT, "type")


def check(target: dict[str, Any]) -> dict[str, Any]:
    """A valid http target; the jobs of a service share one, so a target already seen
    valid is not parsed again (a copy is returned: specs never share a dict).

    The cache key carries each value's type: ``True == 1`` and ``10 == 10.0`` with equal
    hashes, so without it ``dedupes: 1`` after ``dedupes: true`` would be taken as seen."""
    allow = url.allow_list()    # a literal address's verdict depends on it: part of the key
    try:
        seen = tuple((name, type(value), value) for name, value in sorted(target.items()))
        return dict(_valid(seen, allow))
    except TypeError:       # an unhashable value (a list, an object): invalid, say where
        return _check(target, allow)


def summary(target: dict[str, Any]) -> str:
    return f"http {target.get('url', '')}"


def description(target: dict[str, Any]) -> str:
    return f"http POST {target.get('url')} (timeout {target.get('timeout_s')} s)"


@lru_cache(maxsize=1024)
def _valid(items: tuple[tuple[str, type, Any], ...], allow: str) -> dict[str, Any]:
    return _check({name: value for name, _, value in items}, allow)


def _check(target: dict[str, Any], allow: str) -> dict[str, Any]:
    no_extra(target, _MEMBERS, "target")
    address = target.get("url")
    if not isinstance(address, str) or len(address) > url.MAX_URL_LENGTH:
        raise InvalidJob(f"expected target.url to be a URL string, got {json_kind(address)}",
                         field="target.url")
    url.check_target_url(address, allow)
    timeout = seconds(target, TIMEOUT_S)
    dedupes = boolean(target, DEDUPES)
    return {"type": "http", "url": address, "timeout_s": timeout, "dedupes": dedupes}
