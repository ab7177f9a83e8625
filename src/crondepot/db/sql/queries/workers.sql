-- name: worker_beat
-- A worker's announcement and heartbeat in one upsert: the first beat registers it.
INSERT INTO workers (name, host, pid, concurrency, busy)
VALUES (%(name)s, %(host)s, %(pid)s, %(concurrency)s, %(busy)s)
ON CONFLICT (name) DO UPDATE
SET host = excluded.host, pid = excluded.pid, concurrency = excluded.concurrency,
    busy = excluded.busy, heartbeat_at = now(), stopped_at = NULL,
    started_at = CASE WHEN workers.pid <> excluded.pid OR workers.stopped_at IS NOT NULL
                      THEN now() ELSE workers.started_at END;

-- name: worker_stopped
UPDATE workers SET stopped_at = now(), busy = 0 WHERE name = %(name)s;

-- name: forget_old_workers
-- Workers stopped, or silent, for a day are forgotten.
DELETE FROM workers
WHERE coalesce(stopped_at, heartbeat_at) < now() - interval '1 day';

-- name: live_workers
-- Workers that have not said they stopped, with the age of their last heartbeat.
SELECT name, host, pid, concurrency, busy, started_at,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_seconds
FROM workers
WHERE stopped_at IS NULL
ORDER BY name;

-- name: metrics_queue
-- Queue depth and oldest ready age per priority across tenants (index runs_queued).
SELECT priority,
       count(*) AS depth,
       coalesce(extract(epoch FROM now() - min(available_at)
                FILTER (WHERE available_at <= now())), 0)::float8 AS oldest_ready_seconds
FROM runs
WHERE status = 'queued'
GROUP BY priority;

-- name: metrics_dead
SELECT count(*) FROM runs WHERE status = 'dead';

-- name: metrics_ledger_check
-- The latest ledger check (crondepot/scheduler/ledger.py): its age and what it found.
SELECT extract(epoch FROM now() - checked_at)::float8, unaccounted, duplicated, pending
FROM ledger_checks
ORDER BY checked_at DESC
LIMIT 1;

-- name: metrics_scheduler_lag
-- How far behind the schedulers are: now minus the oldest due time not yet turned into
-- runs (0 when nothing is due). Reads the first entry of the jobs_due index.
SELECT coalesce(extract(epoch FROM now() - min(next_run_at)), 0)::float8
FROM jobs
WHERE active AND NOT paused AND next_run_at <= now();
