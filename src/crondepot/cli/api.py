"""``crondepot api``: the HTTP API (FastAPI on uvicorn) over one database."""

from __future__ import annotations

import argparse
import functools
import ipaddress
import os
from typing import Any

from crondepot.cli.shared.metrics import add_metrics_token, add_tenant_labels
from crondepot.cli.shared.options import (
    API_POOLED_HELP,
    add_database,
    add_pooled_database,
    check_pooled_database,
    check_schema,
    database,
    duration,
    int_in,
)
from crondepot.cli.shared.output import fail
from crondepot.db.connect import POOLED_URL_ENV
from crondepot.runtime import logs

FORWARDED_ENV = "CRONDEPOT_API_FORWARDED_ALLOW_IPS"
# The names api/app.py (ApiSettings.from_env) reads in every API process; written here in
# seconds (not imported from there: that would load FastAPI for every command).
BODY_TIMEOUT_ENV = "CRONDEPOT_API_BODY_TIMEOUT"
POOL_WAIT_ENV = "CRONDEPOT_API_POOL_WAIT"


def register(commands: Any) -> None:
    parser = commands.add_parser("api", help="serve the HTTP API (OpenAPI at /openapi.json)")
    add_database(parser)
    add_pooled_database(parser, text=API_POOLED_HELP)
    parser.add_argument("--host", default=os.environ.get("CRONDEPOT_API_HOST", "127.0.0.1"),
                        help="address to listen on (env CRONDEPOT_API_HOST; default 127.0.0.1)")
    port = int_in(0, 65535, "a port")
    workers = int_in(1, 64, "a number of API processes")
    parser.add_argument("--port", type=port,
                        default=port(os.environ.get("CRONDEPOT_API_PORT", "8080")),
                        help="port to listen on (env CRONDEPOT_API_PORT; default 8080)")
    parser.add_argument("--workers", type=workers,
                        default=workers(os.environ.get("CRONDEPOT_API_WORKERS", "1")),
                        help="API processes on the one port (env CRONDEPOT_API_WORKERS; "
                             "default 1). Each gets its share of the per-token request rate.")
    parser.add_argument("--log-json", action="store_true", default=None,
                        help="log one JSON object per line")
    forwarded = os.environ.get(FORWARDED_ENV) or None
    parser.add_argument("--forwarded-allow-ips", metavar="ADDRESSES", type=_proxies,
                        default=forwarded,     # argparse checks a text default with type
                        help="proxies trusted to say how the client connected "
                             "(X-Forwarded-Proto, X-Forwarded-For): comma-separated addresses "
                             "or networks, or '*' for any (env " + FORWARDED_ENV + "). The "
                             "console's cookie is Secure when a trusted proxy says https. "
                             "Without it, those headers are ignored.")
    add_metrics_token(parser)
    add_tenant_labels(parser)
    _add_limits(parser)
    parser.set_defaults(run=run)


def _add_limits(parser: argparse.ArgumentParser) -> None:
    """How long a client may take, how many may connect, how long a request may wait for
    the database (docs/operations.md, "Slow clients and overload")."""
    group = parser.add_argument_group(
        "slow clients and overload", "bounds per API process; a client past one is closed "
        "or answered 408 or 503, and the other clients' requests go on")
    env = os.environ.get
    group.add_argument("--header-timeout", type=duration, metavar="DURATION",
                       default=env("CRONDEPOT_API_HEADER_TIMEOUT", "10s"),
                       help="close a connection whose request head has not arrived whole "
                            "this long after it opened, or after a later request's first "
                            "byte (env CRONDEPOT_API_HEADER_TIMEOUT; default 10s)")
    group.add_argument("--body-timeout", type=duration, metavar="DURATION",
                       default=env(BODY_TIMEOUT_ENV, "30s"),
                       help="answer 408 and close when a request body has not arrived whole "
                            f"this long after its head (env {BODY_TIMEOUT_ENV}; default 30s; "
                            "a 64 MiB import needs about 2.2 MB/s within it)")
    group.add_argument("--keep-alive-timeout", type=duration, metavar="DURATION",
                       default=env("CRONDEPOT_API_KEEP_ALIVE_TIMEOUT", "5s"),
                       help="close a kept-alive connection idle this long between requests "
                            "(env CRONDEPOT_API_KEEP_ALIVE_TIMEOUT; default 5s)")
    group.add_argument("--max-connections", metavar="N",
                       type=int_in(1, 1_000_000, "a number of connections"),
                       default=env("CRONDEPOT_API_MAX_CONNECTIONS", "512"),
                       help="while this many connections are open, a request on another one "
                            "is answered 503 and its connection closed (env "
                            "CRONDEPOT_API_MAX_CONNECTIONS; default 512, per process)")
    group.add_argument("--pool-wait", type=duration, metavar="DURATION",
                       default=env(POOL_WAIT_ENV, "2s"),
                       help="answer 503 with Retry-After when no database connection is free "
                            f"this long (env {POOL_WAIT_ENV}; default 2s); /readyz is 503 "
                            "while the pool stays busy")


