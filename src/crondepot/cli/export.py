"""``crondepot export --tenant T [--scope LABEL=VALUE] [--format yaml|json] [-o FILE]``:
write the schedules file ``crondepot apply`` takes, so that export -> apply changes nothing.

Active and paused jobs are written (cancelled and ended ones are not); the paused state is
not part of a document, so apply leaves it as it is. A job without a key cannot be applied
(a key is how apply finds a job again): it is skipped, with a warning on stderr naming its
id, and counted. The jobs are read through a server-side cursor and written one at a time:
memory stays bounded however many there are.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from typing import IO, Any

from crondepot.cli.apply import scope_argument
from crondepot.cli.shared.options import add_database, operator_connection
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.job.apply import export_document, export_jobs


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "export", help="write a tenant's jobs as the schedules file `apply` takes",
        description="Write a tenant's active and paused jobs (optionally one scope's) as a "
                    "schedules file: applying it back changes nothing. Jobs without a key "
                    "are skipped with a warning.")
    add_database(parser)
    add_tenant(parser, help_text="the tenant whose jobs are written")
    parser.add_argument("--scope", type=scope_argument, default=None, metavar="LABEL=VALUE",
                        help="only the jobs carrying this label")
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml",
                        help="YAML (one document per job) or JSON (a list); default yaml")
    parser.add_argument("-o", "--output", metavar="FILE", default=None,
                        help="write to FILE (default: stdout)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    target = open(args.output, "w", encoding="utf-8") if args.output \
        else nullcontext(sys.stdout)  # noqa: SIM115 - closed by the with below
    with target as out, operator_connection(args, "crondepot-export") as conn:
        written, skipped = write(out, export_jobs(conn, tenant_id(conn, args.tenant),
                                                  args.scope), args.format)
    print(f"exported {written} jobs" + (f", skipped {skipped} without a key" if skipped
                                         else ""), file=sys.stderr)
    return 0


def write(out: IO[str], jobs: Any, form: str) -> tuple[int, int]:
    """Write each job's document to ``out`` as it is read; (written, skipped)."""
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    written = skipped = 0
    if form == "json":
        out.write("[")
    for job in jobs:
        if job.spec.key is None:
            skipped += 1
            print(f"crondepot: warning: job {job.id} has no key: not exported (apply finds "
                  "jobs by key)", file=sys.stderr)
            continue
        doc = export_document(job)
        if form == "json":
            out.write(("," if written else "") + "\n  " + json.dumps(doc, ensure_ascii=False))
        else:
            out.write(yaml.dump(doc, Dumper=dumper, sort_keys=False, allow_unicode=True,
                                explicit_start=True, width=100))
        written += 1
    if form == "json":
        out.write("\n]\n" if written else "]\n")
    return written, skipped
