"""Workers as real processes: every run called once, and a killed worker's run comes back."""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.request import urlopen

import psycopg
import pytest

from crondepot.db import connect
from crondepot_testkit.cluster import PrivateCluster
from crondepot_testkit.processes import Proc, free_port, wait_until
from tests.support.jobs import CALLS_TABLE, bulk_due_jobs, grant_limit, queued_runs, tenant
from tests.support.metrics import served_metric


def _workers(url: str, n: int, *extra: str) -> list[Proc]:
    return [Proc("worker", "--db", url, "--import", "tests.support.handlers", "--name", f"w{i}",
                 *extra, env={"CRONDEPOT_TEST_CALLS_URL": url}) for i in range(n)]


def _one(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


def _call_started_at(conn: psycopg.Connection[Any], run_id: str) -> float | None:
    """When the handler began the call of ``run_id`` (Unix seconds), None if not yet."""
    row = conn.execute("SELECT extract(epoch FROM at)::float8 FROM test_calls "
                       "WHERE run_id = %s", (run_id,)).fetchone()
    return None if row is None else float(row[0])


def _called(conn: psycopg.Connection[Any], run_id: str) -> bool:
    return _call_started_at(conn, run_id) is not None


@pytest.mark.slow
def test_10000_runs_over_two_processes_each_called_exactly_once(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 10_000)
        workers = _workers(db_url, 2, "--concurrency", "10", "--urgent-only", "0")
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'succeeded'") == 10_000,
                       timeout=180, interval=0.2, message="10,000 runs succeeded")
        finally:
            for w in workers:
                w.stop()
        assert _one(conn, "SELECT count(*) FROM test_calls") == 10_000
        assert _one(conn, "SELECT count(DISTINCT run_id) FROM test_calls") == 10_000
        assert _one(conn, "SELECT count(DISTINCT pid) FROM test_calls") == 2   # both worked
    assert all(w.popen.returncode == 0 for w in workers)


@pytest.mark.slow
def test_kill_9_mid_call_brings_the_run_back_after_its_lease(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 1, payload='{"sleep": 30}', lease_seconds=5)
        (victim,) = _workers(db_url, 1, "--heartbeat", "1")
        wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1, timeout=60,
                   message="the first call")
        victim.kill(signal.SIGKILL)
        victim.popen.wait()
        # Once its sessions are gone no heartbeat of the victim can still land: the lease it
        # left is the one the run must outlive before anyone calls it again.
        wait_until(lambda: _one(conn, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                      "current_database() AND application_name LIKE "
                                      "'crondepot-worker%'") == 0,
                   timeout=10, message="the victim's sessions to end")
        first_run, first_lease_end = conn.execute(
            "SELECT run_id, lease_expires_at FROM runs WHERE status = 'running'").fetchone() \
            or (None, None)
        assert first_lease_end is not None
        conn.execute("UPDATE jobs SET payload = '{}'")          # the second call is quick
        (rescuer,) = _workers(db_url, 1)
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'succeeded'") == 1, timeout=60, message="retry")
        finally:
            rescuer.stop()
        calls = conn.execute("SELECT run_id, attempt, at FROM test_calls ORDER BY at").fetchall()
        second_claim = _one(conn, "SELECT started_at FROM runs")      # database clock
    assert len(calls) == 2 and calls[0][0] == calls[1][0] == first_run   # same run id, key
    assert [c[1] for c in calls] == [1, 2]
    # Not before the first claim's lease ended: claimed again after it on the database's
    # clock, and called after it (the handler stamps its start with the same host's clock).
    assert second_claim > first_lease_end, (second_claim, first_lease_end)
    assert calls[1][2] >= first_lease_end, (calls[1][2], first_lease_end)


