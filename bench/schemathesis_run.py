"""schemathesis for a long while against a real ``crondepot api``, as an admin and as a read token.

    python bench/schemathesis_run.py [--minutes 10] [--seed N] [--admin-url URL] [--keep DIR]

For each token: a fresh database (migrated, seeded by testkit/crondepot_testkit/fuzzing.py with
jobs, runs of every status, dead letters, limits and the two tokens), ``crondepot api`` on
it, and ``schemathesis run <api>/openapi.json`` with every check, every phase (examples,
coverage, fuzzing, stateful) and the settings and hooks of
testkit/crondepot_testkit/schemathesis.toml, for ``--minutes`` (``--max-time``: fuzzing and
stateful repeat until it is spent). Prints the exact command, the phases' summary and each
distinct failure (operation, check, message). The suite's tests/api/test_schemathesis.py
runs the same command, bounded.

Exit status: 0 when no token's run found a failure.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import DEFAULT_ADMIN_URL, fresh_database
from crondepot_testkit import fuzzing
from crondepot_testkit.processes import free_port


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="per token (default 10)")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL,
                        help="PostgreSQL admin URL (a database is made and dropped per token)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep each run's output, report and API log in this folder")
    parser.add_argument("--roles", default="admin,read")
    args = parser.parse_args()
    found = 0
    for role in args.roles.split(","):
        found += run_one(role, args)
    print(f"\n== total: {found} distinct failure(s)")
    return 1 if found else 0


def run_one(role: str, args: argparse.Namespace) -> int:
    folder = Path(tempfile.mkdtemp(prefix=f"schemathesis-{role}-"))
    started = time.monotonic()
    with fresh_database(args.admin_url, f"crondepot_schemathesis_{role}") as url:
        seeded = fuzzing.seed(url)
        token = seeded.admin if role == "admin" else seeded.read
        with fuzzing.api_process(url, free_port(), log=folder / "api.log") as base:
            outcome = fuzzing.run(base, token, seed=args.seed, keep=seeded.token_ids,
                                  workdir=folder,
                                  extra=("--max-time", str(int(args.minutes * 60)),
                                         "--workers", "1"))
    print(f"\n== {role} token: {time.monotonic() - started:.0f} s, exit {outcome.exit_code}")
    print("$ " + " ".join(outcome.command))
    for line in outcome.output.splitlines():
        if any(mark in line for mark in ("(in ", "passed", "Scenarios:", "API Links:",
                                         "generated", "Seed:")):
            print(line.rstrip())
    print(f"checks applied: {', '.join(sorted(outcome.checks))}")
    for failure in sorted(outcome.failures, key=lambda f: (f["operation"], f["check"])):
        message = " | ".join(failure["message"].strip().splitlines()[:3])
        print(f"FAIL {failure['operation']}: {failure['check']}: {message[:400]}")
    if not outcome.failures:
        print("no failure found")
    if args.keep:
        target = args.keep / role
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns(".hypothesis"))
        print(f"output, report and API log: {target}")
    shutil.rmtree(folder, ignore_errors=True)
    return len(outcome.failures)


if __name__ == "__main__":
    sys.exit(main())
