"""A job named on the command line by its id or by its key.

Every command that takes a job (``jobs show|pause|resume|cancel|trigger|update``,
``backfill``, ``runs list --job``, ``dlq list|replay --job``) takes either. The rule for a
key that looks like a number: ASCII digits are an id; ``key:`` before a key always names a
key (``key:123`` is the job whose key is "123", ``key:key:x`` the one whose key is
"key:x"). Anything else is a key. docs/operations.md "Conventions" says the same.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import psycopg

from crondepot.base import jsontext
from crondepot.job import store
from crondepot.job.by_key import job_id_by_key

KEY_PREFIX = "key:"
MAX_JOB_ID = 2**63 - 1
HELP = "the job's id, or its key (key:KEY for a key made of digits)"


@dataclass(frozen=True, slots=True)
class JobRef:
    """What the user typed, and what it names: an id or a key (one of them is None)."""
    text: str
    id: int | None = None
    key: str | None = None

    def __str__(self) -> str:
        return self.text


def job_ref(text: str) -> JobRef:
    """An argparse ``type``: an id (ASCII digits), ``key:KEY``, or a key."""
    if jsontext.unstorable(text) is not None:      # undecodable bytes in argv
        raise argparse.ArgumentTypeError(f"expected a job id or key, got {text!r}")
    if text.startswith(KEY_PREFIX):
        key = text[len(KEY_PREFIX):]
        if not key.strip():
            raise argparse.ArgumentTypeError(f"expected a key after 'key:', got {text!r}")
        return JobRef(text, key=key)
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a job id or key, got an empty string")
    if text.isascii() and text.isdigit():
        number = int(text) if len(text.lstrip("0")) <= 19 else 0
        # an id outside bigint is an unknown id (not found), not an error
        return JobRef(text, id=number if 1 <= number <= MAX_JOB_ID else 0)
    return JobRef(text, key=text)


def resolve(conn: psycopg.Connection[Any], tenant_id: int, ref: JobRef) -> int:
    """The id of the tenant's job ``ref`` names; JobNotFound ("job X not found") if none,
    another tenant's included."""
    if ref.id is not None:
        if ref.id == 0:
            raise not_found(ref)
        return ref.id
    assert ref.key is not None
    found = job_id_by_key(conn, tenant_id, ref.key)
    if found is None:
        raise not_found(ref)
    return found


def not_found(ref: JobRef | int) -> store.JobNotFound:
    if isinstance(ref, JobRef) and ref.key is not None:
        return store.JobNotFound(f"job with key {ref.key!r} not found")
    return store.JobNotFound(f"job {ref} not found")