@pytest.mark.slow
def test_a_worker_paused_past_its_lease_starts_no_call_and_its_writes_are_refused(
        db_url: str) -> None:
    port = free_port()
    stale = "crondepot_stale_writes_rejected_total"
    with connect(db_url) as conn:
        queued_runs(conn, 1, payload='{"sleep": 4}', lease_seconds=5)
        (paused,) = _workers(db_url, 1, "--heartbeat", "1", "--metrics-port", str(port))
        wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1, timeout=60,
                   message="the first call")
        assert served_metric(port, stale) == 0
        paused.kill(signal.SIGSTOP)
        conn.execute("UPDATE jobs SET payload = '{}'")
        (other,) = _workers(db_url, 1)
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'succeeded'") == 1, timeout=60, message="takeover")
            (token_after,) = conn.execute("SELECT attempt FROM runs").fetchone()  # type: ignore[misc]
            paused.kill(signal.SIGCONT)
            # The paused call finishes and tries to record; its heartbeat finds the lease gone.
            wait_until(lambda: "outcome not recorded: the run's lease was lost"
                       in paused.output(), timeout=15, message="the refused write")
            stale_after = served_metric(port, stale)
        finally:
            other.stop()
            paused.stop()
        calls = conn.execute("SELECT run_id, attempt FROM test_calls ORDER BY at").fetchall()
        final = conn.execute("SELECT status, attempt FROM runs").fetchone()
    assert [c[1] for c in calls] == [1, 2] and calls[0][0] == calls[1][0]
    assert final == ("succeeded", 2) and token_after == 2
    assert stale_after >= 1            # the lost lease is counted, not only logged


@pytest.mark.slow
def test_a_worker_paused_past_its_leases_starts_none_of_the_runs_it_held(db_url: str) -> None:
    """Runs claimed but not started (waiting for a rate-limit token) when the worker is
    paused past their leases: resumed, it must call none of them, though tokens are there.

    While it resumes, the test holds a SHARE lock on ``runs``, so the heartbeat's UPDATE
    (which would also find the leases gone, and races the slots to it) and every reaper
    wait, as they would behind a slow database: the check of the lease deadline before a
    call is then the only thing between the slots and the target."""
    port = free_port()
    with connect(db_url) as conn:
        queued_runs(conn, 4, lease_seconds=5)
        conn.execute("UPDATE jobs SET rate_limit = 'gate'")
        from crondepot.limits.buckets import set_limit
        set_limit(conn, "gate", 2, 10)
        grant_limit(conn, tenant(conn), "gate")
        # Shut: no token until an hour from now (a waiting slot looks again every 0.5 s).
        conn.execute("UPDATE rate_limits SET tokens = 0, refilled_at = now() + interval '1 h'")
        (worker,) = _workers(db_url, 1, "--concurrency", "4", "--urgent-only", "0",
                             "--heartbeat", "1", "--metrics-port", str(port))
        resumed = False
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'running'") == 4, timeout=60, message="4 claims")
            time.sleep(2)              # waiting for tokens, leases renewed by heartbeats
            assert served_metric(port, "crondepot_calls_not_started_total") == 0
            held = {row[0] for row in conn.execute("SELECT run_id FROM runs").fetchall()}
            worker.kill(signal.SIGSTOP)
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = 'running' "
                                          "AND lease_expires_at < now()") == 4,
                       timeout=15, interval=0.1, message="the leases to expire")
            # Open: tokens for every held run, were it to (wrongly) call them.
            conn.execute("UPDATE rate_limits SET tokens = 10, refilled_at = now()")
            with connect(db_url) as locker, locker.transaction():
                locker.execute("LOCK TABLE runs IN SHARE MODE")   # no UPDATE gets through
                worker.kill(signal.SIGCONT)
                resumed = True
                wait_until(lambda: served_metric(port, "crondepot_calls_not_started_total") == 4
                           or _one(conn, "SELECT count(*) FROM test_calls") > 0,
                           timeout=10, message="4 calls refused (or one made)")
                time.sleep(1)          # room for a call to start, were one going to
                calls = _one(conn, "SELECT count(*) FROM test_calls")
                not_started = served_metric(port, "crondepot_calls_not_started_total")
        finally:
            if not resumed:
                worker.kill(signal.SIGCONT)
            worker.stop()
    assert calls == 0, f"{calls} calls started after the leases expired"
    assert not_started == 4
    refused = {line.get("run_id") for line in worker.lines()
               if line.get("msg") == "lease deadline passed before the call; not calling"}
    assert refused == held


