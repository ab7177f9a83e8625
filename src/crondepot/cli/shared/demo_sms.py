"""The demo's SMS gateway: ``sms.send`` for the workers of ``crondepot up --demo``.

The README's tour grants its tenant ``sms.send`` and points reminders at it, as a bank's
jobs point at its real gateway; ``up --demo`` has its workers import this module so those
runs succeed (or fail, for the tour's refused number) instead of dead-lettering with "no
handler". Nothing leaves the machine: the message is logged. A production worker never
imports this (``crondepot worker --import`` names the team's own module).
"""

from __future__ import annotations

import logging

from crondepot.base.errors import PermanentError
from crondepot.worker.handlers import RunContext, handler

log = logging.getLogger("crondepot.demo.sms")

# A number that no gateway would take: the tour's "failed run" to show and retry.
REFUSED = "+910000000000"


@handler("sms.send")
def send(run: RunContext) -> None:
    phone = str(run.payload.get("phone", ""))
    if phone == REFUSED:
        raise PermanentError(f"the demo gateway refuses {phone}: not a valid number")
    log.info("demo sms sent", extra={"run_id": run.run_id, "phone": phone,
                                     "template": run.payload.get("template")})
