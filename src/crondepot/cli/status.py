"""``crondepot status [--tenant NAME] [--watch]``: the queue at a glance.

Queue depth and the age of the oldest ready run per priority, start lag p50/p99 over the last
five minutes, runs that ended in the last hour by outcome (succeeded, failed, dead, skipped;
``crondepot runs list --status failed --since 1h`` lists them), and the dead-letter size:
the HTTP API's stats, of one tenant or of all of them; for all of them also the latest
ledger check (is every fire accounted for?), and the active holds (``limits pause``,
``hosts pause``) with the queued runs each holds.
``--watch`` redraws every ``--interval`` seconds until Ctrl-C (with ``--json``: one JSON
object per line).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import Any

import psycopg
from rich.console import Group
from rich.table import Table
from rich.text import Text

from crondepot.cli.jobs import console
from crondepot.cli.shared.options import add_database, add_json, operator_connection
from crondepot.cli.shared.output import print_json
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.limits.holds import list_holds
from crondepot.runs.reads import all_tenants_stats, stats
from crondepot.scheduler.ledger import latest_check


def register(commands: Any) -> None:
    parser = commands.add_parser("status", help="queue depth, oldest queued age, start lag "
                                                "and dead-letter size")
    add_database(parser)
    add_json(parser)
    add_tenant(parser, required=False, help_text="only this tenant (default: all tenants)")
    parser.add_argument("--watch", "-w", action="store_true",
                        help="refresh until Ctrl-C")
    parser.add_argument("--interval", type=_interval, default=2.0, metavar="SECONDS",
                        help="seconds between refreshes with --watch (2)")
    parser.set_defaults(run=run)


def read_status(conn: psycopg.Connection[Any], tenant: str | None) -> dict[str, Any]:

    if tenant:
        tenant_of = tenant_id(conn, tenant)
        return {"tenant": tenant, **stats(conn, tenant_of), "holds": _holds(conn, tenant_of)}
    check = latest_check(conn)
    ledger = None if check is None else {
        "checked_at": check.checked_at.isoformat(), "since": check.since.isoformat(),
        "until": check.until.isoformat(), "fires": check.fires,
        "unaccounted": check.unaccounted, "duplicated": check.duplicated,
        "pending": check.pending}
    return {"tenant": None, **all_tenants_stats(conn), "ledger": ledger,
            "holds": _holds(conn, None)}


def _holds(conn: psycopg.Connection[Any], tenant: int | None) -> list[dict[str, Any]]:
    """Active holds (crondepot.limits.holds) and the queued runs each holds."""
    return [h.document() for h in list_holds(conn, tenant)]


def run(args: argparse.Namespace) -> int:
    with operator_connection(args, "crondepot-status") as conn:
        if not args.watch:
            data = read_status(conn, args.tenant)
            if args.json:
                print_json(data)
            else:
                console().print(render(data))
            return 0
        with contextlib.suppress(KeyboardInterrupt):    # Ctrl-C ends --watch: exit 0
            _watch(conn, args)
    return 0


def _watch(conn: psycopg.Connection[Any], args: argparse.Namespace) -> None:
    if args.json:
        while True:
            print(json.dumps(read_status(conn, args.tenant), default=str), flush=True)
            time.sleep(args.interval)
    if not sys.stdout.isatty():
        # Into a file or a pipe: no live redraw (it writes nothing there until it stops);
        # each refresh is printed in full, plain, and flushed.
        while True:
            console().print(render(read_status(conn, args.tenant)))
            print(flush=True)
            time.sleep(args.interval)
    from rich.live import Live

    with Live(render(read_status(conn, args.tenant)), auto_refresh=False,
              screen=False) as live:
        while True:
            time.sleep(args.interval)
            live.update(render(read_status(conn, args.tenant)), refresh=True)


def render(data: dict[str, Any]) -> Group:
    scope = f"tenant {data['tenant']}" if data["tenant"] else "all tenants"
    queue = Table(title=f"crondepot status: {scope}", title_justify="left")
    queue.add_column("priority")
    queue.add_column("ready", justify="right")
    queue.add_column("waiting (retry)", justify="right")
    queue.add_column("oldest ready", justify="right")
    for priority, row in data["queue"].items():
        oldest = row["oldest_ready_seconds"]
        queue.add_row(priority, f"{row['ready']:,}", f"{row['waiting']:,}",
                      _age(oldest), style="bold red" if oldest and oldest > 60 else None)
    lag = data["lag"]
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column()
    if lag["samples"]:
        summary.add_row("start lag (5 min)",
                        f"p50 {_age(lag['p50_seconds'])}  p99 {_age(lag['p99_seconds'])}  "
                        f"({lag['samples']:,} runs started)")
    else:
        summary.add_row("start lag (5 min)", "no run started")
    done = data["finished_last_hour"]
    finished = Text()
    for outcome, count in done.items():
        bad = outcome in ("failed", "dead") and count
        finished.append(f"{outcome} {count:,}", style="bold red" if bad else None)
        finished.append("  ")
    summary.add_row("finished (1 h)", finished)
    dead = data["dead_letter"]
    summary.add_row("dead letter", Text(f"{dead:,}", style="bold red" if dead else "green"))
    if "ledger" in data:
        summary.add_row("ledger check", _ledger(data["ledger"]))
    for hold in data.get("holds", ()):
        noun = "rate limit" if hold["kind"] == "rate_limit" else "host"
        summary.add_row("held", Text(f"{noun} {hold['name']} of {hold['tenant']}: "
                                     f"{hold['queued']:,} queued runs", style="yellow"))
    summary.add_row("at", time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    return Group(queue, summary)


def _ledger(check: dict[str, Any] | None) -> Text:
    if check is None:
        return Text("none yet (the schedulers check every 5 min)", style="yellow")
    problems = check["unaccounted"] + check["duplicated"]
    text = (f"{check['fires']:,} fires since {check['since'][:16]}: "
            f"{check['unaccounted']:,} unaccounted, {check['duplicated']:,} duplicated, "
            f"{check['pending']:,} pending (at {check['checked_at'][:19]})")
    return Text(text, style="bold red" if problems else "green")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 0:
        seconds = 0.0
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 120:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0.1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds from 0.1 to 3600, got {text!r}")
    return value
