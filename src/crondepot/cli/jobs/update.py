"""``crondepot jobs update JOB``: change a job, with the API's PATCH semantics.

The changes come from ``--file`` (a partial job document, JSON merge patch: each top-level
field given replaces the stored one, null resets it to its default) and from flags for the
common fields (a flag wins over the same field in the file). The whole result is checked
before anything is written; a bad change names its field and changes nothing.

The version: ``--if-version N`` makes the change only if the job is still at version N
(the API's If-Match; from ``jobs show`` or the ETag), else it fails naming the current
version. Without it, the version read just before the change is used: the change still
cannot interleave with another writer, but it does overwrite changes made since you last
looked at the job.
"""

from __future__ import annotations

import argparse
from typing import Any

from crondepot.base import jsontext
from crondepot.base.errors import InvalidJob
from crondepot.cli.shared.job_ref import HELP as JOB_HELP
from crondepot.cli.shared.job_ref import job_ref, not_found, resolve
from crondepot.cli.shared.options import int_in, operator_connection
from crondepot.cli.shared.output import print_json
from crondepot.cli.shared.tenant import tenant_id
from crondepot.job import fields as F
from crondepot.job import store

# flag -> document field, for the fields people change most; others go in --file
_FLAGS = ("tz", "priority", "payload", "lease_seconds", "rate_limit", "catchup", "overlap")


def register(actions: Any, action: Any) -> None:
    """Add ``update`` to the ``jobs`` actions; ``action`` makes a parser with the options
    every jobs action has (--db, --json, --tenant)."""
    parser: argparse.ArgumentParser = action(
        actions, "update", "change a job's fields (PATCH semantics: the fields given "
                           "replace the stored ones, the others stay)")
    parser.add_argument("job_id", type=job_ref, metavar="JOB", help=JOB_HELP)
    parser.add_argument("--file", "-f", metavar="FILE",
                        help="a partial job document (JSON) of the fields to change, null "
                             "resets one to its default (- for stdin)")
    parser.add_argument("--if-version", type=int_in(1, 999_999_999, "a version"),
                        metavar="N", help="change it only if it is still at version N "
                                          "(the API's If-Match); default: the version read "
                                          "just before the change")
    parser.add_argument("--cron", action="append", metavar="CRON",
                        help="the cron expression; repeated, a list of them (several "
                             "schedules, one run per instant); replaces every and anchor")
    parser.add_argument("--every", metavar="INTERVAL",
                        help="an interval like 90s, 15m, 4h or 1d instead of the cron "
                             "(replaces cron; the anchor stays unless --anchor is given)")
    parser.add_argument("--anchor", metavar="INSTANT",
                        help="the RFC 3339 instant an interval counts from")
    parser.add_argument("--tz", metavar="ZONE", help="the IANA time zone, e.g. Asia/Kolkata")
    parser.add_argument("--priority", choices=F.PRIORITY.choices, help="urgent, normal or bulk")
    parser.add_argument("--payload", metavar="JSON", type=_json_object,
                        help="the payload, a JSON object (replaces the whole payload)")
    add_retry_flags(parser, "the others stay as stored")
    parser.add_argument("--lease-seconds", metavar="SECONDS",
                        type=_bounded(F.LEASE_SECONDS),
                        help="how long one attempt may hold the run")
    parser.add_argument("--rate-limit", metavar="NAME", type=_limit_or_none,
                        help="the rate limit the job's runs draw from; 'none' removes it")
    parser.add_argument("--catchup", choices=F.CATCHUP.choices,
                        help="after downtime, send all missed fires or only the latest")
    parser.add_argument("--overlap", choices=F.OVERLAP.choices,
                        help="what a fire does while a run of the job is running: allow, "
                             "skip, buffer_one (waits; at most one), replace (waits; the "
                             "running call is cancelled where it can be)")
    parser.set_defaults(run=run_update)


def add_retry_flags(parser: argparse.ArgumentParser, others: str) -> None:
    """--max-attempts, --retry-base, --retry-cap: members of the job's retry object
    (``others``: what becomes of the members not given)."""
    parser.add_argument("--max-attempts", metavar="N", type=_bounded(F.RETRY_MAX_ATTEMPTS),
                        help="attempts in all before the run is dead (retry.max_attempts)")
    parser.add_argument("--retry-base", metavar="SECONDS", type=_seconds(F.RETRY_BASE_S),
                        help="the longest wait after the first failed attempt, doubled "
                             f"after each further one (retry.base_s; {others})")
    parser.add_argument("--retry-cap", metavar="SECONDS", type=_seconds(F.RETRY_CAP_S),
                        help="the longest wait after any attempt, at least --retry-base "
                             f"(retry.cap_s; {others})")


