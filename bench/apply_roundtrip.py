"""export -> apply on N jobs of the reminder mix: how long each takes, the peak memory of
each process, and that the apply changes nothing (docs/records/performance-runs.md).

    python bench/apply_roundtrip.py --jobs 100000

The jobs are written with ``create_jobs`` (the import's writer), every field kind across
five zones; then ``crondepot export`` and ``crondepot apply --prune`` run as their own
processes under /usr/bin/time (wall seconds, max RSS).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import DEFAULT_ADMIN_URL, fresh_database

ZONES = ["Asia/Kolkata", "America/New_York", "Europe/London", "Australia/Sydney", "UTC"]
CRONS = ["0 9 5 * *", "30 1 * * *", "0 9 L * *", "H 10 * * 1-5", "0 9 * * 1#1"]


def reminder(i: int) -> dict[str, Any]:
    """One job of the mix (tests/integration/test_apply.py draws the same kinds)."""
    d: dict[str, Any] = {"key": f"bank{i % 97}:{i}:emi", "cron": CRONS[i % 5],
                         "tz": ZONES[i % 5], "payload": {"loan": i, "template": "emi"},
                         "target": {"type": "python", "handler": "sms.send"},
                         "labels": {"deploy": "reminders"}}
    if i % 3 == 0:
        d["misfire"] = {"policy": "skip_after", "seconds": 3600}
    if i % 4 == 0:
        d["spread"] = {"seconds": 900, "key": f"bank{i % 7}"}
    if i % 5 == 0:
        d["retry"] = {"max_attempts": 5, "base_s": 30.5, "cap_s": 600}
    if i % 6 == 0:
        d.update(start_at="2026-01-01T00:00:00Z", end_at="2099-01-01T00:00:00+05:30",
                 max_runs=24)
    if i % 7 == 0:
        d.update(priority="bulk", catchup="latest", max_catchup=3)
        d["labels"] = {**d["labels"], "bank": str(i % 9), "kind": "emi"}
    if i % 11 == 0:
        d["target"] = {"type": "http", "url": "https://sms.example.com/send", "timeout_s": 10}
    if i % 13 == 0:
        d.update(misfire={"policy": "skip_after_local_time", "until": "18:00"},
                 alert_after_failures=4, pause_after_failures=9, lease_seconds=120)
    if i % 17 == 0:
        for name in ("cron", "start_at", "end_at", "max_runs"):
            d.pop(name, None)
        d["at"] = "2099-06-01T09:00:00+05:30"
    return d


def timed(*args: str) -> tuple[float, int, str]:
    """(wall seconds, max RSS in MB, stdout) of ``crondepot ARGS``."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", sys.executable, "-m", "crondepot",
                          *args], capture_output=True, text=True, check=True)
    wall, rss = out.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss) // 1024, out.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    args = parser.parse_args()
    from crondepot.db import connect
    from crondepot.job import JobSpec, create_jobs
    from crondepot.tenancy.grants import grant
    from crondepot.tenancy.tenants import create_tenant

    with fresh_database(args.admin_url, "crondepot_bench_apply") as url, \
            tempfile.TemporaryDirectory() as folder:
        with connect(url) as conn:
            tenant = create_tenant(conn, "bank42").id
            grant(conn, tenant, handlers=["sms.send"])
            started = time.perf_counter()
            for first in range(0, args.jobs, 10_000):
                specs = [JobSpec.from_document(reminder(i))
                         for i in range(first, min(first + 10_000, args.jobs))]
                create_jobs(conn, tenant, specs)
            seeded = time.perf_counter() - started
        results: dict[str, Any] = {"jobs": args.jobs, "seed_s": round(seeded, 1),
                                   "cpus": os.cpu_count()}
        for form in ("yaml", "json"):
            file = Path(folder) / f"reminders.{form}"
            wall, rss, _ = timed("export", "--db", url, "--tenant", "bank42", "--scope",
                                 "deploy=reminders", "--format", form, "-o", str(file))
            results[f"export_{form}"] = {"s": wall, "max_rss_mb": rss,
                                         "file_mb": round(file.stat().st_size / 2**20, 1)}
            wall, rss, out = timed("apply", str(file), "--db", url, "--tenant", "bank42",
                                   "--scope", "deploy=reminders", "--prune", "--json")
            counts = json.loads(out)["counts"]
            assert counts["changes"] == 0 and counts["unchanged"] == args.jobs, counts
            results[f"apply_{form}"] = {"s": wall, "max_rss_mb": rss, "changes": 0}
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
