-- name: tenant_queue_depth
-- Queue depth per priority: runs ready now, runs waiting for a retry time, and how long the
-- oldest ready run has waited. Reads the partial index runs_queued only.
SELECT priority,
       count(*) FILTER (WHERE available_at <= now()) AS ready,
       count(*) FILTER (WHERE available_at > now()) AS waiting,
       extract(epoch FROM now() - min(available_at) FILTER (WHERE available_at <= now()))
           ::float8 AS oldest_ready_seconds
FROM runs
WHERE status = 'queued' AND tenant_id = %(tenant_id)s::bigint
GROUP BY priority;

-- name: queue_depth
-- tenant_queue_depth across every tenant: what ``crondepot status`` shows without --tenant.
-- Reads the partial index runs_queued only.
SELECT priority,
       count(*) FILTER (WHERE available_at <= now()) AS ready,
       count(*) FILTER (WHERE available_at > now()) AS waiting,
       extract(epoch FROM now() - min(available_at) FILTER (WHERE available_at <= now()))
           ::float8 AS oldest_ready_seconds
FROM runs
WHERE status = 'queued'
GROUP BY priority;

-- name: start_lag
-- Start lag of first attempts claimed in the last 5 minutes, first_claimed_at - due_at, of
-- one tenant or (tenant_id NULL) of all. started_at would be wrong: a retry overwrites it.
-- The created_at bound lets the BRIN index skip old runs; a run first claimed more than a
-- day after it was written is left out (the queue depth and the oldest ready age already
-- show such a backlog). No index has the tenant first, so the tenant is a filter either way.
SELECT count(*) AS samples,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) AS p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) AS p99
FROM (
    SELECT extract(epoch FROM first_claimed_at - due_at)::float8 AS lag
    FROM runs
    WHERE (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s::bigint)
      AND created_at >= now() - interval '1 day'
      AND first_claimed_at >= now() - interval '5 minutes'
) AS recent;

-- name: tenant_dead_count
-- Dead-letter size of one tenant; served by the partial index runs_dead.
SELECT count(*) FROM runs WHERE tenant_id = %(tenant_id)s::bigint AND status = 'dead';

-- name: dead_count
-- Dead-letter size across every tenant; served by the partial index runs_dead.
SELECT count(*) FROM runs WHERE status = 'dead';

-- name: finished_last_hour
-- Runs that ended in the last hour, by outcome, of one tenant (or of all of them when
-- %(tenant_id)s is NULL): one index range of runs_tenant_status_ended per tenant and
-- outcome (the LATERAL count makes it so even where the planner would rather scan), so the
-- cost is the runs counted, not the table.
SELECT o.status, sum(c.runs)::bigint AS runs
FROM tenants t
CROSS JOIN unnest(ARRAY['succeeded', 'failed', 'dead', 'skipped']) AS o (status)
CROSS JOIN LATERAL (
    SELECT count(*) AS runs
    FROM runs r
    WHERE r.tenant_id = t.id AND r.status = o.status
      AND r.status <> 'running'            -- never, but it lets the planner use the index
      AND coalesce(r.finished_at, r.due_at) >= now() - interval '1 hour'
) AS c
WHERE %(tenant_id)s::bigint IS NULL OR t.id = %(tenant_id)s::bigint
GROUP BY o.status;

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
