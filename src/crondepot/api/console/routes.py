"""The console's pages and form posts, under ``/console``.

Pages are server-rendered (Jinja2, autoescaped) with a little local JavaScript; every change
is a POST form carrying the session's CSRF token and calls the same store function as the
API route and the CLI command that do it. Another tenant's job or run is "not found", like
an unknown one; a read-only token sees everything and is refused every change (403).
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from crondepot.api import throttle
from crondepot.api.auth import Conn
from crondepot.api.console import operator, views
from crondepot.api.console.session import (
    LOGIN_COOKIE,
    PATH,
    ConsoleError,
    Session,
    check_login_nonce,
    check_token,
    clear_session_cookie,
    end_session,
    first,
    form_fields,
    login_nonce,
    require_admin,
    require_csrf,
    session,
    set_login_cookie,
    set_session_cookie,
    start_session,
)
from crondepot.api.params import bigint_or_none, unstorable_param
from crondepot.api.problems import RateLimited, Unauthorized
from crondepot.base.errors import InvalidJob
from crondepot.base.vocab import NOTICE_STATUSES, PRIORITIES
from crondepot.job.bulk import ACTIONS as ACTIONS_BY_FILTER
from crondepot.job.bulk import parse_labels
from crondepot.job.by_key import job_id_by_key
from crondepot.job.store import (
    JobCancelled,
    JobFilter,
    JobNotFound,
    get_job,
    pause_job,
    resume_job,
    trigger_job,
)
from crondepot.limits.holds import list_holds
from crondepot.notices.channels import list_channels
from crondepot.notices.outbox import held_events, list_messages
from crondepot.runs.attempts import run_attempts
from crondepot.runs.deadletter import DeadFilter, RunNotRetryable, RunPastDeadline, dead_page
from crondepot.runs.deadletter import replay as replay_dead
from crondepot.runs.deadletter import retry as retry_run
from crondepot.runs.reads import (
    RUN_STATES,
    RunFilter,
    encode_run_cursor,
    get_run,
    run_cursor_or_none,
    runs_page,
)


def refuse_unstorable_params(request: Request) -> None:
    """Refuse a query or path parameter PostgreSQL cannot store (a NUL, ``%00``), a
    dependency of every console route: a filter or a run id holding one would otherwise
    fail in the database (a 500)."""
    bad = unstorable_param([*request.path_params.items(), *request.query_params.multi_items()])
    if bad is not None:
        raise ConsoleError(422, "Invalid input", bad[1])


router = APIRouter(prefix=PATH, include_in_schema=False,
                   dependencies=[Depends(refuse_unstorable_params)])
Form = Annotated[dict[str, list[str]], Depends(form_fields)]
REPLAY_LIMIT = 10_000
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "connect-src 'self'; "
                               "img-src 'self' data:; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
NOTICES = {
    "paused": "Job paused: no new runs until it is resumed.",
    "resumed": "Job resumed from now (missed runs are not caught up).",
    "triggered": "A run due now was queued.",
    "already": "A run for this second already exists: nothing new was queued.",
    "retried": "Run queued again: same run id (the same idempotency key), fresh attempts.",
}
LIVE_SECONDS = 3           # the overview's and the panels' refresh (static/console.js)
LIVE_PARTS = ("tiles", "queues", "limits", "system")
STATIC = {"console.css": "text/css; charset=utf-8",
          "console.js": "text/javascript; charset=utf-8"}


def _dt(value: datetime | None) -> str:
    return "—" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _local(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M %Z")


def _secs(value: float | timedelta | None) -> str:
    if value is None:
        return "—"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    sign, seconds = ("−" if seconds < 0 else ""), abs(seconds)
    if seconds < 10:
        return f"{sign}{seconds:.2f} s"
    if seconds < 120:
        return f"{sign}{seconds:.0f} s"
    if seconds < 7200:
        return f"{sign}{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{sign}{seconds / 3600:.1f} h"
    return f"{sign}{seconds / 86400:.1f} d"


def _pretty(value: Any) -> str:
    """Indented JSON as text (autoescaped by the template like any text: a payload's
    "<script>" shows as written, never runs)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


_env = Environment(loader=PackageLoader("crondepot.api.console", "templates"),
                   autoescape=select_autoescape(default=True, default_for_string=True),
                   trim_blocks=True, lstrip_blocks=True)
_env.filters.update(dt=_dt, local=_local, secs=_secs, pretty=_pretty)
_env.globals.update(PATH=PATH, PRIORITIES=PRIORITIES, LIVE_SECONDS=LIVE_SECONDS)


