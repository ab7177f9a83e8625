"""Rolling upgrade, run for real: the previous release and this tree side by side under load.

What an operator does (docs/architecture.md, "Changing the schema"; docs/operations.md,
"Upgrading"), with real processes and a counting gateway:

1. the previous release (``--from REV``, default: the newest ``v*`` tag) is unpacked from
   git into a folder of its own and run from there (its source first on ``PYTHONPATH``; the
   dependencies are the venv's, as a release that pins the same ones would have);
2. it migrates a fresh database, imports ``--jobs`` every-minute jobs (spread over 50 s of
   the minute; a cron, which every release reads; an HTTP target that drops repeated
   idempotency keys, so a repeat is counted, not sent twice) and runs
   2 schedulers and 2 workers;
3. under that load, this tree's ``crondepot migrate`` runs (the expand step), then each
   process is replaced by this tree's, one at a time, SIGTERM then start, a few seconds
   apart: scheduler-1, worker-1, scheduler-2, worker-2;
4. after a while on the new release alone the schedulers stop, the workers drain the queue,
   and this tree's ``crondepot verify`` checks the window: every fire has exactly one row.

It prints: fires expected and their rows (verify), runs by status, calls and effects at the
gateway, duplicate effects, repeated calls, the previous release's errors logged after the
migrate (an expand that was not one shows here first), and the longest gap between two
deliveries across the replacements. Exit 1 on a missed fire, a duplicate effect, a run not
final, or an error logged by an old process after the migrate.

    python bench/rolling_upgrade.py                 # from the newest v* tag, 300 jobs
    python bench/rolling_upgrade.py --from "$(cat .ci/previous-release)"    # as CI does

Uses the machine's PostgreSQL (``--admin-url``, default as bench/common.py) and a database of
its own, dropped afterwards. Processes connect as the URL's user (a superuser here, so
row-level security does not apply; the suite tests it as the runtime role).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path

from psycopg.conninfo import make_conninfo

from common import DEFAULT_ADMIN_URL, admin_connect
from crondepot.job.guard import ALLOWLIST_ENV
from crondepot_testkit.processes import Proc, wait_until
from gateway import Gateway

ROOT = Path(__file__).resolve().parents[1]
DATABASE = "crondepot_rolling_upgrade"
ROLES = ("scheduler-1", "worker-1", "scheduler-2", "worker-2")   # replaced in this order


def release_commit() -> str | None:
    """The newest release tag (``v*``) reachable from HEAD, or None."""
    done = subprocess.run(["git", "describe", "--tags", "--abbrev=0", "--match", "v*"],
                          cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or None


def unpack(rev: str, into: Path) -> Path:
    """The source of ``rev`` (src/ only), unpacked under ``into``; its src folder."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "src"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