def _proxies(text: str) -> str:
    """Addresses or networks of trusted proxies, checked here: uvicorn would take a mistyped
    one as a name that never matches, and trust nobody without a word."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if items == ["*"]:
        return "*"
    for item in items:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected IP addresses or networks (10.0.0.0/8), comma-separated, or '*', "
                f"got {item!r}") from None
    if not items:
        raise argparse.ArgumentTypeError("expected at least one address, got none")
    return ",".join(items)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from crondepot.api import ApiSettings, create_app
    from crondepot.api.app import PROCESSES_ENV
    from crondepot.api.scrape import MetricsAccess
    from crondepot.api.throttle import ThrottleSettings
    from crondepot.job.url import check_allow_list

    logs.setup(as_json=args.log_json)
    try:
        check_allow_list()
    except ValueError as exc:
        return fail(str(exc))
    with database(args) as db:
        check_schema(db, "crondepot-api")
        if problem := check_pooled_database(args.pooled_db, "crondepot-api", api=True):
            return fail(problem, code=2)
        # Proxy headers only from the proxies named: anyone else could claim https.
        proxies = args.forwarded_allow_ips
        serve: dict[str, Any] = {"host": args.host, "port": args.port, "log_config": None,
                                 "proxy_headers": proxies is not None,
                                 "forwarded_allow_ips": proxies, "server_header": False,
                                 **connection_limits(args)}
        # The app's own limits reach it (every process of --workers N) through the
        # environment, as its other settings do.
        os.environ[BODY_TIMEOUT_ENV] = repr(args.body_timeout)
        os.environ[POOL_WAIT_ENV] = repr(args.pool_wait)
        access = MetricsAccess(token=args.metrics_token, tenant_labels=args.metrics_tenant_labels)
        if args.workers == 1:
            uvicorn.run(create_app(db.url, ApiSettings.from_env(), pooled_url=args.pooled_db,
                                   metrics_access=access,
                                   auth_throttle=ThrottleSettings.from_env()), **serve)
            return 0
        # Several processes on one socket (uvicorn's supervisor restarts a crashed one):
        # each builds its own app from the environment.
        os.environ["CRONDEPOT_DATABASE_URL"] = db.url
        if args.pooled_db:
            os.environ[POOLED_URL_ENV] = args.pooled_db
        else:
            os.environ.pop(POOLED_URL_ENV, None)
        os.environ[PROCESSES_ENV] = str(args.workers)
        os.environ.update(access.env())
        if args.log_json:
            os.environ["CRONDEPOT_LOG_FORMAT"] = "json"
        uvicorn.run("crondepot.api.app:app_from_env", factory=True, workers=args.workers,
                    **serve)
    return 0


def connection_limits(args: argparse.Namespace) -> dict[str, Any]:
    """uvicorn's options for the connection bounds: our h11 protocol for the head's deadline
    (a partial of a module-level class, so --workers N can pickle it to each process)."""
    from crondepot.api.protocol import HeadDeadlineProtocol

    return {"http": functools.partial(HeadDeadlineProtocol, header_timeout=args.header_timeout),
            "timeout_keep_alive": args.keep_alive_timeout,
            # uvicorn counts the connection asking among the open ones: N + 1 lets N in
            "limit_concurrency": args.max_connections + 1}
