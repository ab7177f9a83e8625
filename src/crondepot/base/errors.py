"""Every error crondepot raises on purpose, under one root.

    CrondepotError
    ├── InvalidSchedule (also ValueError)   a cron expression or time zone that cannot be used
    ├── InvalidJob (also ValueError)        a job document that breaks a rule; names the field
    ├── DatabaseUnavailable                 no database to talk to (embedded one failed to start, …)
    ├── InvalidSetting (also ValueError)    an environment setting a process cannot start with
    └── TargetError                         raised by targets and handlers to say how a call went
        ├── TemporaryError                  try again later (HTTP 408/429/5xx, connection refused)
        └── PermanentError                  never retry (other 4xx, invalid number, opted out)

Messages say what was expected and what was given, so that the API and the CLI can show
them as they are.
"""

from __future__ import annotations


class CrondepotError(Exception):
    """The root of every error crondepot raises on purpose."""


class InvalidSchedule(CrondepotError, ValueError):
    """A cron expression or time zone that cannot be used.

    ``field`` names the part at fault (``"minute"``, ``"hour"``, ``"day-of-month"``,
    ``"month"``, ``"day-of-week"``, ``"cron"`` for the expression as a whole, ``"tz"``).
    """

    def __init__(self, message: str, *, field: str = "cron") -> None:
        super().__init__(message)
        self.field = field


class InvalidJob(CrondepotError, ValueError):
    """A job document that breaks a rule; ``field`` is its JSON path (``"misfire.until"``).

    The message and field are the first rule broken; ``problems`` lists every one found in
    the document, that one first, as (field, message) pairs, so a client fixes them all at
    once instead of one per attempt.
    """

    def __init__(self, message: str, *, field: str,
                 problems: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.problems = problems if problems else [(field, message)]


class DatabaseUnavailable(CrondepotError):
    """No database could be reached or started."""


class InvalidSetting(CrondepotError, ValueError):
    """An environment setting a process cannot start with (a target allow-list, a relay
    URL): the CLI says so and exits 2 before anything is claimed or sent."""


class TargetError(CrondepotError):
    """Raised by a target or handler to say how a call went.

    ``status_code`` carries the HTTP status when the target answered one.
    """

    def __init__(self, message: str = "", *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class TemporaryError(TargetError):
    """The call may succeed later; the run is retried with backoff.

    ``retry_after_seconds`` carries a server's ``Retry-After`` hint when there was one.
    """

    def __init__(self, message: str = "", *, retry_after_seconds: float | None = None,
                 status_code: int | None = None) -> None:
        super().__init__(message, status_code=status_code)
        self.retry_after_seconds = retry_after_seconds


class PermanentError(TargetError):
    """The call will never succeed as it stands; the run fails without a retry."""
