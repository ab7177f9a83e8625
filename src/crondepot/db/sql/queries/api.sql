-- name: api_token_principal
-- Bearer-token authentication: the sha256 of the presented token, never the token itself,
-- is looked up. A revoked token finds nothing, like an unknown one. Nothing is cached, so a
-- revocation holds for the next request of every API process. The token's last use is
-- written at most once a minute (the UPDATE matches no row otherwise): a read almost always.
WITH found AS (
    SELECT tok.tenant_id, tn.name AS tenant, tok.role, tok.id AS token_id, tok.last_used_at
    FROM api_tokens tok
    JOIN tenants tn ON tn.id = tok.tenant_id
    WHERE tok.token_hash = %(token_hash)s AND tok.revoked_at IS NULL
), touched AS (
    UPDATE api_tokens SET last_used_at = now()
    WHERE id IN (SELECT token_id FROM found
                 WHERE last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
)
SELECT tenant_id, tenant, role, token_id FROM found;

-- name: api_get_run
-- One run of one tenant; another tenant's run id finds nothing (404, not 403).
SELECT run_id, job_id, priority, status, nominal_at, due_at, attempt,
       coalesce(held_available_at, available_at) AS available_at,   -- held: its own (0018)
       lease_owner, lease_expires_at, first_claimed_at, started_at, finished_at, skip_reason,
       last_error, error_class, result, created_at, updated_at
FROM runs
WHERE run_id = %(run_id)s::text AND tenant_id = %(tenant_id)s::bigint;

-- name: api_list_job_runs
-- A job's runs, newest first, after a (nominal_at, run_id) cursor; served by runs_job.
SELECT run_id, job_id, priority, status, nominal_at, due_at, attempt,
       coalesce(held_available_at, available_at) AS available_at,   -- held: its own (0018)
       lease_owner, lease_expires_at, first_claimed_at, started_at, finished_at, skip_reason,
       last_error, error_class, result, created_at, updated_at
FROM runs
WHERE job_id = %(job_id)s::bigint AND tenant_id = %(tenant_id)s::bigint
  AND (%(before_nominal)s::timestamptz IS NULL
       OR (nominal_at, run_id) < (%(before_nominal)s::timestamptz, %(before_run_id)s::text))
ORDER BY nominal_at DESC, run_id DESC
LIMIT %(limit)s::integer;

-- name: api_stats_queue
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

-- name: api_stats_lag
-- Start lag of first attempts claimed in the last 5 minutes: first_claimed_at - due_at.
-- started_at would be wrong: a retry overwrites it. The created_at bound lets the BRIN index
-- skip old runs; a run first claimed more than a day after it was written is left out (the
-- queue depth and oldest age above already shout about such a backlog).
SELECT count(*) AS samples,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) AS p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) AS p99
FROM (
    SELECT extract(epoch FROM first_claimed_at - due_at)::float8 AS lag
    FROM runs
    WHERE tenant_id = %(tenant_id)s::bigint
      AND created_at >= now() - interval '1 day'
      AND first_claimed_at >= now() - interval '5 minutes'
) AS recent;

-- name: api_stats_dead
-- Dead-letter size of one tenant; served by the partial index runs_dead.
SELECT count(*) FROM runs WHERE tenant_id = %(tenant_id)s::bigint AND status = 'dead';

-- name: api_list_runs
-- A tenant's runs across jobs, newest first by when they ended (coalesce(finished_at,
-- due_at): a run not ended yet counts from its due time), after an (ended, run_id) cursor.
-- Filters are optional (NULL = any). runs_tenant_status_ended serves the order: with a
-- status, one range scan that stops at the limit; without one, the tenant's range (a job
-- id alone: runs_job). That index leaves running runs out (migration 0019: a claim writes
-- no entry to it), so the runs are read in two parts, each to the limit, and merged: those
-- not running through that index, the running ones through runs_running (at most the
-- workers' slots, sorted here). The filters are written once, in `listed`, which each
-- part inlines (NOT MATERIALIZED) with its own status condition, so each is planned as
-- the one statement it was.
WITH listed AS NOT MATERIALIZED (
    SELECT * FROM runs r
    WHERE r.tenant_id = %(tenant_id)s::bigint
      AND (%(status)s::text IS NULL OR r.status = %(status)s::text)
      AND (%(job_id)s::bigint IS NULL OR r.job_id = %(job_id)s::bigint)
      AND (%(error)s::text IS NULL OR r.error_class = %(error)s::text
           OR r.last_error ILIKE '%%' || %(error)s::text || '%%')
      AND (%(since)s::timestamptz IS NULL
           OR coalesce(r.finished_at, r.due_at) >= %(since)s::timestamptz)
      AND (%(until)s::timestamptz IS NULL
           OR coalesce(r.finished_at, r.due_at) < %(until)s::timestamptz)
      AND (%(before_at)s::timestamptz IS NULL
           OR (coalesce(r.finished_at, r.due_at), r.run_id)
              < (%(before_at)s::timestamptz, %(before_run_id)s::text))
)
SELECT r.run_id, r.job_id, j.key AS job_key, r.priority, r.status, r.nominal_at, r.due_at,
       r.attempt, coalesce(r.held_available_at, r.available_at) AS available_at, r.lease_owner, r.lease_expires_at, r.first_claimed_at,
       r.started_at, r.finished_at, r.skip_reason, r.last_error, r.error_class, r.result,
       r.created_at, r.updated_at, coalesce(r.finished_at, r.due_at) AS ended_at
FROM ((SELECT * FROM listed WHERE status <> 'running'
       ORDER BY coalesce(finished_at, due_at) DESC, run_id DESC LIMIT %(limit)s::integer)
      UNION ALL
      (SELECT * FROM listed WHERE status = 'running'
       ORDER BY coalesce(finished_at, due_at) DESC, run_id DESC LIMIT %(limit)s::integer)
     ) AS r
JOIN jobs j ON j.id = r.job_id
ORDER BY coalesce(r.finished_at, r.due_at) DESC, r.run_id DESC
LIMIT %(limit)s::integer;

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