class Release:
    """One release's processes: ``python -m crondepot`` with its source first."""

    def __init__(self, name: str, src: Path, base_env: dict[str, str]) -> None:
        self.name = name
        path = os.pathsep.join([str(src), str(ROOT / "testkit")])
        self.env = {**base_env, "PYTHONPATH": path}

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "crondepot", *args], env=self.env,
                              capture_output=True, text=True, timeout=300)
        if check and done.returncode != 0:
            raise SystemExit(f"{self.name}: crondepot {' '.join(args)} exited "
                             f"{done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def start(self, *args: str) -> Proc:
        return Proc(*args, env=self.env)

    def origin(self) -> str:
        """Where this release's crondepot is imported from (to prove the set-up)."""
        return subprocess.run(
            [sys.executable, "-c", "import crondepot; print(crondepot.__file__)"],
            env=self.env, capture_output=True, text=True, check=True).stdout.strip()


def jobs_file(folder: Path, count: int, url: str) -> Path:
    path = folder / "jobs.ndjson"
    with path.open("w") as out:
        for i in range(count):
            out.write(json.dumps({
                "key": f"upgrade-{i}", "cron": "* * * * *", "spread": {"seconds": 50},
                "tz": "UTC",
                "target": {"type": "http", "url": url, "timeout_s": 5, "dedupes": True},
                "payload": {"n": i}, "misfire": {"policy": "run_late"}, "catchup": "all",
                "lease_seconds": 15}) + "\n")
    return path


def process_args(role: str, url: str, release: str) -> list[str]:
    kind = role.split("-")[0]
    extra = (["--tick", "1s"] if kind == "scheduler"
             else ["--concurrency", "32", "--retention-days", "0", "--grace", "10"])
    return [kind, "--db", url, "--name", f"{release}-{role}", *extra]


def errors_after(proc: Proc, since: float) -> list[str]:
    """The error lines ``proc`` logged after ``since`` (epoch seconds)."""
    found = []
    for entry in proc.lines():
        if entry.get("level") not in ("error", "critical"):
            continue
        ts = entry.get("ts")
        if ts and datetime.fromisoformat(ts).timestamp() < since:
            continue
        found.append(str(entry.get("msg", entry))[:300])
    return found


def longest_gap(arrivals: Sequence[float], start: float, end: float) -> float:
    moments = sorted(t for t in arrivals if start <= t <= end)
    return max((b - a for a, b in itertools.pairwise(moments)), default=0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="rev", default=None,
                        help="the previous release: a commit or tag (default: the newest "
                             "v* tag)")
    parser.add_argument("--jobs", type=int, default=300, help="every-minute jobs (300)")
    parser.add_argument("--step", type=float, default=8.0,
                        help="seconds between two replacements (8)")
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    args = parser.parse_args(argv)
    rev = args.rev or release_commit()
    if rev is None:
        parser.error("no release tag (v*) to start from: name the previous release with "
                     "--from REV")
    if subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=ROOT,
                      capture_output=True).returncode != 0:
        # A shallow clone lacks the previous release: say so rather than fail the build
        # for the way it was cloned.
        print(f"rolling upgrade: SKIPPED, commit {rev} is not in this clone "
              "(shallow? git fetch --unshallow)")
        return 0
    rev_name = subprocess.run(["git", "log", "-n", "1", "--format=%h %s", rev], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()

    with admin_connect(args.admin_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DATABASE}"')
    url = make_conninfo(args.admin_url, dbname=DATABASE)
    gateway = Gateway(dedupe=True).start()
    base_env = {**os.environ, ALLOWLIST_ENV: "127.0.0.1/32", "PYTHONUNBUFFERED": "1",
                "CRONDEPOT_LOG_FORMAT": "json"}
    for name in ("CRONDEPOT_DATABASE_URL", "CRONDEPOT_DATA_DIR", "CRONDEPOT_TENANT"):
        base_env.pop(name, None)
    procs: dict[str, Proc] = {}
    retired: list[tuple[str, Proc]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="crondepot-upgrade-") as tmp:
            folder = Path(tmp)
            old = Release(f"previous ({rev_name})", unpack(rev, folder / "old"), base_env)
            new = Release("this tree", ROOT / "src", base_env)
            old_origin = old.origin()
            if not old_origin.startswith(str(folder)):
                raise SystemExit(f"the previous release imports {old_origin}, not its own "
                                 "copy: the set-up would test one release against itself")
            old.run("migrate", "--db", url)
            old.run("tenants", "create", "--db", url, "bank42", "--json")
            old.run("import", "--db", url, "--tenant", "bank42",
                    str(jobs_file(folder, args.jobs, gateway.url)))
            started = time.time()
            for role in ROLES:
                procs[role] = old.start(*process_args(role, url, "old"))
            wait_until(lambda: len(gateway.requests) >= args.jobs, timeout=120,
                       message="the previous release delivering every job once")
            time.sleep(args.step)

            migrate_at = time.time()
            migrated = new.run("migrate", "--db", url, "--json", check=False)
            migrate_seconds = time.time() - migrate_at
            if migrated.returncode != 0:
                raise SystemExit(f"this tree's migrate failed under load:\n{migrated.stdout}"
                                 f"\n{migrated.stderr}")
            time.sleep(args.step)
            swaps: list[tuple[str, float]] = []
            for role in ROLES:
                retiring = procs[role]
                swap_at = time.time()
                code = retiring.stop(timeout=60)
                retired.append((role, retiring))
                procs[role] = new.start(*process_args(role, url, "new"))
                swaps.append((role, swap_at))
                if code not in (0, -signal.SIGTERM):
                    print(f"note: old {role} exited {code} on SIGTERM")
                time.sleep(args.step)
            new_only_at = time.time()
            time.sleep(3 * args.step)

            # Stop the fires, then let the workers finish what is queued.
            stop_fires = time.time()
            for role in ("scheduler-1", "scheduler-2"):
                procs[role].stop(timeout=60)
            from crondepot.db import connect

            def settled() -> bool:
                with connect(url) as conn:
                    row = conn.execute("SELECT count(*) FROM runs WHERE status IN "
                                       "('queued', 'running')").fetchone()
                return row is not None and row[0] == 0

            wait_until(settled, timeout=120, interval=0.5, message="the queue drained")
            for role in ("worker-1", "worker-2"):
                procs[role].stop(timeout=60)
            since = datetime.fromtimestamp(started + 10, UTC).isoformat()
            # A fire is owed its row once its spread due time has passed: the last minute
            # checked is the one wholly due before the schedulers stopped.
            until = datetime.fromtimestamp(stop_fires - 65, UTC).isoformat()
            verified = new.run("verify", "--db", url, "--since", since, "--until", until,
                               "--json", check=False)
            report = json.loads(verified.stdout)
            with connect(url) as conn:
                by_status = dict(conn.execute(
                    "SELECT status, count(*) FROM runs GROUP BY status").fetchall())
                schema = conn.execute("SELECT max(version) FROM crondepot_schema_migrations"
                                      ).fetchone()
            stats = gateway.stats()
            arrivals = [r.arrived for r in gateway.requests if r.status == 200]
            gap = longest_gap(arrivals, migrate_at, new_only_at)
            quiet_gap = longest_gap(arrivals, started + 10, migrate_at)
            old_errors = {role: errors_after(proc, migrate_at) for role, proc in retired}
            old_errors = {k: v for k, v in old_errors.items() if v}
            not_final = sum(n for s, n in by_status.items() if s in ("queued", "running"))

            print(f"rolling upgrade: {rev_name} -> this tree ({args.jobs} every-minute "
                  f"jobs spread over 50 s, 2 schedulers + 2 workers, replaced one at a time "
                  f"{args.step:g} s apart)")
            print(f"  previous release imported from {old_origin}")
            print(f"  migrate under load: {migrate_seconds:.1f} s, schema now "
                  f"{schema[0] if schema else '?'}")
            print("  replacements (s after the migrate): " + ", ".join(
                f"{role} {at - migrate_at:.1f}" for role, at in swaps))
            print(f"  verify {since} .. {until}: fires {report['fires']}, pending "
                  f"{report['pending']}, unaccounted "
                  f"{report['unaccounted_count']}, duplicated {report['duplicated_count']}, "
                  f"clean {report['clean']}")
            print(f"  runs by status: {dict(sorted(by_status.items()))}")
            print(f"  gateway: {stats['requests']} calls, {stats['keys_delivered']} runs "
                  f"delivered, duplicate effects {stats['duplicate_effects']}, repeated "
                  f"calls accepted {stats['duplicate_requests_accepted']}, by status "
                  f"{stats['by_status']}")
            print(f"  longest gap between deliveries: {gap:.2f} s during the upgrade, "
                  f"{quiet_gap:.2f} s before it")
            print(f"  errors logged by the previous release after the migrate: "
                  f"{old_errors or 'none'}")
            failures = []
            if not report["clean"]:
                failures.append("verify is not clean")
            if stats["duplicate_effects"]:
                failures.append("duplicate effects")
            if not_final:
                failures.append(f"{not_final} runs not final")
            if old_errors:
                failures.append("the previous release logged errors after the migrate")
            delivered = Counter(r.key for r in gateway.requests if r.effect)
            if by_status.get("succeeded", 0) != len(delivered):
                failures.append(f"succeeded runs {by_status.get('succeeded', 0)} != "
                                f"effects {len(delivered)}")
            print("RESULT: " + ("FAIL: " + "; ".join(failures) if failures else "PASS"))
            return 1 if failures else 0
    finally:
        for proc in list(procs.values()) + [p for _, p in retired]:
            proc.kill(signal.SIGKILL)
        gateway.stop()
        with admin_connect(args.admin_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