@pytest.mark.slow
def test_permanent_errors_are_never_retried(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 20, handler="test.fail", payload='{"permanent": true}')
        (worker,) = _workers(db_url, 1)
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = 'failed'")
                       == 20, timeout=60, message="20 failed")
            time.sleep(1)
        finally:
            worker.stop()
        assert _one(conn, "SELECT count(*) FROM test_calls") == 20
        assert _one(conn, "SELECT max(attempt) FROM runs") == 1


@pytest.mark.slow
def test_temporary_errors_are_retried_then_dead_lettered_after_6_attempts(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 3, handler="test.fail")
        (worker,) = _workers(db_url, 1)
        try:
            def skip_backoff_and_check() -> bool:
                # Make waiting retries available now: this test counts attempts, not delays.
                conn.execute("UPDATE runs SET available_at = now() WHERE status = 'queued'")
                return bool(_one(conn, "SELECT count(*) FROM runs WHERE status = 'dead'") == 3)
            wait_until(skip_backoff_and_check, timeout=90, interval=0.2, message="dead")
        finally:
            worker.stop()
        assert _one(conn, "SELECT count(*) FROM test_calls") == 18
        assert _one(conn, "SELECT min(attempt) FROM runs") == 6
        assert "gave up after 6 attempts" in _one(conn, "SELECT min(last_error) FROM runs")


@pytest.mark.slow
def test_urgent_only_slots_serve_urgent_while_normal_and_bulk_wait(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 40, priority="bulk", payload='{"sleep": 2}')
        (worker,) = _workers(db_url, 1, "--concurrency", "6", "--urgent-only", "2")
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'running'") == 4, timeout=60, message="4 bulk")
            queued_runs(conn, 2, priority="urgent")
            started = time.monotonic()
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE priority = 'urgent'"
                                          " AND status <> 'queued'") == 2,
                       timeout=10, message="urgent runs started")
            assert time.monotonic() - started < 1.5    # not behind the 2-second bulk calls
        finally:
            worker.stop(timeout=60)


def test_sigterm_releases_runs_waiting_and_exits_0(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 1, payload='{"sleep": 1}')
        (worker,) = _workers(db_url, 1)
        wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1, timeout=60,
                   message="call")
        assert _one(conn, "SELECT count(*) FROM workers WHERE stopped_at IS NULL") == 1
        assert worker.stop(timeout=30) == 0
        assert _one(conn, "SELECT status FROM runs") == "succeeded"   # finished in the grace
        assert _one(conn, "SELECT count(*) FROM workers WHERE stopped_at IS NULL") == 0