def retry_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The retry members the flags give, by their names in the document."""
    given = {"max_attempts": args.max_attempts, "base_s": args.retry_base,
             "cap_s": args.retry_cap}
    return {name: value for name, value in given.items() if value is not None}


def with_retry(doc: dict[str, Any], members: dict[str, Any],
               stored: dict[str, Any] | None = None) -> dict[str, Any]:
    """``doc`` with ``members`` set in its retry object, over the document's own retry (or
    ``stored``, the job's, when the document has none) and its deprecated top-level
    max_attempts, which moves into the object: the result names each number once."""
    out = dict(doc)
    own = out.get("retry")
    retry: dict[str, Any] = dict(own) if isinstance(own, dict) else dict(stored or {})
    if "max_attempts" in out:
        retry.setdefault("max_attempts", out.pop("max_attempts"))
    out["retry"] = {**retry, **members}
    return out


def _seconds(field: F.Field) -> Any:
    """An argparse ``type`` for a number of seconds within ``field``'s bounds."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {field.path} to be a number of "
                                             f"seconds, got {text!r}") from None
        assert field.above is not None and field.high is not None
        if not field.above < value <= field.high:
            raise argparse.ArgumentTypeError(
                f"expected {field.path} to be a number of seconds above {field.above:g} and "
                f"at most {field.high:g}, got {text}")
        return int(value) if value.is_integer() else value
    return parse


def _bounded(field: F.Field) -> Any:
    """An argparse ``type`` for an integer field, with the bounds fields.py gives it."""
    return int_in(int(field.low or 0), int(field.high or 2**31 - 1), field.path)


_NONE = object()     # --rate-limit none: the field is set to null (removed)


def _limit_or_none(text: str) -> object:
    return _NONE if text.strip().lower() in ("none", "null", "") else text


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = jsontext.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _timetable_flags(args: argparse.Namespace) -> dict[str, Any]:
    """--cron (once: a text, repeated: a list), --every and --anchor: a job has one
    timetable, so a cron given drops the interval and an interval the cron."""
    from crondepot.cli.jobs import InvalidDocument

    if args.cron is not None and args.every is not None:
        raise InvalidDocument("give --cron or --every, not both", field="every")
    changes: dict[str, Any] = {}
    if args.cron is not None:
        changes = {"cron": args.cron[0] if len(args.cron) == 1 else list(args.cron),
                   "every": None, "anchor": None}
    if args.every is not None:
        changes = {**changes, "every": args.every, "cron": None}
    if args.anchor is not None:
        changes["anchor"] = args.anchor
    return changes


def patch_of(args: argparse.Namespace) -> dict[str, Any]:
    """The merge patch: --file's fields, then the flags given."""
    from crondepot.cli.jobs import InvalidDocument, read_source

    patch: dict[str, Any] = {}
    if args.file is not None:
        text = read_source(None, args.file)
        try:
            doc = jsontext.loads(text)
        except ValueError as exc:
            field, message = jsontext.refusal(exc, "file")
            raise InvalidDocument(f"--file: {message}", field=field) from None
        if not isinstance(doc, dict):
            raise InvalidDocument(f"--file: expected a JSON object of fields to change, got "
                                  f"{type(doc).__name__}", field="file")
        patch.update(doc)
    for name in _FLAGS:
        value = getattr(args, name)
        if value is not None:
            patch[name] = None if value is _NONE else value
    patch.update(_timetable_flags(args))
    if not patch and not retry_flags(args):
        raise InvalidDocument("nothing to change: give --file or a field flag (--cron, "
                              "--tz, --priority, ...)", field="document")
    return patch


def with_retry_flags(patch: dict[str, Any], args: argparse.Namespace,
                     stored: dict[str, Any]) -> dict[str, Any]:
    """The patch with the retry flags applied. --max-attempts alone replaces the number and
    keeps the curve (as a patch naming max_attempts does); --retry-base or --retry-cap set
    those members of the retry object, the others kept as the --file's retry or, without
    one, as stored (a patch's retry object replaces the stored one whole)."""
    members = retry_flags(args)
    if not members:
        return patch
    if set(members) == {"max_attempts"} and not isinstance(patch.get("retry"), dict):
        return {**patch, "max_attempts": members["max_attempts"]}
    return with_retry(patch, members, stored)


def run_update(args: argparse.Namespace) -> int:
    from crondepot.cli.jobs import InvalidDocument, every_problem, field_of, state, utc_text
    from crondepot.runs.render import job_json

    patch = patch_of(args)
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        job_id = resolve(conn, tenant, args.job_id)
        try:
            current = store.get_job(conn, tenant, job_id)
            version = args.if_version or current.version
            patch = with_retry_flags(patch, args, store.retry_document(current.spec))
            job = store.update_job(conn, tenant, job_id, patch, version=version)
        except store.JobNotFound:
            raise not_found(args.job_id) from None
        except InvalidJob as exc:
            raise InvalidDocument(every_problem(exc), field=field_of(exc)) from None
    if args.json:
        print_json({**job_json(job), "state": state(job)})
    else:
        print(f"job {job.id}: updated {', '.join(sorted(patch))}; now version {job.version}"
              + (f"; next run {utc_text(job.next_run_at)}" if job.active and not job.paused
                 else ""))
    return 0
