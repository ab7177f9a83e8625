"""Options for who may scrape a process's /metrics, and what the API's says about tenants
(docs/operations.md, "Metrics: who may scrape").

The token is the same for every process (env ``CRONDEPOT_METRICS_TOKEN``, which the API
reads in ``crondepot.api.scrape`` too): prefer the variable to the option, which other users
of the host can read in the process list.
"""

from __future__ import annotations

import argparse
import os

TOKEN_ENV = "CRONDEPOT_METRICS_TOKEN"
HOST_ENV = "CRONDEPOT_METRICS_HOST"
TENANT_LABELS_ENV = "CRONDEPOT_METRICS_TENANT_LABELS"


def add_metrics_token(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics-token", metavar="TOKEN", type=_token,
                        default=os.environ.get(TOKEN_ENV) or None,
                        help="a scrape of /metrics must send Authorization: Bearer TOKEN, "
                             f"else 401 (env {TOKEN_ENV}, preferred: an option shows in the "
                             "process list; default: no token, /metrics open)")


def add_metrics_host(parser: argparse.ArgumentParser) -> None:
    """For the scheduler and the worker, whose --metrics-port server has no other guard."""
    parser.add_argument("--metrics-host", metavar="ADDRESS",
                        default=os.environ.get(HOST_ENV) or "127.0.0.1",
                        help="address the --metrics-port server listens on (env "
                             f"{HOST_ENV}; default 127.0.0.1: this host only; 0.0.0.0 for "
                             "any, then set --metrics-token too)")


def add_tenant_labels(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics-tenant-labels", action="store_true",
                        default=os.environ.get(TENANT_LABELS_ENV, "").strip().lower()
                        in ("1", "true", "yes", "on"),
                        help="name tenants in /metrics (crondepot_jobs_unhealthy{tenant}); "
                             f"env {TENANT_LABELS_ENV}=1; default: one sum over the tenants")


def _token(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a token, got an empty one")
    return text.strip()
