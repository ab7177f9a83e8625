"""``crondepot jobs add|list|show|update|pause|resume|cancel|trigger|bulk``: a tenant's jobs
(``update`` is in ``update``, ``bulk`` in ``bulk``; a JOB is an id or a key,
``cli.shared.job_ref``).

The same code as the HTTP API (``crondepot.job.store``): a document is checked by
``JobSpec.from_document`` before anything is written, so a bad one changes nothing and the
error names its field; another tenant's job is "not found", exactly like a missing one.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console
from rich.table import Table

from crondepot.base import jsontext
from crondepot.base.errors import CrondepotError, InvalidJob
from crondepot.cli.jobs import bulk as cli_bulk
from crondepot.cli.jobs import update as job_update
from crondepot.cli.next import FIRE_NOTES as DST_NOTES
from crondepot.cli.shared.job_ref import HELP as JOB_HELP
from crondepot.cli.shared.job_ref import JobRef, job_ref, not_found, resolve
from crondepot.cli.shared.options import add_database, add_json, int_in, operator_connection
from crondepot.cli.shared.output import console as plain_console
from crondepot.cli.shared.output import print_json, print_more
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.cli.tenants.health import health_lines
from crondepot.job import store, targets
from crondepot.job.health import job_health, list_unhealthy_jobs
from crondepot.job.spec import PRIORITIES, JobSpec
from crondepot.job.store import JobFilter, StoredJob
from crondepot.runs.render import job_json
from crondepot.timetable import Schedule, spread_offset

MAX_JOB_ID = 2**63 - 1
SHOWN_FIRES = 5


class InvalidDocument(CrondepotError, ValueError):
    """A job document that could not be read or that breaks a rule; names the field."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


# -- documents ----------------------------------------------------------------------------

def parse_spec(text: str | bytes, *, whole: str = "document",
               retry: dict[str, Any] | None = None) -> JobSpec:
    """A job document (JSON text) as a JobSpec; InvalidJob naming the field otherwise.
    ``whole`` is the field named when the text is not JSON at all; ``retry``, members of
    the retry object set over the document's (the --max-attempts, --retry-base and
    --retry-cap flags)."""
    if not text.strip():
        raise InvalidJob("empty; expected a JSON object (a job document)", field=whole)
    try:
        doc = jsontext.loads(text)
    except ValueError as exc:       # UnicodeDecodeError and TooDeep among them
        named, message = jsontext.refusal(exc, whole)
        raise InvalidJob(message, field=named) from None
    if retry and isinstance(doc, dict):
        doc = job_update.with_retry(doc, retry)
    return JobSpec.from_document(doc)


def field_of(exc: InvalidJob, whole: str = "document") -> str:
    return exc.field or whole


def every_problem(exc: InvalidJob) -> str:
    """The document's problems for a person: the one, or each on its own line."""
    said = [message if not field or field == "document" else naming(field, message)
            for field, message in exc.problems]
    if len(said) == 1:
        return said[0]
    return f"{len(said)} problems:" + "".join(f"\n  {line}" for line in said)


def naming(field: str, message: str) -> str:
    """``field: message``, the field said once: many messages name their field already
    ("tz: unknown time zone …")."""
    return message if message.startswith(f"{field}:") else f"{field}: {message}"


def read_source(document: str | None, file: str | None) -> str:
    if file is None and document is None:
        raise InvalidDocument("give a job document: JSON, --file FILE, or - for stdin",
                              field="document")
    if file == "-" or document == "-":
        try:
            return sys.stdin.read()
        except UnicodeDecodeError as exc:    # not a traceback: the input is at fault
            raise InvalidDocument(f"stdin is not UTF-8 text: {exc}", field="document") from None
    if file is not None:
        try:
            return Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidDocument(f"--file: cannot read {file}: {exc}", field="file") from None
    assert document is not None
    return document


# -- rendering ----------------------------------------------------------------------------

