"""Multi-host URLs and pools against real PostgreSQL: a host that stops answering costs a
handshake, not ``connect_timeout``; a pool drops its idle connections when they broke or
the primary moved, and tries again every second (db/hosts.py, db/connect.py ``Pool``).

Two real servers stand for a primary and its successor: a private cluster (the one cut
off, by dropping its packets: tests/support/partition.py, root and iptables) and the
machine's PostgreSQL. Both take writes, so the URL's ``target_session_attrs=read-write``
accepts either: what is tested is the order and what each attempt costs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from crondepot.db import bounded, connect, idle_check
from crondepot.db.connect import Pool
from crondepot.db.hosts import HANDSHAKE_SECONDS, HOSTS, Host, ordered_hosts
from crondepot_testkit.cluster import PrivateCluster
from crondepot_testkit.processes import wait_until
from tests.support import partition

needs_partition = pytest.mark.skipif(
    not partition.available(), reason="a partition needs root and iptables (.ci/run installs it)")

# Long, so that waiting it out on the silent host could not pass for skipping it.
CONNECT_TIMEOUT_S = 30


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    HOSTS.forget()
    yield
    HOSTS.forget()


def two_hosts(cluster: PrivateCluster, admin_url: str) -> str:
    """The private cluster first (the primary of the moment), the shared server second."""
    shared = conninfo_to_dict(admin_url)
    return (f"host=127.0.0.1,{shared.get('host') or '127.0.0.1'} "
            f"port={cluster.port},{shared.get('port') or 5432} user=postgres dbname=postgres "
            f"target_session_attrs=read-write connect_timeout={CONNECT_TIMEOUT_S}")


def port_of(conn: psycopg.Connection[Any]) -> int:
    return int(conn.info.port)


@needs_partition
def test_a_partitioned_primary_costs_a_handshake_then_is_tried_last(
        cluster: PrivateCluster, admin_url: str) -> None:
    url = two_hosts(cluster, admin_url)
    with connect(url) as conn:
        assert port_of(conn) == cluster.port                  # the URL's first host
    with partition.partitioned(cluster.port):
        began = time.monotonic()
        with connect(url) as conn:
            took = time.monotonic() - began
            assert port_of(conn) != cluster.port
        # libpq alone would have waited connect_timeout on the silent first host
        assert took < CONNECT_TIMEOUT_S / 2
        planned = ordered_hosts(url)
        assert planned is not None
        assert int(planned[1][-1].port) == cluster.port         # now tried last
        with connect(url) as conn:
            assert port_of(conn) != cluster.port
    # healed: it answers a handshake again (no longer silent), but the host that gave the
    # last session keeps being tried first
    silent = Host("127.0.0.1", "", str(cluster.port))
    wait_until(lambda: HOSTS.answers(silent), timeout=10 * HANDSHAKE_SECONDS,
               message="the healed host to answer a handshake")
    with connect(url) as conn:
        assert port_of(conn) != cluster.port


@needs_partition
def test_a_pool_leaves_the_old_primary_when_the_process_finds_the_new_one(
        cluster: PrivateCluster, admin_url: str) -> None:
    url = two_hosts(cluster, admin_url)
    pool = Pool(bounded(url), min_size=2, max_size=2, kwargs={"autocommit": True},
                **idle_check(0.0), open=False)
    pool.open(wait=True, timeout=30)
    try:
        with pool.connection() as conn:
            assert port_of(conn) == cluster.port
        with partition.partitioned(cluster.port):
            # Another part of the process reaches the new primary first (the worker's
            # LISTEN connection does): the pool drops its connections to the old one, so
            # none is handed out to wait on the partition (tcp_user_timeout, 10 s) first.
            with connect(url) as conn:
                assert port_of(conn) != cluster.port
            with pool.connection(timeout=8.0) as conn:
                assert port_of(conn) != cluster.port
    finally:
        pool.close()


def test_a_pool_drops_its_idle_connections_when_one_fails_its_check(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    pool = Pool(bounded(db_url), min_size=5, max_size=5, kwargs={"autocommit": True},
                **idle_check(0.0), open=False)
    pool.open(wait=True, timeout=30)
    try:
        held = [pool.getconn() for _ in range(5)]
        old = {c.info.backend_pid for c in held}
        for c in held:
            pool.putconn(c)
        # A restart ends every session at once.
        conn.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid",
                     [sorted(old)])
        # The others are dropped with the first that fails its check, and new connections
        # come at once; psycopg_pool alone checks each dead one in turn, pausing 0, 1, 2,
        # then 4 s before the next check (past this timeout).
        with pool.connection(timeout=4.0) as first:
            assert first.info.backend_pid not in old
        again = [pool.getconn(timeout=4.0) for _ in range(4)]
        assert not {c.info.backend_pid for c in again} & old
        for c in again:
            pool.putconn(c)
    finally:
        pool.close()


def test_a_pool_tries_again_every_second_while_its_database_is_down(
        cluster: PrivateCluster) -> None:
    pool = Pool(bounded(cluster.url), min_size=1, max_size=1, kwargs={"autocommit": True},
                **idle_check(0.0), open=False)
    pool.open(wait=True, timeout=30)
    try:
        cluster.stop("immediate")
        # its check fails: the pool knows
        with pytest.raises(psycopg.OperationalError), pool.connection(timeout=1.0):
            pass
        errors = pool.get_stats().get("connections_errors", 0)
        # psycopg_pool alone waits 1, 2, 4, 8, 16 s between attempts: 31 s for six failed
        # ones; capped at RECONNECT_SECONDS, about six.
        wait_until(lambda: pool.get_stats().get("connections_errors", 0) >= errors + 6,
                   timeout=20, interval=0.2, message="six failed attempts to reconnect")
        cluster.start()
        with pool.connection(timeout=10.0) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()