def render(request: Request, template: str, context: dict[str, Any], *,
           status: int = 200) -> HTMLResponse:
    body = _env.get_template(template).render(request=request, **context)
    return HTMLResponse(body, status_code=status,
                        headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})


def redirect(url: str, *, notice: dict[str, str] | None = None) -> RedirectResponse:
    if notice:
        url += ("&" if "?" in url else "?") + urlencode(notice)
    return RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)


def render_page(request: Request, current: Session, template: str, status: int = 200,
                **context: Any) -> HTMLResponse:
    notice = NOTICES.get(request.query_params.get("notice", ""))
    run = request.query_params.get("run", "")
    if re.fullmatch(r"[0-9]{1,19}:[0-9]{1,19}", run):     # a trigger names the run it meant
        notice = {"triggered": f"Run {run} was queued, due now.",
                  "already": f"Already queued: run {run}, this second's run, exists; "
                             "nothing new was queued."}.get(
            request.query_params.get("notice", ""), notice)
    replayed = bigint_or_none(request.query_params.get("replayed", ""))
    if replayed is not None:
        notice = f"{replayed} dead run(s) queued again (same run ids, fresh attempts)."
    return render(request, template, {"s": current, "notice": notice, **context}, status=status)


@contextmanager
def _found(current: Session) -> Iterator[None]:
    """Store errors as console pages: not found (or another tenant's) 404, cancelled 409."""
    try:
        yield
    except JobNotFound:
        raise ConsoleError(404, "Not found", "no such job or run for this tenant",
                           session=current) from None
    except JobCancelled as exc:
        raise ConsoleError(409, "Job cancelled", str(exc), session=current) from None


def _job_id(raw: str) -> int:
    """A job id from the path; anything else is an unknown job (404, via JobNotFound)."""
    job_id = bigint_or_none(raw)
    if job_id is None or job_id < 1:
        raise JobNotFound(f"no job {raw[:30]!r}")
    return job_id


# ----- login / logout ---------------------------------------------------------------------


@router.get("/login")
def login_page(request: Request) -> HTMLResponse:
    nonce = login_nonce(request)
    response = render(request, "login.html", {"csrf": nonce, "error": None})
    set_login_cookie(response, request, nonce)
    return response


@router.post("/login")
def login(request: Request, conn: Conn, form: Form) -> Response:
    check_login_nonce(request, form)
    token = first(form, "token").strip()
    try:
        throttle.refuse_if_throttled(request)
    except RateLimited as exc:
        raise ConsoleError(429, "Slow down", exc.detail, headers=exc.headers) from None
    if token and operator.is_operator_token(request, token):
        # the operator's read-only view across tenants (console/operator.py)
        to_operator = redirect(operator.PATH)
        operator.set_operator_cookie(to_operator, request)
        to_operator.delete_cookie(LOGIN_COOKIE, path=f"{PATH}/login")
        return to_operator
    try:
        if not token:
            raise Unauthorized("paste a token")
        who = check_token(request, conn, token)
    except Unauthorized:
        nonce = login_nonce(request)
        page = render(request, "login.html", {
            "csrf": nonce, "error": "That token is unknown or revoked."}, status=401)
        set_login_cookie(page, request, nonce)
        return page
    except RateLimited as exc:
        raise ConsoleError(429, "Slow down", exc.detail, headers=exc.headers) from None
    response = redirect(PATH)
    set_session_cookie(response, request, start_session(request, conn, who))
    response.delete_cookie(LOGIN_COOKIE, path=f"{PATH}/login")
    return response


@router.post("/logout")
def logout(request: Request, conn: Conn, form: Form) -> Response:
    require_csrf(session(request, conn), form)
    end_session(request, conn)
    response = redirect(f"{PATH}/login")
    clear_session_cookie(response)
    return response


# ----- pages ------------------------------------------------------------------------------


@router.get("")
def overview(request: Request, conn: Conn) -> HTMLResponse:
    current = session(request, conn)
    data = views.overview(conn, current.who.tenant_id)
    return render_page(request, current, "overview.html", nav="overview",
                       holds=list_holds(conn, current.who.tenant_id),
                       limits=views.limit_panel(conn, current.who.tenant_id),
                       sys=views.system_status(conn), live_src=f"{PATH}/live", **data)


