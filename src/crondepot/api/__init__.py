"""The HTTP API: ``create_app(database_url)`` builds the FastAPI app served by
``crondepot api``. Routes live in ``routes/``, auth in ``auth``, limits in ``limits``, the
error-to-status mapping in ``problems``; job rules stay in ``crondepot.job``.
"""

from crondepot.api.app import ApiSettings, create_app

__all__ = ["ApiSettings", "create_app"]
