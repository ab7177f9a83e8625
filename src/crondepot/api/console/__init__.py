"""The web console at ``/console``: the schedule at a glance, behind the API's tenant tokens.

``install(app)`` mounts it on the API app; everything it does goes through the same store
functions as the API and the CLI.
"""

from fastapi import FastAPI

from crondepot.api.console import bulk, forecast, operator
from crondepot.api.console.routes import install as _install_pages
from crondepot.api.console.routes import router


def install(app: FastAPI) -> None:
    """Mount the console: the bulk form first (``/console/jobs/bulk`` is not a job id)."""
    # The operator's read-only view across tenants exists only with this secret set.
    app.state.console_operator_token = operator.token_from_env()
    app.include_router(bulk.router)
    app.include_router(forecast.router)
    _install_pages(app)


__all__ = ["install", "router"]