@router.get("/limits")
def limits(request: Request, conn: Conn) -> HTMLResponse:
    """The rate-limit panel: per limit the tenant's jobs use, the bucket (rate, burst,
    tokens now), the runs waiting behind it, its hold and a drain estimate; and the
    schedulers, maintenance leader, workers and ledger check."""
    current = session(request, conn)
    return render_page(request, current, "limits.html", nav="limits",
                       limits=views.limit_panel(conn, current.who.tenant_id),
                       sys=views.system_status(conn), live_src=f"{PATH}/live")


@router.get("/notices")
def notices(request: Request, conn: Conn) -> HTMLResponse:
    """The tenant's failure notices: its channels, and its notices newest first (sent,
    pending with the next attempt, failed with the last error), one status or all."""
    current = session(request, conn)
    status = request.query_params.get("status", "")
    if status and status not in NOTICE_STATUSES:
        raise ConsoleError(422, "Invalid filter", f"status: expected one of "
                           f"{', '.join(NOTICE_STATUSES)}, got {status[:30]!r}",
                           session=current)
    tenant = current.who.tenant_id
    return render_page(request, current, "notices.html", nav="notices",
                       channels=list_channels(conn, tenant),
                       messages=list_messages(conn, tenant, status=status or None, limit=100),
                       held=held_events(conn, tenant), shown=status,
                       statuses=NOTICE_STATUSES)


@router.get("/live")
def live(request: Request, conn: Conn) -> JSONResponse:
    """The live parts of the overview and the limit panel, rendered by the same macros as
    the page (``?parts=tiles,queues,limits,system``; all by default): the page's script swaps
    them in every LIVE_SECONDS. A lapsed session is a 401 here, not a redirect."""
    try:
        current = session(request, conn)
    except ConsoleError as exc:
        return JSONResponse({"error": exc.title}, status_code=exc.status,
                            headers={**SECURITY_HEADERS, **exc.headers})
    asked = [p for p in request.query_params.get("parts", "").split(",") if p in LIVE_PARTS]
    parts = asked or list(LIVE_PARTS)
    tenant = current.who.tenant_id
    macros = _env.get_template("_panels.html").module
    html: dict[str, str] = {}
    if "tiles" in parts or "queues" in parts:
        data = views.overview_tiles(conn, tenant)
        if "tiles" in parts:
            html["tiles"] = str(macros.tiles(  # type: ignore[attr-defined]
                data["stats"], data["states"], data["finished_last_hour"], data["workers"]))
        if "queues" in parts:
            html["queues"] = str(macros.queues(  # type: ignore[attr-defined]
                data["stats"], data["states"], data["hour_ago"], data["workers"]))
    if "limits" in parts:
        html["limits"] = str(macros.limits_table(     # type: ignore[attr-defined]
            views.limit_panel(conn, tenant)))
    if "system" in parts:
        html["system"] = str(macros.system(views.system_status(conn)))  # type: ignore[attr-defined]
    return _live_json(html)


def _live_json(html: dict[str, str]) -> JSONResponse:
    return JSONResponse({"at": datetime.now(UTC).isoformat(timespec="seconds"), "parts": html},
                        headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})


# ----- the operator's view across tenants (console/operator.py) ---------------------------


def _operator(request: Request, conn: Any) -> None:
    """Admit an operator request; anything else (a tenant's session included) is a 404."""
    if not operator.is_operator(request):
        raise ConsoleError(404, "Not found", "no such page")
    try:
        operator.admit(request, conn)
    except RateLimited as exc:
        raise ConsoleError(429, "Slow down", exc.detail, headers=exc.headers) from None


@router.get("/operator")
def operator_view(request: Request, conn: Conn) -> HTMLResponse:
    """Every tenant's queues, limits and lag side by side, and the processes; read-only."""
    _operator(request, conn)
    with operator.read_only(conn):
        context = {"tenants": views.tenants_side_by_side(conn),
                   "limits": views.limit_panel(conn, None), "sys": views.system_status(conn)}
    return render(request, "operator.html", {
        "s": None, "operator_csrf": operator.csrf(request), "nav": "operator",
        "live_src": f"{operator.PATH}/live", **context})


@router.get("/operator/live")
def operator_live(request: Request, conn: Conn) -> JSONResponse:
    if not operator.is_operator(request):
        return JSONResponse({"error": "Not found"}, status_code=404, headers=SECURITY_HEADERS)
    _operator(request, conn)
    macros = _env.get_template("_panels.html").module
    with operator.read_only(conn):
        html = {"tenants": str(macros.tenants_table(   # type: ignore[attr-defined]
                    views.tenants_side_by_side(conn))),
                "limits": str(macros.limits_table(     # type: ignore[attr-defined]
                    views.limit_panel(conn, None), with_tenant=True)),
                "system": str(macros.system(  # type: ignore[attr-defined]
                    views.system_status(conn), full=True))}
    return _live_json(html)