@pytest.mark.slow
@pytest.mark.parametrize("handler", ["test.record", "test.async_blocking"])
def test_a_call_longer_than_the_grace_is_abandoned_at_the_grace_and_its_run_comes_back(
        db_url: str, handler: str) -> None:
    with connect(db_url) as conn:
        # The call takes 10 s, the grace is 1 s, the lease 5 s (the shortest a job may ask
        # for), renewed every second while the worker lives. test.async_blocking waits in
        # asyncio's default executor, whose threads the interpreter joins at exit.
        queued_runs(conn, 1, handler=handler, payload='{"sleep": 10}', lease_seconds=5)
        (worker,) = _workers(db_url, 1, "--grace", "1", "--heartbeat", "1")
        wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1, timeout=60,
                   message="the first call")
        first_token = _one(conn, "SELECT lease_token FROM runs")
        stopping = time.monotonic()
        assert worker.stop(timeout=30) == 0
        took = time.monotonic() - stopping
        # Gone at the grace, not when the call ends: it must not linger without heartbeats
        # or an outcome writer (the call's success could not be recorded then anyway).
        assert took < 5, f"the worker took {took:.1f}s to stop with a 1 s grace"
        assert any("abandoning 1 calls" in str(e.get("msg", "")) for e in worker.lines())

        # The run is still the abandoned attempt's: running, same token, lease not renewed.
        assert _one(conn, "SELECT status FROM runs") == "running"
        assert _one(conn, "SELECT lease_token FROM runs") == first_token
        expires_at = _one(conn, "SELECT lease_expires_at FROM runs")

        conn.execute("UPDATE jobs SET payload = '{}'")          # the second call is quick
        (rescuer,) = _workers(db_url, 1, "--heartbeat", "1", "--name", "rescuer")
        try:
            wait_until(lambda: _one(conn, "SELECT status FROM runs") == "succeeded",
                       timeout=60, message="the run comes back and succeeds")
        finally:
            assert rescuer.stop(timeout=30) == 0
        calls = conn.execute("SELECT run_id, attempt, at FROM test_calls ORDER BY at").fetchall()
        assert len(calls) == 2
        assert calls[0][0] == calls[1][0]                       # the same run id, twice
        assert [c[1] for c in calls] == [1, 2]
        assert calls[1][2] >= expires_at                        # not before the lease ended


def _busiest_window(times: list[float], width: float = 1.0) -> int:
    """The most events in any half-open window [t, t + width) — a sliding window."""
    times.sort()
    best, start = 0, 0
    for end, t in enumerate(times):
        while times[start] <= t - width:
            start += 1
        best = max(best, end - start + 1)
    return best


@pytest.mark.slow
def test_three_workers_behind_450_per_second_never_exceed_limit_plus_burst(
        db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 3000)
        conn.execute("UPDATE jobs SET rate_limit = 'sms-gateway'")
        from crondepot.limits.buckets import set_limit
        set_limit(conn, "sms-gateway", 450, 50)
        grant_limit(conn, tenant(conn), "sms-gateway")
        workers = _workers(db_url, 3, "--concurrency", "10", "--urgent-only", "0")
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'succeeded'") == 3000, timeout=120, interval=0.2,
                       message="3000 runs")
        finally:
            for w in workers:
                w.stop()
        times = [row[0] for row in conn.execute(
            "SELECT extract(epoch FROM at)::float8 FROM test_calls").fetchall()]
        pids = _one(conn, "SELECT count(DISTINCT pid) FROM test_calls")
        failed = _one(conn, "SELECT count(*) FROM runs WHERE status <> 'succeeded'")
    busiest = _busiest_window(times)
    span = max(times) - min(times)
    assert pids == 3 and failed == 0
    print(f"busiest 1-second window: {busiest} calls; span {span:.1f} s")
    assert busiest <= 500, f"busiest 1-second window had {busiest} calls"
    assert span >= (3000 - 50) / 450 * 0.95      # the limit really held them back


@pytest.mark.slow
@pytest.mark.parametrize(("normal", "share"), [
    (1500, {"urgent": 0.6, "normal": 0.3, "bulk": 0.1}),       # every queue has a backlog
    (0, {"urgent": 0.6, "normal": 0.0, "bulk": 0.4}),          # normal lends its turns to bulk
], ids=["with-normal-backlog", "no-normal"])
def test_bulk_keeps_at_least_a_tenth_of_claims_under_an_urgent_flood(
        db_url: str, normal: int, share: dict[str, float]) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 3000, priority="urgent")
        if normal:
            queued_runs(conn, normal, priority="normal")
        queued_runs(conn, 1000, priority="bulk")
        (worker,) = _workers(db_url, 1, "--concurrency", "10", "--urgent-only", "0")
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE first_claimed_at "
                                          "IS NOT NULL") >= 1200, timeout=120, interval=0.2,
                       message="1200 runs claimed")
        finally:
            worker.stop()
        rows = conn.execute("SELECT first_claimed_at, priority, count(*) FROM runs "
                            "WHERE first_claimed_at IS NOT NULL GROUP BY 1, 2 "
                            "ORDER BY 1").fetchall()
    # Whole claims (one claim = one first_claimed_at, its transaction's now()), in order, up
    # to the first 1000 runs or so: no queue ran short before then (each backlog is at least
    # 2.5 times its share of them), so nothing but the weights decides.
    claims: dict[Any, Counter[str]] = {}
    for at, priority, count in rows:
        claims.setdefault(at, Counter())[priority] += count
    got: Counter[str] = Counter()
    for claim in claims.values():
        if got.total() >= 1000:
            break
        got += claim
    total = got.total()
    assert len(claims) > 20, "expected many claims, not a few large ones"
    # The worker's weighted order counts along one period from its start, so over any
    # number of turns each priority is within one run of its share (smooth round robin).
    assert got["bulk"] >= 0.1 * total - 1, f"bulk got {got['bulk']} of {total} claims"
    for priority, expected in share.items():
        assert abs(got[priority] - expected * total) <= 1, (dict(got), total)


