"""The maintainer: stands for election, and while this process leads, runs each service on
its own interval in a thread of its own (a ledger check that takes a minute must not hold
up the rescuer's 5-second turns)."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from crondepot.db import ALL_TENANTS, connect
from crondepot.maintenance.cluster_mark import ClusterMark
from crondepot.maintenance.config import MaintenanceConfig
from crondepot.maintenance.leader import IDLE_SECONDS, Leadership, bound_stall
from crondepot.maintenance.ledger_check import check_ledger
from crondepot.maintenance.pause_on_failure import pause_failing_jobs
from crondepot.maintenance.pruner import prune
from crondepot.maintenance.registry import forget_old_workers
from crondepot.maintenance.rescuer import rescue
from crondepot.maintenance.runs_ahead import make_runs_ahead
from crondepot.runtime import metrics

log = logging.getLogger("crondepot.maintenance")


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    every: float                      # seconds between turns
    first: float                      # seconds before the first turn after start
    run: Callable[[psycopg.Connection[Any], MaintenanceConfig], object]
    # How long the server lets the service's session sit idle inside a transaction: no longer
    # than a stalled leader keeps its lock (leader.py); None keeps the connection's 60 s.
    stall_seconds: float | None = IDLE_SECONDS


def services(config: MaintenanceConfig) -> list[Service]:
    """The services this configuration turns on."""
    out = [Service("rescuer", config.reap_seconds, 0.0, rescue),
           Service("cluster_mark", config.reap_seconds, 0.0, ClusterMark()),
           Service("pause_on_failure", config.reap_seconds, 1.0, pause_failing_jobs),
           Service("registry", config.registry_seconds, config.registry_seconds,
                   forget_old_workers),
           Service("runs_ahead", config.partition_seconds, 0.0, make_runs_ahead)]
    if config.retention_days:
        out.append(Service("pruner", config.prune_seconds, 1.0, prune))
    if config.notices is not None:
        out.append(Service("notices", config.notice_seconds, 1.0, config.notices))
    if config.verify_every:
        # Soon after start, at a random moment, then every interval: copies started together
        # do not all ask at once (check_if_due also skips a check made lately by anyone).
        # Its transaction reads one snapshot and locks nothing another process waits for,
        # and between two reads it expands every timetable in Python (seconds at 2.7 M
        # jobs, docs/performance.md): it keeps the longer bound.
        out.append(Service("ledger_check", config.verify_every,
                           min(config.verify_every, 30.0) * (0.5 + random.random()),
                           check_ledger, stall_seconds=None))
    return out


class Maintainer:
    """Start with ``start()``; it stops when ``stop`` is set (the process's own stop)."""

    def __init__(self, config: MaintenanceConfig, stop: threading.Event) -> None:
        self.config = config
        self._stop = stop
        self._leading = threading.Event()
        self._leadership = Leadership(config.url, config.name)
        self._threads: list[threading.Thread] = []

    @property
    def leading(self) -> bool:
        return self._leading.is_set()

    def start(self) -> None:
        if not self.config.enabled:
            return
        self._threads = [threading.Thread(target=self._elect, name="maintenance-election",
                                          daemon=True)]
        self._threads += [threading.Thread(target=self._serve, args=(service,), daemon=True,
                                           name=f"maintenance-{service.name}")
                          for service in services(self.config)]
        for thread in self._threads:
            thread.start()

    def join(self, timeout: float = 5.0) -> None:
        """Wait up to ``timeout`` in all for the services' threads (daemons: one still in a
        long ledger check is left behind, never waited for one by one)."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _elect(self) -> None:
        try:
            while not self._stop.is_set():
                if self._leadership.refresh():
                    self._leading.set()
                else:
                    self._leading.clear()
                self._stop.wait(self.config.elect_seconds)
        finally:
            self._leading.clear()
            self._leadership.release()

    def _serve(self, service: Service) -> None:
        wait = service.first
        while not self._stop.wait(wait):
            # A follower waits for the lock, then takes its turn at once: a new leader rescues
            # runs within seconds of the old one's death.
            if not self._leading.wait(self.config.elect_seconds):
                wait = 0.0   # still a follower; the wait above paced the loop
                continue
            self._turn(service)
            wait = service.every

    def _turn(self, service: Service) -> None:
        try:
            with connect(self.config.url, application_name=(
                    f"crondepot-{self.config.name}-{service.name}"),
                         tenants=ALL_TENANTS) as conn:
                if service.stall_seconds is not None:
                    bound_stall(conn, service.stall_seconds)
                service.run(conn, self.config)
        except psycopg.Error as exc:
            metrics.maintenance_turns.labels(service.name, "error").inc()
            log.warning("maintenance %s failed: %s", service.name,
                        str(exc).strip().splitlines()[0] if str(exc).strip() else exc)
            return
        except Exception:   # a bug must not end the service for good: log it, go on
            metrics.maintenance_turns.labels(service.name, "error").inc()
            log.exception("maintenance %s failed", service.name)
            return
        metrics.maintenance_turns.labels(service.name, "ok").inc()
