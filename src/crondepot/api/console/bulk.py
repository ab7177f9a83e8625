"""The console's bulk form (crondepot.job.bulk): the jobs page's filter sent to a confirmation
page that shows the count and the first keys; only its "Yes" button (a POST with the CSRF
token) changes anything, through the same code as the API and the CLI.

Its router is mounted before the pages' (console/__init__.py): ``/console/jobs/bulk`` is
not a job id.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import HTMLResponse

from crondepot.api.auth import Conn
from crondepot.api.console.routes import (
    Form,
    redirect,
    refuse_unstorable_params,
    render_page,
)
from crondepot.api.console.session import (
    PATH,
    ConsoleError,
    first,
    require_admin,
    require_csrf,
    session,
)
from crondepot.base.errors import InvalidJob
from crondepot.job import bulk
from crondepot.job.bulk import ACTIONS, Action, BulkFilter

router = APIRouter(prefix=PATH, include_in_schema=False,
                   dependencies=[Depends(refuse_unstorable_params)])
FIELDS = ("key_prefix", "label", "host", "rate_limit", "priority")


def _filter(get: Callable[[str], str]) -> tuple[Action, BulkFilter, dict[str, str]]:
    values = {name: get(name).strip()[:500] for name in FIELDS}
    action = get("action")
    if action not in ACTIONS:
        raise ConsoleError(422, "Invalid form", "action must be pause, resume or cancel")
    try:
        where = BulkFilter.checked(key_prefix=values["key_prefix"] or None,
                                   labels=bulk.parse_labels(values["label"]),
                                   host=values["host"] or None,
                                   rate_limit=values["rate_limit"] or None,
                                   priority=values["priority"] or None)
    except InvalidJob as exc:
        raise ConsoleError(422, "Invalid filter", f"{exc.field}: {exc}") from None
    return action, where, values


@router.get("/jobs/bulk")
def confirm(request: Request, conn: Conn) -> HTMLResponse:
    """How many jobs the action would change, and the question (nothing changes here)."""
    current = session(request, conn)
    action, where, values = _filter(lambda n: request.query_params.get(n, ""))
    seen = bulk.preview(conn, current.who.tenant_id, action, where, sample=20)
    jobs_query = urlencode({k: v for k, v in values.items() if k != "host" and
                            k != "rate_limit"})
    return render_page(request, current, "bulk.html", nav="jobs", action=action, count=seen.count,
                 sample=seen.sample, filters=values, jobs_query=jobs_query)


@router.post("/jobs/bulk")
def apply(request: Request, conn: Conn, form: Form) -> Response:
    current = session(request, conn)
    require_csrf(current, form)
    action, where, values = _filter(lambda n: first(form, n))
    require_admin(current, f"{action} jobs")
    if first(form, "confirm") != "yes":
        return redirect(f"{PATH}/jobs/bulk?" + urlencode({"action": action, **values}))
    changed = bulk.apply(conn, current.who.tenant_id, action, where)
    return redirect(f"{PATH}/jobs", notice={"bulk": f"{action}:{changed}"})