@router.post("/operator/logout")
def operator_logout(request: Request, form: Form) -> Response:
    if not operator.is_operator(request):
        raise ConsoleError(404, "Not found", "no such page")
    sent = first(form, "csrf")
    if not sent or not hmac.compare_digest(sent.encode(), operator.csrf(request).encode()):
        raise ConsoleError(403, "Forbidden", "the form's CSRF token is missing or does not "
                           "match; reload the page and try again")
    response = redirect(f"{PATH}/login")
    operator.clear_operator_cookie(response)
    return response


def _bulk_notice(query: Any) -> str | None:
    """The notice after a bulk action (console/bulk.py redirects with ``bulk=pause:123``)."""
    action, _, count = str(query.get("bulk", "")).partition(":")
    if action in ACTIONS_BY_FILTER and count.isdigit():
        return f"{action}: {int(count)} job(s) changed."
    return None


@router.get("/jobs")
def jobs(request: Request, conn: Conn) -> HTMLResponse:
    current = session(request, conn)
    q = request.query_params
    key_prefix = q.get("key_prefix", "").strip()[:200] or None
    priority = q.get("priority") if q.get("priority") in PRIORITIES else None
    paused = {"yes": True, "no": False}.get(q.get("paused", ""))
    active = {"yes": True, "no": False}.get(q.get("active", "yes"))
    # ?cursor= like every list (?after= is the old name, still read)
    after = bigint_or_none(q.get("cursor", "") or q.get("after", "")) or 0
    label = q.get("label", "").strip()[:500]
    try:
        labels = parse_labels(label)
    except InvalidJob as exc:
        raise ConsoleError(422, "Invalid filter", f"{exc.field}: {exc}",
                           session=current) from None
    where = JobFilter(priority=priority, paused=paused, active=active, key_prefix=key_prefix,
                      labels=labels)
    unhealthy = q.get("health") == "unhealthy"
    rows, next_after = views.jobs_page(conn, current.who.tenant_id, where, after=after,
                                       limit=50, unhealthy=unhealthy)
    filters = {"key_prefix": key_prefix or "", "priority": priority or "",
               "paused": q.get("paused", ""), "active": q.get("active", "yes"),
               "health": "unhealthy" if unhealthy else "",
               "label": label}
    next_url = f"{PATH}/jobs?" + urlencode({**filters, "cursor": next_after}) \
        if next_after else None
    return render_page(request, current, "jobs.html", nav="jobs", rows=rows, filters=filters,
                 next_url=next_url, bulk_notice=_bulk_notice(q), back=str(request.url.path) + (
                     "?" + request.url.query if request.url.query else ""))


@router.get("/jobs/{job_id}")
def job(request: Request, conn: Conn, job_id: str) -> HTMLResponse:
    current = session(request, conn)
    raw = request.query_params.get("runs", "")
    asked = bigint_or_none(raw)
    count = min(max(asked, 1), 500) if asked is not None else 25
    with _found(current):
        data = views.job_detail(conn, current.who.tenant_id, _job_id(job_id), count)
    return render_page(request, current, "job.html", nav="jobs", count=count,
                 back=f"{PATH}/jobs/{data['job'].id}", **data)


ACTIONS: dict[str, tuple[str, Callable[..., Any]]] = {
    "pause": ("pause jobs", pause_job),
    "resume": ("resume jobs", resume_job),
    "trigger": ("trigger runs", trigger_job),
}


@router.post("/jobs/{job_id}/{action}")
def job_action(request: Request, conn: Conn, form: Form, job_id: str, action: str) -> Response:
    if action not in ACTIONS:
        raise ConsoleError(404, "Not found", "no such action")
    current = session(request, conn)
    require_csrf(current, form)
    what, call = ACTIONS[action]
    require_admin(current, what)
    with _found(current):
        done = call(conn, current.who.tenant_id, _job_id(job_id))
    notice = {"pause": "paused", "resume": "resumed"}.get(action) or (
        "triggered" if done.created else "already")
    said = {"notice": notice, **({"run": done.run_id} if action == "trigger" else {})}
    return redirect(_back(form, f"{PATH}/jobs/{_job_id(job_id)}"), notice=said)