def state(job: StoredJob) -> str:
    if not job.active:
        return f"ended ({job.ended_reason})" if job.ended_reason else "cancelled"
    return "paused" if job.paused else "active"


def console() -> Console:
    """A rich console; into a pipe or a file, plain text (``output.console``)."""
    return plain_console()


def utc_text(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# -- commands -----------------------------------------------------------------------------

def register(commands: Any) -> None:
    parser = commands.add_parser("jobs", help="a tenant's jobs: add, list, show, update, "
                                              "pause, resume, cancel, trigger")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    adding = _action(actions, "add", "create a job from a job document (idempotent on its "
                                     "key)")
    source = adding.add_mutually_exclusive_group(required=True)
    source.add_argument("document", nargs="?", metavar="JSON",
                        help="the job document as JSON, or - to read it from stdin")
    source.add_argument("--file", "-f", metavar="FILE",
                        help="read the job document from FILE (- for stdin)")
    job_update.add_retry_flags(adding, "set in the document's retry object")
    adding.set_defaults(run=run_add)

    listing = _action(actions, "list", "list jobs in id order, a page at a time")
    listing.add_argument("--priority", choices=PRIORITIES, help="only this priority")
    listing.add_argument("--paused", action="store_true", default=None,
                         help="only paused jobs")
    listing.add_argument("--key-prefix", metavar="PREFIX", help="only keys starting so")
    listing.add_argument("--unhealthy", action="store_true",
                         help="only jobs whose latest failed fires in a row reached their "
                              "alert threshold")
    cli_bulk.add_label(listing)
    listing.add_argument("--limit", type=int_in(1, 1000, "a limit"), default=100,
                         help="page size, 1 to 1000 (100)")
    listing.add_argument("--cursor", type=_cursor, default=0, metavar="CURSOR",
                         help="next_cursor of the previous page")
    listing.set_defaults(run=run_list)

    showing = _action(actions, "show", "a job, its state and its next fire times")
    showing.add_argument("job_id", type=job_ref, metavar="JOB", help=JOB_HELP)
    showing.add_argument("-n", "--fires", type=int_in(0, 1000, "a count"), default=SHOWN_FIRES,
                         help=f"how many next fire times ({SHOWN_FIRES})")
    showing.set_defaults(run=run_show)

    for name, text in (("pause", "pause a job (no runs until resumed)"),
                       ("resume", "resume a paused job from now (missed runs are skipped)"),
                       ("cancel", "cancel a job for good (it stays readable with its runs)"),
                       ("trigger", "queue one run of a job now")):
        changing = _action(actions, name, text)
        changing.add_argument("job_id", type=job_ref, metavar="JOB", help=JOB_HELP)
        if name == "pause":
            changing.add_argument("--note", metavar="TEXT",
                                  help="why (1 to 500 characters), shown with the job until "
                                       "it is resumed")
        changing.set_defaults(run=run_change, change=name)
    cli_bulk.register(actions)

    job_update.register(actions, _action)


def _action(actions: Any, name: str, text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = actions.add_parser(name, help=text, description=text)
    add_database(parser)
    add_json(parser)
    add_tenant(parser)
    return parser


def run_add(args: argparse.Namespace) -> int:
    text = read_source(args.document, args.file)
    try:
        spec = parse_spec(text, retry=job_update.retry_flags(args))
    except InvalidJob as exc:
        raise InvalidDocument(f"invalid job document: {every_problem(exc)}",
                              field=field_of(exc)) from None
    with operator_connection(args) as conn:
        try:
            job, created = store.create_job(conn, tenant_id(conn, args.tenant), spec)
        except InvalidJob as exc:      # refused for this tenant: a grant or a quota
            field = field_of(exc)
            raise InvalidDocument(naming(field, str(exc)), field=field) from None
    if args.json:
        print_json({**job_json(job), "created": created})
    elif created:
        print(f"created job {job.id}{_key(job)}; next run {utc_text(job.next_run_at)}")
    else:
        print(f"job {job.id}{_key(job)} exists with this document; nothing changed")
    return 0


def run_list(args: argparse.Namespace) -> int:
    where = JobFilter(priority=args.priority, paused=args.paused, key_prefix=args.key_prefix,
                      labels=dict(args.label) if args.label else None)
    with operator_connection(args) as conn:
        listed = list_unhealthy_jobs if args.unhealthy else store.list_jobs
        jobs = listed(conn, tenant_id(conn, args.tenant), where, after=args.cursor,
                      limit=args.limit + 1)
    page = jobs[:args.limit]
    next_cursor = str(page[-1].id) if len(jobs) > args.limit else None
    if args.json:
        print_json({"items": [job_json(j) for j in page], "next_cursor": next_cursor})
        return 0
    table = Table(title=f"jobs of {args.tenant}")
    table.add_column("id", justify="right", no_wrap=True)
    table.add_column("key", overflow="fold")
    for column in ("schedule", "tz", "priority", "state"):
        table.add_column(column)
    table.add_column("labels", overflow="fold")
    table.add_column("next run (UTC)", no_wrap=True)
    for job in page:
        table.add_row(str(job.id), job.spec.key or "", job.spec.schedule_text, job.spec.tz,
                      job.spec.priority, state(job),
                      ",".join(f"{k}={v}" for k, v in job.spec.labels.items()),
                      utc_text(job.next_run_at) if job.active and not job.paused else "-")
    console().print(table)
    print_more(next_cursor)
    return 0


def run_show(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        job = get_job(conn, tenant, resolve(conn, tenant, args.job_id))
        health = job_health(conn, tenant, job.id)
    assert health is not None           # the job was just read
    fires = next_fires(job, datetime.now(UTC), max(0, min(args.fires, 1000)))
    if args.json:
        print_json({**job_json(job), "state": state(job), "next_fires": fires,
                    "health": health.document()})
        return 0
    spec = job.spec
    lines = [
        ("job", f"{job.id}{_key(job)}"),
        ("state", f"{state(job)} (version {job.version})"),
        ("schedule", f"{spec.schedule_text}  on {spec.tz}"),
        ("priority", spec.priority),
        ("target", _target(spec.target)),
        ("misfire", " ".join(f"{k}={v}" for k, v in spec.misfire.document().items())),
        ("catch-up", f"{spec.catchup} (at most {spec.max_catchup})"),
        ("retry", spec.retry_text),
        ("overlap", spec.overlap_text),
        ("delivery window", spec.delivery_window_text),
        ("lease", f"{spec.lease_seconds} s per attempt"),
    ]
    if spec.spread_seconds:
        lines.append(("spread", f"over {spec.spread_seconds} s"
                                + (f" on key {spec.spread_key!r}" if spec.spread_key else "")))
    if spec.calendar_text:
        lines.append(("calendar", spec.calendar_text))
    if spec.rate_limit:
        lines.append(("rate limit", spec.rate_limit))
    if spec.labels:
        lines.append(("labels", ", ".join(f"{k}={v}" for k, v in spec.labels.items())))
    payload = json.dumps(spec.payload)
    lines.append(("payload", payload if len(payload) <= 200 else payload[:197] + "..."))
    lines.append(("next run", utc_text(job.next_run_at) if job.active and not job.paused else "-"))
    if job.pause is not None:
        lines.append(("paused", " ".join(filter(None, [
            f"since {utc_text(job.pause.at)}" if job.pause.at else None,
            f"by {job.pause.by}" if job.pause.by else None,
            f"- {job.pause.note}" if job.pause.note else None])) or "yes"))
    lines.append(("created", utc_text(job.created_at)))
    lines.append(("updated", utc_text(job.updated_at)))
    if job.cancelled_at is not None:
        lines.append(("cancelled", utc_text(job.cancelled_at)))
    if spec.max_runs is not None or job.ended_reason:
        lines.append(("fires", str(job.fire_count)
                      + (f" of {spec.max_runs}" if spec.max_runs is not None else "")))
    if job.ended_reason:
        lines.append(("ended", f"{job.ended_reason}, last fire {utc_text(job.ended_at)}"))
    lines += health_lines(health)
    for label, value in lines:
        print(f"{label:<11} {value}")
    if fires:
        heading = "next fires" + (" (paused: none will run until resumed)"
                                  if job.paused else "")
        print(f"\n{heading}:")
    for fire in fires:
        line = f"  {fire['local']}  {fire['at']}"
        if fire["due_at"] != fire["at"]:
            line += f"  due {fire['due_at']} (spread)"
        if fire["dst_note"]:
            line += f"  # {fire['dst_note']}"
        print(line)
    return 0


def run_change(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        job_id = resolve(conn, tenant, args.job_id)
        try:
            if args.change == "trigger":
                triggered = store.trigger_job(conn, tenant, job_id)
                job = None
            else:
                job = store.pause_job(conn, tenant, job_id, note=args.note) \
                    if args.change == "pause" else {
                        "resume": store.resume_job, "cancel": store.cancel_job,
                    }[args.change](conn, tenant, job_id)
        except store.JobNotFound:
            raise _not_found(args.job_id) from None
    if job is None:
        if args.json:
            print_json({"job_id": job_id, "run_id": triggered.run_id,
                        "created": triggered.created})
        elif triggered.created:
            print(f"queued run {triggered.run_id} of job {job_id}")
        else:
            print(f"run {triggered.run_id} of job {job_id} was already queued this "
                  "second; nothing written")
        return 0
    if args.json:
        print_json({**job_json(job), "state": state(job)})
    else:
        print(f"job {job.id}{_key(job)}: {state(job)}"
              + (f"; next run {utc_text(job.next_run_at)}"
                 if job.active and not job.paused else ""))
    return 0


# -- helpers shared with ``runs`` ---------------------------------------------------------

def get_job(conn: psycopg.Connection[Any], tenant: int, job_id: int) -> StoredJob:
    """The tenant's job; "job N not found" for a missing one and for another tenant's."""
    try:
        return store.get_job(conn, tenant, _known(job_id))
    except store.JobNotFound:
        raise _not_found(job_id) from None


def next_fires(job: StoredJob, after: datetime, count: int) -> list[dict[str, Any]]:
    """The job's next ``count`` fires after ``after``, with their due time (after spread)
    and what a clock change did to them. A cancelled job has none."""
    if not job.active or count == 0:
        return []
    spec = job.spec
    offset = timedelta(0)
    if spec.spread_seconds:
        offset = timedelta(seconds=spread_offset(spec.spread_key or spec.hash_key(job.id),
                                                 spec.spread_seconds))
    timetable: Schedule = spec.timetable(job.id)
    fires: list[dict[str, Any]] = []
    for fire in timetable.fires_after(after):
        if len(fires) >= count:
            break
        note = DST_NOTES[fire.note].format(scheduled=fire.scheduled_local.isoformat()) \
            if fire.note else None
        fires.append({"at": utc_text(fire.at), "local": fire.local.isoformat(),
                      "due_at": utc_text(fire.at + offset), "dst": fire.note, "dst_note": note})
    return fires


def _known(job_id: int) -> int:
    """Ids outside bigint are unknown ids, not errors."""
    return job_id if 1 <= job_id <= MAX_JOB_ID else 0


def _not_found(job_id: int | JobRef) -> store.JobNotFound:
    return not_found(job_id)


def _key(job: StoredJob) -> str:
    return f" ({job.spec.key})" if job.spec.key else ""


def _target(target: dict[str, Any]) -> str:
    return targets.description(target)



def _cursor(text: str) -> int:
    if not text.isdigit() or int(text) > MAX_JOB_ID:
        raise argparse.ArgumentTypeError(f"expected a next_cursor value, got {text!r}")
    return int(text)
