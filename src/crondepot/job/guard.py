"""The address guard: which network addresses a webhook call may connect to.

The rule, ``AddressGuard``. Loopback, private, link-local, CGNAT, unspecified, multicast,
  reserved and otherwise non-global addresses are refused unless allow-listed
  (``CRONDEPOT_TARGET_ALLOWLIST``: CIDRs or host names). IPv6 forms that embed an IPv4
  address (IPv4-mapped, 6to4, NAT64) are judged by the IPv4 address they carry, so
  ``::ffff:127.0.0.1`` is loopback.

Its enforcement is ``GuardedBackend`` (worker/targets/backend.py), kept apart so that the
job validator, which applies the same rule to URLs, loads no HTTP client.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from crondepot.base.errors import PermanentError

ALLOWLIST_ENV = "CRONDEPOT_TARGET_ALLOWLIST"

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network

# Takes a host and port, returns the IP addresses (as text) to try, in order.
Resolver = Callable[[str, int], Sequence[str]]

_CGNAT = IPv4Network("100.64.0.0/10")
_NAT64 = IPv6Network("64:ff9b::/96")
# A host-name label; "_" is tolerated because container service names use it.
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
# A label that reads as a number: decimal (octal with a leading 0 included) or 0x and hex.
_NUMBER_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")


class TargetRefused(PermanentError):
    """A target address the guard refuses; ``host`` and ``address`` say which."""

    def __init__(self, message: str, *, host: str, address: str) -> None:
        super().__init__(message)
        self.host = host
        self.address = address

    def for_tenant(self) -> TargetRefused:
        """This refusal in words a tenant may read (a run's ``last_error``).

        For a host name, the address it resolved to, and why that address is refused, stay
        in the operator's log: told them, a tenant could map the internal network by naming
        hosts ("db.internal resolves to 10.0.4.7, private"). An address the tenant wrote
        itself is said back as it is."""
        if looks_like_address(_normal_host(self.host)):
            return self
        return TargetRefused(
            f"target host {self.host} resolves to an address webhooks may not call; the "
            f"operator can allow it with {ALLOWLIST_ENV}", host=self.host, address=self.address)


class AddressGuard:
    """Decides whether a resolved address may be connected to.

    ``allow`` entries are CIDRs (``10.0.0.0/8``, ``::1/128``, a bare address means a single
    host) or host names (``localhost``, ``gateway.internal``). A host name entry trusts
    whatever that name resolves to, so list names only where you control their DNS.
    """

    def __init__(self, allow: Sequence[str] = ()) -> None:
        if isinstance(allow, str):  # a lone string would be read one character at a time
            raise TypeError(f"allow: expected a sequence of entries, got the string {allow!r}")
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in allow:
            parsed = _parse_entry(entry)
            if isinstance(parsed, str):
                hosts.add(parsed)
            else:
                networks.append(parsed)
        self._networks = tuple(networks)
        self._hosts = frozenset(hosts)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AddressGuard:
        """The guard configured by ``CRONDEPOT_TARGET_ALLOWLIST`` (comma-separated)."""
        text = (os.environ if environ is None else environ).get(ALLOWLIST_ENV, "")
        entries = [entry.strip() for entry in text.split(",") if entry.strip()]
        try:
            return cls(entries)
        except ValueError as exc:
            raise ValueError(f"{ALLOWLIST_ENV}: {exc}") from None

    def check(self, host: str, address: str) -> None:
        """Raise ``TargetRefused`` unless ``host`` may be reached at ``address``."""
        ip = _parse_address(host, address)
        if self._allows(host, ip):
            return
        reason = refusal_reason(ip)
        if reason is not None:
            raise TargetRefused(
                f"target address {address} ({host}) is {reason}; "
                f"allow it with {ALLOWLIST_ENV}",
                host=host,
                address=address,
            )

    def _allows(self, host: str, ip: IPAddress) -> bool:
        if _normal_host(host) in self._hosts:
            return True
        embedded = _embedded_ipv4(ip)
        candidates = (ip,) if embedded is None else (ip, embedded[1])
        return any(c in network for c in candidates for network in self._networks)

    def __repr__(self) -> str:
        entries = [str(n) for n in self._networks] + sorted(self._hosts)
        return f"AddressGuard(allow={entries!r})"


def refusal_reason(ip: IPAddress) -> str | None:
    """Why ``ip`` is refused by default (``"loopback"``, …), or None for a public address."""
    embedded = _embedded_ipv4(ip)
    if embedded is not None:
        form, ipv4 = embedded
        reason = refusal_reason(ipv4)
        return None if reason is None else f"{reason} ({form} {ipv4})"
    return _plain_reason(ip)


def _plain_reason(ip: IPAddress) -> str | None:
    # Order matters only for the message: the most specific name first.
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, IPv4Address) and ip in _CGNAT:
        return f"in the CGNAT shared range {_CGNAT}"
    if isinstance(ip, IPv6Address) and ip.is_site_local:
        return "site-local"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "not globally routable"
    return None


def _embedded_ipv4(ip: IPAddress) -> tuple[str, IPv4Address] | None:
    """The IPv4 address an IPv6 form carries, and the form's name."""
    if isinstance(ip, IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip in _NAT64:
        # NAT64 translates to the IPv4 address in the last 32 bits; ipaddress has no
        # property for it.
        return "NAT64", IPv4Address(int(ip) & 0xFFFF_FFFF)
    return None


def _parse_address(host: str, address: str) -> IPAddress:
    try:
        return ipaddress.ip_address(address)
    except ValueError:
        raise TargetRefused(
            f"target address {address!r} ({host}) is not an IP address", host=host, address=address
        ) from None


def _parse_entry(entry: str) -> IPNetwork | str:
    text = entry.strip()
    if looks_like_address(text):
        return _parse_network(entry, text)
    name = _normal_host(text)
    if not is_host_name(name):
        raise ValueError(
            f"allow-list entry {entry!r} is neither a CIDR (10.0.0.0/8, ::1/128) "
            "nor a host name (gateway.internal)"
        )
    return name


def looks_like_address(text: str) -> bool:
    """Whether ``text`` is meant as an address (or CIDR), not a host name. A host name's last
    label is never all digits (RFC 3696), so "300.1.1.1" is a mistyped address, not a name;
    nor, by the WHATWG URL standard's "ends in a number" rule, ``0x`` and hex digits, which
    resolvers (glibc's inet_aton) read as a number too: ``0x7f000001``, ``127.0.0.0x1``."""
    last = text.rsplit(".", 1)[-1]
    return "/" in text or ":" in text or _NUMBER_LABEL.fullmatch(last) is not None


def is_host_name(host: str) -> bool:
    """Whether ``host`` (ASCII, IDNA-encoded) is a host name: labels of letters, digits, '-'
    and '_', at most 63 characters each, 253 in all (a final dot allowed)."""
    name = _normal_host(host)
    return bool(name) and len(name) <= 253 and all(_LABEL.fullmatch(p) for p in name.split("."))


def _parse_network(entry: str, text: str) -> IPNetwork:
    try:
        return ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        hint = ""
        with contextlib.suppress(ValueError):
            hint = f" (did you mean {ipaddress.ip_network(text, strict=False)}?)"
        raise ValueError(f"allow-list entry {entry!r} is not a valid CIDR: {exc}{hint}") from None


def _normal_host(host: str) -> str:
    return host.strip().rstrip(".").lower()


def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))