@pytest.mark.slow
def test_an_idle_worker_starts_a_run_the_scheduler_queued_within_about_100_ms(
        db_url: str) -> None:
    """The scheduler's own tick queues the run and notifies on its commit; the clock runs
    from just before the tick to the handler's start."""
    from crondepot.scheduler.tick import tick

    rng = random.Random()
    with connect(db_url) as conn:
        conn.execute(CALLS_TABLE)
        bulk_due_jobs(conn, 1, due_in_seconds=-1, handler="test.record")
        assert len(tick(conn, batch=10).queued) == 1
        (worker,) = _workers(db_url, 1)
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1, timeout=60,
                       message="warm-up run")
            lags = []
            for _ in range(7):
                conn.execute("DELETE FROM runs; DELETE FROM jobs")
                bulk_due_jobs(conn, 1, due_in_seconds=-1, handler="test.record")
                # Idle for a random while: a worker that only polled (every second) would
                # not stay in step with the trials and would show lags all over [0, 1) s.
                time.sleep(rng.uniform(1.0, 2.0))
                began = time.time()
                (run,) = tick(conn, batch=10).queued
                wait_until(partial(_called, conn, run.run_id), timeout=10, interval=0.005,
                           message="the call")
                lags.append(float(_call_started_at(conn, run.run_id) or 0) - began)
        finally:
            worker.stop()
    lags.sort()
    print(f"tick to call start: {[round(x, 3) for x in lags]}")
    assert lags[3] <= 0.15, f"median lag {lags[3]:.3f}s (all: {lags})"
    assert lags[-1] <= 0.5, f"slowest lag {lags[-1]:.3f}s (all: {lags})"


@pytest.mark.slow
def test_heartbeats_keep_a_call_longer_than_its_lease(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 1, payload='{"sleep": 8}', lease_seconds=5)
        _the_run_succeeds_on_its_one_call(conn, _workers(db_url, 2, "--heartbeat", "1"))


@pytest.mark.slow
def test_an_idle_workers_first_beat_comes_in_time_for_a_short_lease(db_url: str) -> None:
    """An idle worker's heartbeat sleeps its whole --heartbeat interval. A run claimed in that
    sleep with a shorter lease must still be renewed in time, not lost to a second call."""
    with connect(db_url) as conn:
        conn.execute(CALLS_TABLE)

        def queue_while_idle() -> None:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM workers") == 2, timeout=60,
                       message="both workers idle")
            time.sleep(0.5)                         # both heartbeats now in a 10 s sleep
            # A call long enough that a reaper (every 5 s) finds the lease expired if the
            # first beat comes only when the 10 s sleep ends.
            queued_runs(conn, 1, payload='{"sleep": 14}', lease_seconds=5)

        _the_run_succeeds_on_its_one_call(conn, _workers(db_url, 2, "--heartbeat", "10"),
                                          first=queue_while_idle)