def _back(form: dict[str, list[str]], default: str) -> str:
    """Where a form asks to return: a console path only (never another site)."""
    back = first(form, "back")
    if re.fullmatch(r"/console(/[A-Za-z0-9_\-/]*)?(\?[A-Za-z0-9_\-=&%.+:]*)?", back):
        return re.sub(r"[?&]notice=[a-z]*|[?&]replayed=\d*|[?&]run=[0-9%A:]*", "", back)
    return default


@router.get("/runs")
def runs(request: Request, conn: Conn) -> HTMLResponse:
    """The tenant's runs across jobs, newest ended first, filtered by state, time, job and
    error (``GET /v1/runs``'s read); 50 a page, paged with its next_cursor."""
    current = session(request, conn)
    q = request.query_params
    values = {name: q.get(name, "").strip()[:500]
              for name in ("status", "job_id", "error", "since", "until")}
    if values["status"] and values["status"] not in RUN_STATES:
        raise ConsoleError(422, "Invalid filter", "status must be one of "
                           + ", ".join(RUN_STATES), session=current)
    job_id = bigint_or_none(values["job_id"]) if values["job_id"] else None
    if values["job_id"] and job_id is None:
        raise ConsoleError(422, "Invalid filter", "job must be a job id (a number)",
                           session=current)
    since, until = _when(values["since"], "since"), _when(values["until"], "until")
    if since is not None and until is not None and since > until:
        raise ConsoleError(422, "Invalid filter", f"since ({values['since']}) is after "
                           f"until ({values['until']})", session=current)
    before = run_cursor_or_none(q.get("cursor", "")[:400] or None, lambda _: ConsoleError(
        422, "Invalid filter", "cursor: not a next page of this list", session=current))
    where = RunFilter(status=values["status"] or None, job_id=job_id,
                      error=values["error"] or None, since=since, until=until)
    rows, cursor = runs_page(conn, current.who.tenant_id, where, before=before, limit=50)
    query = urlencode({k: v for k, v in values.items() if v})
    next_url = f"{PATH}/runs?" + urlencode({**{k: v for k, v in values.items() if v},
                                            "cursor": cursor}) if cursor else None
    return render_page(request, current, "runs.html", nav="runs", runs=rows, filters=values,
                 states=RUN_STATES, next_url=next_url, query=query,
                 first_page=f"{PATH}/runs?{query}" if before else None)


@router.get("/runs/{run_id}")
def run(request: Request, conn: Conn, run_id: str) -> HTMLResponse:
    current = session(request, conn)
    with _found(current):
        row = get_run(conn, current.who.tenant_id, run_id[:100])
        owner = get_job(conn, current.who.tenant_id, row["job_id"])
    row["lateness"] = views.lateness(row)
    return render_page(request, current, "run.html", nav="dead", run=row, job=owner,
                 attempts=run_attempts(conn, row))


@router.post("/runs/{run_id}/retry")
def retry_one(request: Request, conn: Conn, form: Form, run_id: str) -> Response:
    """Queue a failed run again (``POST /v1/runs/{run_id}/retry``): same run id."""
    current = session(request, conn)
    require_csrf(current, form)
    require_admin(current, "retry runs")
    with _found(current):
        try:
            retry_run(conn, current.who.tenant_id, run_id[:100],
                      ignore_deadline=first(form, "ignore_deadline") == "yes")
        except (RunNotRetryable, RunPastDeadline) as exc:
            raise ConsoleError(409, "Not retried", str(exc), session=current) from None
    return redirect(f"{PATH}/runs/{quote(run_id[:100], safe=':')}",
                    notice={"notice": "retried"})


def _dead_filter(conn: Any, current: Session, get: Callable[[str], str], *,
                 run_ids: list[str] | None = None) -> tuple[DeadFilter, dict[str, str]]:
    values = {name: get(name).strip()[:500] for name in ("error", "job_id", "since", "until")}
    job_id = None
    if values["job_id"]:
        # a job id or key, as everywhere (digits are an id; key:123 is a key made of
        # digits); a key of no job of the tenant's matches nothing
        text = values["job_id"]
        if text.isdigit():       # digits (any script): an id, which must be a bigint
            job_id = bigint_or_none(text)
            if job_id is None:
                raise ConsoleError(422, "Invalid filter", "job: expected a job id (a "
                                   "number up to 9223372036854775807) or a key (key:123 "
                                   "for a key made of digits)")
            job_id = job_id or -1       # job 0: none (0 would read as "any job")
        else:
            key = text.removeprefix("key:")
            job_id = job_id_by_key(conn, current.who.tenant_id, key) if key else None
            job_id = job_id or -1       # no such job: matches nothing (0 would be "any")
    since, until = _when(values["since"], "since"), _when(values["until"], "until")
    if since is not None and until is not None and since > until:
        raise ConsoleError(422, "Invalid filter", f"since ({values['since']}) is after "
                           f"until ({values['until']})")
    where = DeadFilter(tenant=current.who.tenant, error=values["error"] or None,
                       job_id=job_id, since=since, until=until, run_ids=run_ids,
                       limit=REPLAY_LIMIT)
    return where, values


