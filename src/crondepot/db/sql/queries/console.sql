-- name: console_runs_by_state
-- The web console's "runs by state": queued and running runs now, and the other states of
-- runs that ended in the last hour. Queued runs are counted in the tenant's range of
-- runs_tenant_status_ended, running ones through runs_running (that index leaves them
-- out, migration 0019): one part each, so that each is planned on its own index.
SELECT status, count(*) AS runs
FROM runs
WHERE tenant_id = %(tenant_id)s::bigint AND status = 'queued'
GROUP BY status
UNION ALL
SELECT status, count(*) AS runs
FROM runs
WHERE tenant_id = %(tenant_id)s::bigint AND status = 'running'
GROUP BY status
UNION ALL
SELECT status, count(*) AS runs
FROM runs
WHERE tenant_id = %(tenant_id)s::bigint AND status NOT IN ('queued', 'running')
  AND created_at >= now() - interval '1 day'
  AND coalesce(finished_at, updated_at) >= now() - interval '1 hour'
GROUP BY status;

-- name: console_minutes
-- Per-minute buckets of the last hour (60 rows, oldest first): runs finished by outcome,
-- and the start lag (first_claimed_at - due_at) of runs first claimed in that minute.
-- The created_at bound lets the BRIN index skip old runs.
WITH buckets AS (
    SELECT generate_series(date_trunc('minute', now()) - interval '59 minutes',
                           date_trunc('minute', now()), interval '1 minute') AS minute
), done AS (
    SELECT date_trunc('minute', finished_at) AS minute,
           count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE status IN ('failed', 'dead')) AS failed
    FROM runs
    WHERE tenant_id = %(tenant_id)s::bigint
      AND created_at >= now() - interval '1 day'
      AND finished_at >= date_trunc('minute', now()) - interval '59 minutes'
    GROUP BY 1
), lag AS (
    SELECT date_trunc('minute', first_claimed_at) AS minute,
           avg(extract(epoch FROM first_claimed_at - due_at))::float8 AS avg_lag,
           max(extract(epoch FROM first_claimed_at - due_at))::float8 AS max_lag
    FROM runs
    WHERE tenant_id = %(tenant_id)s::bigint
      AND created_at >= now() - interval '1 day'
      AND first_claimed_at >= date_trunc('minute', now()) - interval '59 minutes'
    GROUP BY 1
)
SELECT b.minute, coalesce(d.succeeded, 0) AS succeeded, coalesce(d.failed, 0) AS failed,
       l.avg_lag, l.max_lag
FROM buckets b
LEFT JOIN done d ON d.minute = b.minute
LEFT JOIN lag l ON l.minute = b.minute
ORDER BY b.minute;

-- name: console_last_runs
-- The newest run of each of the given jobs of one tenant (the jobs page); index runs_job.
SELECT DISTINCT ON (job_id) job_id, run_id, status, nominal_at, attempt, finished_at,
       error_class
FROM runs
WHERE tenant_id = %(tenant_id)s::bigint AND job_id = ANY(%(job_ids)s::bigint[])
ORDER BY job_id, nominal_at DESC, run_id DESC;
