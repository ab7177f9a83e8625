"""A partitioned database: every process notices within its bounds, none hangs on TCP.

The primary does not go down; packets to and from it are dropped (tests/support/partition.py),
as when a network link or a host's NIC fails. A refused connection is learnt at once; a
silent one only from the client's own timeouts, which db/connect.py sets on every URL
(CONNECTION_DEFAULTS). Without them a statement sent into the partition waits on the
kernel's retransmissions for about 15 minutes: a scheduler stops ticking and a worker keeps
thinking it holds leases that PostgreSQL has long given to others.
"""

from __future__ import annotations

import contextlib
import threading
import time

import httpx
import psycopg
import pytest

from crondepot.db import connect, migrate
from crondepot_testkit.cluster import PrivateCluster
from crondepot_testkit.processes import Proc, free_port, wait_until
from tests.support import partition

pytestmark = pytest.mark.skipif(not partition.available(),
                                reason="a partition needs root and iptables (.ci/run installs it)")

# tcp_user_timeout (10 s) plus the time to the process's next statement and some room; the
# worker's slots also wait for a pooled connection (psycopg_pool's 30 s: docs/availability.md).
STALL_BOUND_S = {"api": 20.0, "scheduler": 20.0, "worker": 45.0}


def test_a_statement_sent_into_a_partition_fails_within_the_bound(
        cluster: PrivateCluster) -> None:
    bounded = connect(cluster.url)
    plain = psycopg.connect(cluster.url, autocommit=True)    # libpq's defaults: no bound
    bounded.execute("SELECT 1")
    plain.execute("SELECT 1")
    plain_done = threading.Event()
    waiter: threading.Thread | None = None

    def plain_statement() -> None:
        with contextlib.suppress(psycopg.Error):
            plain.execute("SELECT 1")
        plain_done.set()

    try:
        with partition.partitioned(cluster.port):
            waiter = threading.Thread(target=plain_statement, daemon=True)
            waiter.start()
            began = time.monotonic()
            with pytest.raises(psycopg.OperationalError):
                bounded.execute("SELECT 1")
            failed_after = time.monotonic() - began
            # The same statement on an unbounded connection is still waiting: the bound is
            # what ended the first one, not the partition.
            assert not plain_done.is_set()
            began = time.monotonic()
            with pytest.raises(psycopg.OperationalError):
                connect(cluster.url)
            connect_failed_after = time.monotonic() - began
        assert failed_after < 15, failed_after
        assert connect_failed_after < 8, connect_failed_after
        with connect(cluster.url) as again:      # healed: a new connection works at once
            assert again.execute("SELECT 1").fetchone() == (1,)
    finally:
        bounded.close()
        # The waiter's statement is still inside libpq on `plain` until the healed link
        # delivers its answer (the next TCP retransmission). Closing the connection under it
        # frees what that thread is using and crashed the test process once (CI, PG 15): wait
        # for the waiter first, and leave the connection to the process's exit if it never
        # returns.
        if waiter is not None:
            waiter.join(timeout=60)
        if waiter is None or not waiter.is_alive():
            plain.close()


def _noticed(proc: Proc) -> bool:
    return any(str(line.get("msg", "")).startswith("database unavailable")
               for line in proc.lines())


@pytest.mark.slow
def test_scheduler_worker_and_api_notice_a_partition_and_recover(
        cluster: PrivateCluster) -> None:
    with connect(cluster.url) as conn:
        migrate(conn)
    port = free_port()
    scheduler = Proc("scheduler", "--db", cluster.url, "--tick", "1s", "--name", "s1")
    worker = Proc("worker", "--db", cluster.url, "--concurrency", "6")
    api = Proc("api", "--db", cluster.url, "--port", str(port))
    procs = [scheduler, worker, api]
    readyz = f"http://127.0.0.1:{port}/readyz"

    def ready() -> bool:
        try:
            return httpx.get(readyz, timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, timeout=60, message="the API")
        wait_until(lambda: all(p.lines() for p in procs[:2]), timeout=30,
                   message="scheduler and worker logs")
        time.sleep(3)     # let every pool lend, probe and idle once
        stalls: dict[str, float] = {}
        answers: list[int] = []

        def ask_api() -> None:
            answers.append(httpx.get(readyz, timeout=120).status_code)
            stalls["api"] = time.monotonic() - began

        with partition.partitioned(cluster.port):
            began = time.monotonic()
            asking = threading.Thread(target=ask_api)
            asking.start()
            while time.monotonic() - began < 60 and len(stalls) < 3:
                for name, proc in (("scheduler", scheduler), ("worker", worker)):
                    if name not in stalls and _noticed(proc):
                        stalls[name] = time.monotonic() - began
                time.sleep(0.2)
            asking.join(timeout=60)
        assert answers == [503]
        healed = time.monotonic()
        wait_until(ready, timeout=60, interval=0.2, message="the API after the partition")
        recovered = time.monotonic() - healed
        print(f"stall before noticing: {stalls}; API ready again {recovered:.1f} s after")
        assert all(p.popen.poll() is None for p in procs), "every process is still running"
        assert set(stalls) == {"api", "scheduler", "worker"}, stalls
        for name, seconds in stalls.items():
            assert seconds < STALL_BOUND_S[name], (name, seconds)
        assert recovered < 15
    finally:
        for proc in procs:
            proc.stop()
