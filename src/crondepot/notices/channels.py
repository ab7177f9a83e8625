"""A tenant's notification channels: where its failure notices go.

Two kinds: ``webhook`` (a URL, called with a JSON body signed with the tenant's webhook
signing secret, as run deliveries are) and ``email`` (an address, written to through the
operator's SMTP relay). A webhook URL is checked as a job's target URL is (``job/url.py``:
http or https, no credentials, a literal address the address guard refuses is refused now;
a host name is checked at connect time by the sender, as the worker does). Adding the same
channel again answers the one there; another tenant's channel reads as one that does not
exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row

from crondepot.base.errors import CrondepotError, InvalidJob
from crondepot.base.vocab import CHANNEL_KINDS, ChannelKind
from crondepot.db import Q
from crondepot.job.url import allow_list, check_target_url

# A tenant's channels, at most: each event is written once per channel, in the transaction
# of its cause.
MAX_CHANNELS = 20
MAX_ADDRESS = 254          # RFC 5321's path limit, less the brackets
# local@domain: printable ASCII without spaces, quotes, angle brackets, commas or
# semicolons (a header-splitting or multi-recipient address is refused), a dotted domain.
EMAIL_PATTERN = (r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}@"
                 r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}")
_EMAIL = re.compile(EMAIL_PATTERN)


class ChannelNotFound(CrondepotError):
    """No channel with that id for the tenant (another tenant's reads the same)."""


class InvalidChannel(CrondepotError, ValueError):
    """A channel that cannot be; ``field`` names what is wrong."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True, kw_only=True)
class Channel:
    id: int
    tenant_id: int
    kind: str
    address: str
    created_at: datetime

    def document(self) -> dict[str, Any]:
        where = "url" if self.kind == "webhook" else "address"
        return {"id": self.id, "type": self.kind, where: self.address,
                "created_at": self.created_at.isoformat()}


def check_kind(kind: object) -> ChannelKind:
    for known in CHANNEL_KINDS:
        if kind == known:
            return known
    raise InvalidChannel(f"expected type to be one of {', '.join(CHANNEL_KINDS)}, got "
                         f"{kind!r}", field="type")


def check_webhook_url(url: object) -> str:
    if not isinstance(url, str) or not url:
        raise InvalidChannel(f"expected url to be an http or https URL, got {url!r}",
                             field="url")
    if len(url) > 2048:
        raise InvalidChannel(f"url is {len(url)} characters long; at most 2048", field="url")
    try:
        check_target_url(url, allow_list())
    except InvalidJob as exc:
        # The target URL rule names a job's field; a channel's is its url.
        raise InvalidChannel(str(exc).replace("target.url", "url"), field="url") from None
    return url


def check_email(address: object) -> str:
    if not isinstance(address, str) or len(address) > MAX_ADDRESS \
            or not _EMAIL.fullmatch(address):
        raise InvalidChannel(f"expected address to be an e-mail address like "
                             f"ops@bank.example, got {address!r}", field="address")
    return address


def check_channel(kind: object, address: object) -> tuple[ChannelKind, str]:
    """(kind, address) checked; an InvalidChannel naming the field otherwise."""
    checked = check_kind(kind)
    if checked == "webhook":
        return checked, check_webhook_url(address)
    return checked, check_email(address)


def add_channel(conn: psycopg.Connection[Any], tenant_id: int, kind: object,
                address: object) -> tuple[Channel, bool]:
    """(the channel, True) when added; (the one already there, False) for the same kind and
    address again. At most MAX_CHANNELS a tenant."""
    checked, where = check_channel(kind, address)
    params = {"tenant_id": tenant_id, "kind": checked, "address": where}
    with conn.transaction(), conn.cursor(row_factory=class_row(Channel)) as cur:
        found = cur.execute(Q.find_notice_channel, params).fetchone()
        if found is not None:
            return found, False
        (count,) = conn.execute(Q.count_notice_channels, params).fetchone() or (0,)
        if count >= MAX_CHANNELS:
            raise InvalidChannel(f"a tenant has at most {MAX_CHANNELS} notification "
                                 "channels; remove one first", field="channels")
        made = cur.execute(Q.add_notice_channel, params).fetchone()
        if made is None:        # added by another request since find_notice_channel
            again = cur.execute(Q.find_notice_channel, params).fetchone()
            assert again is not None
            return again, False
        return made, True


def get_channel(conn: psycopg.Connection[Any], tenant_id: int, channel_id: int) -> Channel:
    with conn.cursor(row_factory=class_row(Channel)) as cur:
        found = cur.execute(Q.get_notice_channel,
                            {"id": channel_id, "tenant_id": tenant_id}).fetchone()
    if found is None:
        raise ChannelNotFound(f"no notification channel {channel_id}")
    return found


def list_channels(conn: psycopg.Connection[Any], tenant_id: int) -> list[Channel]:
    with conn.cursor(row_factory=class_row(Channel)) as cur:
        return cur.execute(Q.list_notice_channels, {"tenant_id": tenant_id}).fetchall()


def remove_channel(conn: psycopg.Connection[Any], tenant_id: int, channel_id: int) -> None:
    """Remove a channel, its waiting events and its messages; ChannelNotFound if the tenant
    has no such channel."""
    if conn.execute(Q.delete_notice_channel,
                    {"id": channel_id, "tenant_id": tenant_id}).fetchone() is None:
        raise ChannelNotFound(f"no notification channel {channel_id}")
