"""Workers as real processes: every run called once, and a killed worker's run comes back."""

from __future__ import annotations

import signal
import time
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from tests.support.cluster import PrivateCluster
from tests.support.jobs import queued_runs
from tests.support.processes import Proc, wait_until


def _workers(url: str, n: int, *extra: str) -> list[Proc]:
    return [Proc("worker", "--db", url, "--import", "tests.support.handlers", "--name", f"w{i}",
                 *extra, env={"CRONDEPOT_TEST_CALLS_URL": url}) for i in range(n)]


def _one(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


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
        killed_at = time.monotonic()
        conn.execute("UPDATE jobs SET payload = '{}'")          # the second call is quick
        (rescuer,) = _workers(db_url, 1)
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'succeeded'") == 1, timeout=60, message="retry")
        finally:
            rescuer.stop()
        calls = conn.execute("SELECT run_id, attempt FROM test_calls ORDER BY at").fetchall()
    assert len(calls) == 2 and calls[0][0] == calls[1][0]       # same run id, same key
    assert [c[1] for c in calls] == [1, 2]
    assert time.monotonic() - killed_at >= 3                     # not before the lease ended


@pytest.mark.slow
def test_a_worker_paused_past_its_lease_starts_no_call_and_its_writes_are_refused(
        db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 1, payload='{"sleep": 4}', lease_seconds=5)
        (paused,) = _workers(db_url, 1, "--heartbeat", "1")
        wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1, timeout=60,
                   message="the first call")
        paused.kill(signal.SIGSTOP)
        conn.execute("UPDATE jobs SET payload = '{}'")
        (other,) = _workers(db_url, 1)
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'succeeded'") == 1, timeout=60, message="takeover")
            (token_after,) = conn.execute("SELECT attempt FROM runs").fetchone()  # type: ignore[misc]
            paused.kill(signal.SIGCONT)
            time.sleep(6)        # the paused call finishes and tries to record
        finally:
            other.stop()
            paused.stop()
        calls = conn.execute("SELECT run_id, attempt FROM test_calls ORDER BY at").fetchall()
        final = conn.execute("SELECT status, attempt FROM runs").fetchone()
    assert [c[1] for c in calls] == [1, 2] and calls[0][0] == calls[1][0]
    assert final == ("succeeded", 2) and token_after == 2
    assert "outcome not recorded: the run's lease was lost" in paused.output()


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
        from crondepot.ratelimit import set_limit
        set_limit(conn, "sms-gateway", 450, 50)
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
def test_bulk_keeps_at_least_a_tenth_of_claims_under_an_urgent_flood(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 3000, priority="urgent")
        queued_runs(conn, 1000, priority="bulk")
        (worker,) = _workers(db_url, 1, "--concurrency", "10", "--urgent-only", "0")
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'succeeded'") >= 1500, timeout=120, interval=0.2,
                       message="1500 runs")
        finally:
            worker.stop()
        first = conn.execute("SELECT priority FROM runs WHERE first_claimed_at IS NOT NULL "
                             "ORDER BY first_claimed_at, run_id LIMIT 1000").fetchall()
    bulk = sum(1 for (p,) in first if p == "bulk")
    assert bulk >= 100, f"bulk got {bulk} of the first 1000 claims"


@pytest.mark.slow
def test_an_idle_worker_starts_a_new_run_within_about_100_ms(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 1)
        (worker,) = _workers(db_url, 1)
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1, timeout=60,
                       message="warm-up run")
            time.sleep(1.5)                        # the worker is idle, listening
            lags = []
            for _ in range(5):
                conn.execute("DELETE FROM runs; DELETE FROM jobs")
                queued_runs(conn, 1)              # written as a tick would, then…
                conn.execute("NOTIFY crondepot_runs, 'normal'")
                wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE started_at "
                                              "IS NOT NULL") == 1, timeout=10,
                           interval=0.005, message="start")
                lags.append(_one(conn, "SELECT extract(epoch FROM started_at - due_at) "
                                       "FROM runs"))
                time.sleep(1.2)
        finally:
            worker.stop()
    assert sorted(lags)[2] < 0.15, f"median start lag {sorted(lags)[2]:.3f}s (all: {lags})"


@pytest.mark.slow
def test_heartbeats_keep_a_call_longer_than_its_lease(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 1, payload='{"sleep": 8}', lease_seconds=5)
        workers = _workers(db_url, 2, "--heartbeat", "1")
        try:
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
        from crondepot.ratelimit import set_limit
        set_limit(conn, "trickle", 0.2, 1)              # one call, then one per 5 s
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
    from urllib.request import urlopen

    from prometheus_client.parser import text_string_to_metric_families

    from tests.support.processes import free_port

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