def _the_run_succeeds_on_its_one_call(conn: psycopg.Connection[Any], workers: list[Proc], *,
                                      first: Callable[[], None] = lambda: None) -> None:
    """The one queued run succeeds; its lease was never lost, so it was called once."""
    try:
        first()
        wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                      "'succeeded'") == 1, timeout=60, message="done")
    finally:
        for w in workers:
            w.stop()
    assert _one(conn, "SELECT count(*) FROM test_calls") == 1     # never taken over
    assert _one(conn, "SELECT attempt FROM runs") == 1


@pytest.mark.slow
def test_async_handlers_run(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 20, handler="test.async")
        (worker,) = _workers(db_url, 1)
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'succeeded'") == 20, timeout=60, message="20")
        finally:
            worker.stop()
        assert _one(conn, "SELECT count(*) FROM test_calls") == 20


@pytest.mark.slow
def test_sigterm_releases_runs_that_had_not_started(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 5)
        conn.execute("UPDATE jobs SET rate_limit = 'trickle'")
        from crondepot.limits.buckets import set_limit
        set_limit(conn, "trickle", 0.2, 1)              # one call, then one per 5 s
        grant_limit(conn, tenant(conn), "trickle")
        (worker,) = _workers(db_url, 1, "--concurrency", "5", "--urgent-only", "0")
        wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1, timeout=60,
                   message="the one call the bucket allows")
        wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = 'running'")
                   == 4, timeout=30, message="four runs waiting for tokens")
        assert worker.stop(timeout=30) == 0
        rows = conn.execute("SELECT status, attempt, count(*) FROM runs GROUP BY 1, 2 "
                            "ORDER BY 1").fetchall()
    assert rows == [("queued", 0, 4), ("succeeded", 1, 1)]


@pytest.mark.slow
def test_worker_serves_prometheus_metrics_that_move(db_url: str) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    port = free_port()
    with connect(db_url) as conn:
        queued_runs(conn, 30)
        queued_runs(conn, 5, handler="test.fail", payload='{"permanent": true}',
                    priority="bulk")
        (worker,) = _workers(db_url, 1, "--metrics-port", str(port))
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status IN "
                                          "('succeeded', 'failed')") == 35, timeout=60,
                       message="35 runs finished")
            text = urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        finally:
            worker.stop()
    samples = {s.name + str(sorted(s.labels.items())): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples["crondepot_runs_finished_total[('outcome', 'succeeded')]"] == 30
    assert samples["crondepot_runs_finished_total[('outcome', 'failed')]"] == 5
    assert samples["crondepot_attempts_total[('outcome', 'ok'), ('status_class', 'none')]"] == 30
    assert samples["crondepot_start_lag_seconds_count[('priority', 'normal')]"] == 30
    assert samples["crondepot_target_duration_seconds_count[('type', 'python')]"] == 35


@pytest.mark.slow
def test_an_idle_worker_survives_a_database_restart_and_claims_afterwards(
        cluster: PrivateCluster) -> None:
    """Regression (chaos run): an idle worker waiting on LISTEN exited when PostgreSQL
    restarted, instead of backing off and reconnecting."""
    from crondepot.db import migrate

    with connect(cluster.url) as conn:
        migrate(conn)
        queued_runs(conn, 1)
    (worker,) = _workers(cluster.url, 1)
    with connect(cluster.url) as conn:
        wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1,
                   timeout=60, message="first call")
    time.sleep(1)                           # idle, waiting on LISTEN
    cluster.restart("immediate")
    time.sleep(2)
    assert worker.popen.poll() is None, worker.output()[-2000:]

    def second_call() -> bool:
        try:
            with connect(cluster.url) as conn:
                if _one(conn, "SELECT count(*) FROM runs") == 1:
                    conn.execute("DELETE FROM test_calls")
                    queued_runs(conn, 1, priority="urgent")
                return bool(_one(conn, "SELECT count(*) FROM test_calls") == 1)
        except psycopg.OperationalError:
            return False

    wait_until(second_call, timeout=60, interval=0.5, message="a call after the restart")
    assert worker.stop() == 0
