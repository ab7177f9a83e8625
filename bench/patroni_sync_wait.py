"""A commit waiting on an old primary when its Patroni comes back: success or not?

Starts a Patroni cluster (bench/patroni_cluster.py) with synchronous replication, kills the
leader's Patroni with kill -9 (its postmaster keeps running), waits for the standby's
promotion, starts a commit on the old primary (it waits: no standby confirms it), then
starts Patroni again as a supervisor would. Prints what the waiting commit got and whether
its row is on the new primary. Once with ``synchronous_mode_strict: false`` and once with
``true`` (docs/availability.md).

    python bench/patroni_sync_wait.py
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import psycopg

import patroni_cluster


def trial(strict: bool) -> str:
    with patroni_cluster.cluster(synchronous=True, strict=strict) as cluster:
        old = cluster.leader()
        assert old is not None
        new = next(n for n in cluster.nodes if n is not old)
        old_url = f"postgresql://postgres@127.0.0.1:{old.pg_port}/postgres"
        new_url = f"postgresql://postgres@127.0.0.1:{new.pg_port}/postgres"
        with psycopg.connect(old_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE probe (x int)")
        cluster.kill_patroni(old)
        promoted = cluster.wait_for(lambda: new.role() == "primary", 60, "the promotion")
        outcome: dict[str, str] = {}

        def commit() -> None:
            try:
                with psycopg.connect(old_url, autocommit=True) as conn:
                    conn.execute("INSERT INTO probe VALUES (1)")
                outcome["answer"] = "success"
            except psycopg.Error as exc:
                outcome["answer"] = f"error ({type(exc).__name__})"
            outcome["at"] = f"{time.monotonic() - restarted:.1f} s after Patroni's restart"

        restarted = float("inf")
        waiter = threading.Thread(target=commit)
        waiter.start()
        time.sleep(3)
        waiting = "still waiting after 3 s" if "answer" not in outcome else "answered at once"
        restarted = time.monotonic()
        cluster.start_patroni(old)
        waiter.join(60)
        time.sleep(10)       # the old primary rejoins as a standby
        with psycopg.connect(new_url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM probe").fetchone()
        kept = bool(row and row[0])
        return (f"strict={strict}: standby promoted {promoted:.1f} s after the kill; the "
                f"commit on the old primary was {waiting}, then got "
                f"{outcome.get('answer', 'nothing in 60 s')} {outcome.get('at', '')}; "
                f"its row on the new primary: {'yes' if kept else 'no'}")


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    missing = patroni_cluster.available()
    if missing:
        print(f"needs {missing}", file=sys.stderr)
        return 2
    for strict in (False, True):
        print(trial(strict), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
