"""A network partition on loopback: packets to and from one port dropped, not refused.

A server that is down refuses connections and the client learns it at once; a partitioned
one is silent, and the client learns it only from its own timeouts. ``iptables`` DROP rules
on the loopback interface give the silent kind for one port (a private cluster's, never the
machine's shared PostgreSQL). Needs root and iptables (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager


def available() -> bool:
    return os.geteuid() == 0 and shutil.which("iptables") is not None


def _rules(port: int) -> list[list[str]]:
    return [["INPUT", "-i", "lo", "-p", "tcp", "--dport", str(port), "-j", "DROP"],
            ["INPUT", "-i", "lo", "-p", "tcp", "--sport", str(port), "-j", "DROP"]]


@contextmanager
def partitioned(port: int) -> Iterator[None]:
    """Drop every packet to and from ``port`` while inside; established connections stay open
    (no RST, no FIN) and see nothing."""
    added: list[list[str]] = []
    try:
        for rule in _rules(port):
            subprocess.run(["iptables", "-I", *rule], check=True, timeout=30)
            added.append(rule)
        yield
    finally:
        for rule in added:
            subprocess.run(["iptables", "-D", *rule], check=False, timeout=30)
