"""The web console at ``/console``: the schedule at a glance, behind the API's tenant tokens.

``install(app)`` mounts it on the API app; everything it does goes through the same store
functions as the API and the CLI.
"""

from crondepot.api.console.routes import install, router

__all__ = ["install", "router"]
