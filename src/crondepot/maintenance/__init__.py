"""Cluster housekeeping, done by one elected process: the maintenance leader.

Every scheduler and worker process stands for election (``leader.py``); the one holding the
maintenance lock runs the services, each on its own interval:

- ``rescuer``: runs whose lease expired go back to the queue (or to the dead letter), and
  queued runs past their misfire deadline are recorded skipped;
- ``pruner``: partitions of runs that ended before the retention period are dropped, and
  finished runs older than it elsewhere are deleted in bounded passes;
- ``runs_ahead``: the next week's day partitions of runs are made;
- ``registry``: workers silent or stopped for a day are forgotten;
- ``ledger_check``: the ledger rule is checked over the recent past (``crondepot verify``);
- ``notices``: the tenants' failure notices composed and sent (``notices/sender.py``, handed
  in through ``MaintenanceConfig.notices``).

Before, every worker reaped every 5 s and pruned every minute: N workers, N times the work,
all but one pass finding nothing. Each service is safe to run twice at once (conditional
updates, SKIP LOCKED, an advisory lock of its own for the ledger check), so the moment two
processes both believe they lead — an old leader that was stopped and resumed — costs
duplicated work, never a wrong result.
"""

from crondepot.maintenance.config import MaintenanceConfig
from crondepot.maintenance.maintainer import Maintainer

__all__ = ["Maintainer", "MaintenanceConfig"]