def _when(text: str, name: str) -> datetime | None:
    """A datetime-local input (read as UTC) or an ISO 8601 instant."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ConsoleError(422, "Invalid filter", f"{name}: expected a date and time like "
                           "2025-03-30T02:30 (UTC)") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@router.get("/dead-letter")
def dead_letter(request: Request, conn: Conn) -> HTMLResponse:
    current = session(request, conn)
    where, values = _dead_filter(conn, current, lambda n: request.query_params.get(n, ""))
    cursor = request.query_params.get("cursor", "")[:400]
    after = run_cursor_or_none(cursor or None, lambda _: ConsoleError(
        422, "Invalid filter", "cursor: not a next page of this list"))
    # 200 a page, paged with next_cursor like every list; the count and "replay all
    # matching" are of the whole filter, not of the page
    shown, last = dead_page(conn, replace(where, limit=200, after=after))
    total = len(views.dead_letter(conn, where)) if last or after else len(shown)
    next_url = f"{PATH}/dead-letter?" + urlencode(
        {**values, "cursor": encode_run_cursor(*last)}) if last else None
    return render_page(request, current, "dead.html", nav="dead", runs=shown, total=total,
                 filters=values, query=urlencode(values), next_url=next_url,
                 older=after is not None)


@router.get("/dead-letter/replay")
def replay_confirm(request: Request, conn: Conn) -> HTMLResponse:
    """The confirmation before replaying everything matching a filter (nothing changes)."""
    current = session(request, conn)
    where, values = _dead_filter(conn, current, lambda n: request.query_params.get(n, ""))
    matching = replay_dead(conn, where, dry_run=True)
    return render_page(request, current, "replay.html", nav="dead", runs=matching.replayed[:20],
                 count=len(matching.replayed), past_deadline=len(matching.past_deadline),
                 filters=values, query=urlencode(values))


@router.post("/dead-letter/replay")
def replay_runs(request: Request, conn: Conn, form: Form) -> Response:
    current = session(request, conn)
    require_csrf(current, form)
    require_admin(current, "replay dead runs")
    mode = first(form, "mode")
    if mode == "selected":
        run_ids = [r[:100] for r in form.get("run_id", []) if r][:REPLAY_LIMIT]
        if not run_ids:
            raise ConsoleError(422, "Nothing selected", "tick the runs to replay first")
        where = DeadFilter(tenant=current.who.tenant, run_ids=run_ids, limit=REPLAY_LIMIT)
    elif mode == "matching":
        where, values = _dead_filter(conn, current, lambda n: first(form, n))
        if first(form, "confirm") != "yes":
            return redirect(f"{PATH}/dead-letter/replay?" + urlencode(values))
    else:
        raise ConsoleError(422, "Invalid form", "mode must be 'selected' or 'matching'")
    done = replay_dead(conn, where)
    return redirect(f"{PATH}/dead-letter", notice={"replayed": str(len(done.replayed))})


@router.get("/static/{name}")
def static(name: str) -> Response:
    if name not in STATIC:
        raise ConsoleError(404, "Not found", "no such file")
    body = (resources.files("crondepot.api.console") / "static" / name).read_bytes()
    return Response(body, media_type=STATIC[name],
                    headers={**SECURITY_HEADERS, "Cache-Control": "max-age=300"})


# ----- errors -----------------------------------------------------------------------------


async def _error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ConsoleError)
    if exc.redirect:
        response: Response = redirect(exc.redirect)
        if exc.status == 401:
            clear_session_cookie(response)
        return response
    response = render(request, "error.html", {"error": exc, "s": exc.session},
                      status=exc.status)
    response.headers.update(exc.headers)
    return response


def install(app: FastAPI) -> None:
    """Mount the console on ``app`` (its pages and its error pages)."""
    app.include_router(router)
    app.add_exception_handler(ConsoleError, _error)
