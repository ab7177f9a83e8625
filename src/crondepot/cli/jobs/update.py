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
_FLAGS = ("cron", "tz", "priority", "payload", "max_attempts", "lease_seconds",
          "rate_limit", "catchup")


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
    parser.add_argument("--cron", help="the cron expression")
    parser.add_argument("--tz", metavar="ZONE", help="the IANA time zone, e.g. Asia/Kolkata")
    parser.add_argument("--priority", choices=F.PRIORITY.choices, help="urgent, normal or bulk")
    parser.add_argument("--payload", metavar="JSON", type=_json_object,
                        help="the payload, a JSON object (replaces the whole payload)")
    parser.add_argument("--max-attempts", metavar="N",
                        type=_bounded(F.MAX_ATTEMPTS),
                        help="attempts before the run is dead")
    parser.add_argument("--lease-seconds", metavar="SECONDS",
                        type=_bounded(F.LEASE_SECONDS),
                        help="how long one attempt may hold the run")
    parser.add_argument("--rate-limit", metavar="NAME", type=_limit_or_none,
                        help="the rate limit the job's runs draw from; 'none' removes it")
    parser.add_argument("--catchup", choices=F.CATCHUP.choices,
                        help="after downtime, send all missed fires or only the latest")
    parser.set_defaults(run=run_update)


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
    if not patch:
        raise InvalidDocument("nothing to change: give --file or a field flag (--cron, "
                              "--tz, --priority, ...)", field="document")
    return patch


def run_update(args: argparse.Namespace) -> int:
    from crondepot.cli.jobs import InvalidDocument, field_of, naming, state, utc_text
    from crondepot.runs.render import job_json

    patch = patch_of(args)
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        job_id = resolve(conn, tenant, args.job_id)
        try:
            version = args.if_version or store.get_job(conn, tenant, job_id).version
            job = store.update_job(conn, tenant, job_id, patch, version=version)
        except store.JobNotFound:
            raise not_found(args.job_id) from None
        except InvalidJob as exc:
            field = field_of(exc)
            raise InvalidDocument(naming(field, str(exc)), field=field) from None
    if args.json:
        print_json({**job_json(job), "state": state(job)})
    else:
        print(f"job {job.id}: updated {', '.join(sorted(patch))}; now version {job.version}"
              + (f"; next run {utc_text(job.next_run_at)}" if job.active and not job.paused
                 else ""))
    return 0
