"""``crondepot import FILE --tenant NAME``: job documents from NDJSON, stored in batches.

The file is streamed: one line at a time is checked (``JobSpec.from_document``), and the
valid ones are written ``--batch`` to a statement (``import_batch``), so memory stays flat
however long the file. A bad line is reported with its number and field and changes
nothing, and so is a line the database refuses (the rest of its batch is stored); a key the
tenant already uses is counted as ``existing`` and left as it is, so an import can be
re-run. Exit status 1 when any line was invalid.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import psycopg

from crondepot.base.errors import CrondepotError, InvalidJob
from crondepot.cli.jobs import field_of, naming, parse_spec
from crondepot.cli.shared.options import add_database, add_json, int_in, operator_connection
from crondepot.cli.shared.output import print_json
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.job.spec import JobSpec
from crondepot.job.store import import_batch

MAX_LISTED = 1000       # invalid lines listed in --json output; all are counted


class UnreadableFile(CrondepotError, OSError):
    pass


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "import", help="import jobs from an NDJSON file (one job document per line)",
        description="Import jobs from NDJSON: valid lines are stored in batches, bad lines "
                    "are reported with their line number and field and change nothing. "
                    "Exit status 1 when any line was invalid.")
    add_database(parser)
    add_json(parser)
    add_tenant(parser, help_text="the tenant the jobs belong to")
    parser.add_argument("file", metavar="FILE", help="NDJSON file, or - for stdin")
    parser.add_argument("--batch", type=int_in(1, 10_000, "a batch size"), default=1000,
                        metavar="N",
                        help="jobs written per statement, 1 to 10000 (1000)")
    parser.set_defaults(run=run)


class _Import:
    def __init__(self, conn: psycopg.Connection[Any], tenant: int, batch_size: int, *,
                 report: bool) -> None:
        self.conn = conn
        self.tenant = tenant
        self.batch_size = batch_size
        self.report = report            # print each bad line on stderr as it is read
        self.counts = {"lines": 0, "created": 0, "existing": 0, "invalid": 0}
        self.errors: list[dict[str, Any]] = []
        self.batch: list[tuple[int, JobSpec]] = []

    def line(self, number: int, raw: bytes) -> None:
        if not raw.strip():
            return
        self.counts["lines"] += 1
        try:
            self.batch.append((number, parse_spec(raw, whole="line")))
        except InvalidJob as exc:
            self._invalid(number, field_of(exc, "line"), str(exc))
            for field, message in exc.problems[1:]:     # the others, on their own lines
                if self.report:
                    print(f"line {number}: {naming(field, message)}", file=sys.stderr)
        if len(self.batch) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        stored = import_batch(self.conn, self.tenant, [spec for _, spec in self.batch])
        for (number, _), created in zip(self.batch, stored, strict=True):
            if isinstance(created, InvalidJob):     # refused by the database, not stored
                self._invalid(number, field_of(created, "line"), str(created))
            else:
                self.counts["created" if created.created else "existing"] += 1
        self.batch.clear()

    def _invalid(self, number: int, field: str, message: str) -> None:
        self.counts["invalid"] += 1
        if len(self.errors) < MAX_LISTED:
            self.errors.append({"line": number, "field": field, "message": message})
        if self.report:
            print(f"line {number}: {naming(field, message)}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    with _opened(args.file) as (stream, size), \
            operator_connection(args, "crondepot-import") as conn:
        job_import = _Import(conn, tenant_id(conn, args.tenant), args.batch,
                             report=not args.json)
        if args.json or not sys.stdout.isatty():
            for number, raw in enumerate(stream, start=1):
                job_import.line(number, raw)
        else:
            _with_progress(job_import, stream, size, args.file)
        job_import.flush()
    counts = job_import.counts
    if args.json:
        print_json({**counts, "errors": job_import.errors,
                    "errors_not_listed": counts["invalid"] - len(job_import.errors)})
    else:
        print(f"{args.file}: {counts['lines']} jobs read: {counts['created']} created, "
              f"{counts['existing']} existing, {counts['invalid']} invalid")
    return 1 if counts["invalid"] else 0


def _with_progress(job_import: _Import, stream: IO[bytes], size: int | None,
                   name: str) -> None:
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    counts = job_import.counts
    with Progress(TextColumn("[bold]importing"), BarColumn(bar_width=None),
                  TaskProgressColumn(), TextColumn("{task.fields[summary]}"),
                  TimeRemainingColumn(), expand=True) as progress:
        task = progress.add_task(name, total=size, summary="")
        done = 0
        for number, raw in enumerate(stream, start=1):
            job_import.line(number, raw)
            done += len(raw)
            if number % 500 == 0:
                progress.update(task, completed=done, summary=_summary(counts))
        progress.update(task, completed=done, summary=_summary(counts))


def _summary(counts: dict[str, int]) -> str:
    return (f"{counts['created']} created · {counts['existing']} existing · "
            f"{counts['invalid']} invalid")


@contextmanager
def _opened(path: str) -> Iterator[tuple[IO[bytes], int | None]]:
    """The file as a binary stream, and its size when it is a regular file."""
    if path == "-":
        yield sys.stdin.buffer, None
        return
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise UnreadableFile(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        stat = os.fstat(stream.fileno())
        yield stream, stat.st_size if stat.st_size > 0 else None
    finally:
        stream.close()

