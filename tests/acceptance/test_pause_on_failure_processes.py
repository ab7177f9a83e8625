"""pause_after_failures end to end: a scheduler writes a failing job's missed fires, a worker
fails them, and the elected maintenance leader pauses the job, saying why (issue 31, 9)."""

from __future__ import annotations

import pytest

from crondepot.db import connect
from crondepot.job.store import get_job
from crondepot.maintenance.pause_on_failure import ACTOR
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import CALLS_TABLE, add_job, tenant


@pytest.mark.slow
def test_a_failing_job_pauses_itself_under_a_real_scheduler_and_worker(db_url: str) -> None:
    with connect(db_url) as conn:
        conn.execute(CALLS_TABLE)           # test.fail records each call there
        t = tenant(conn)
        job = add_job(conn, t, key="failing", cron="* * * * *", pause_after_failures=2,
                      target={"type": "python", "handler": "test.fail"},
                      payload={"permanent": True})
        # Four fires owed (three minutes back, and now's): the scheduler catches them up.
        conn.execute("UPDATE jobs SET next_nominal_at = date_trunc('minute', now()) - "
                     "interval '3 minutes', next_run_at = date_trunc('minute', now()) - "
                     "interval '3 minutes' WHERE id = %s", (job,))
        procs = [Proc("scheduler", "--db", db_url, "--tick", "500ms"),
                 Proc("worker", "--db", db_url, "--import", "tests.support.handlers",
                      "--name", "w1", env={"CRONDEPOT_TEST_CALLS_URL": db_url})]
        try:
            wait_until(lambda: get_job(conn, t, job).paused, timeout=90,
                       message="the job paused itself")
        finally:
            for proc in procs:
                proc.stop()
        paused = get_job(conn, t, job)
        row = conn.execute("SELECT count(*) FILTER (WHERE status = 'failed'), failing_fires "
                           "FROM runs JOIN jobs ON jobs.id = runs.job_id WHERE job_id = %s "
                           "GROUP BY failing_fires", (job,)).fetchone()
    assert paused.pause is not None and paused.pause.by == ACTOR
    assert paused.pause.note is not None and "failed fires in a row" in paused.pause.note
    assert row is not None and row[0] >= 2 and row[1] >= 2
