-- name: get_run
-- One run of one tenant; another tenant's run id finds nothing (404, not 403).
SELECT run_id, job_id, priority, status, nominal_at, due_at, attempt,
       coalesce(held_available_at, available_at) AS available_at,   -- held: its own (0018)
       lease_owner, lease_expires_at, first_claimed_at, started_at, finished_at, skip_reason,
       last_error, error_class, result, created_at, updated_at
FROM runs
WHERE run_id = %(run_id)s::text AND tenant_id = %(tenant_id)s::bigint;

-- name: list_job_runs
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

-- name: list_runs
-- A tenant's runs across jobs, newest first by when they ended (coalesce(finished_at,
-- due_at): a run not ended yet counts from its due time), after an (ended, run_id) cursor.
-- Filters are optional (NULL = any). runs_tenant_status_ended serves the order: one range
-- scan per status that stops at the limit (a job id alone: runs_job). `statuses` names the
-- statuses other than running the list may hold (the asked one, or every one): each is
-- read through its own range, to the limit, and the few rows merged, so a list across
-- statuses reads at most (statuses x limit) rows of a tenant's history, never the whole
-- of it (one range over the tenant and a sort made it a scan of millions of rows). That
-- index leaves running runs out (migration 0019: a claim writes no entry to it), so the
-- running ones are a second part, read through runs_running (at most the workers' slots,
-- sorted here). The filters are written once, in `listed`, which each part inlines (NOT
-- MATERIALIZED) with its own status condition, so each is planned as the one statement it
-- was; `status <> 'running'` in the first lets it use the partial index.
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
FROM ((SELECT l.* FROM unnest(%(statuses)s::text[]) AS s(status),
       LATERAL (SELECT * FROM listed
                WHERE listed.status = s.status AND listed.status <> 'running'
                ORDER BY coalesce(finished_at, due_at) DESC, run_id DESC
                LIMIT %(limit)s::integer) AS l
       ORDER BY coalesce(l.finished_at, l.due_at) DESC, l.run_id DESC LIMIT %(limit)s::integer)
      UNION ALL
      (SELECT * FROM listed WHERE status = 'running'
       ORDER BY coalesce(finished_at, due_at) DESC, run_id DESC LIMIT %(limit)s::integer)
     ) AS r
JOIN jobs j ON j.id = r.job_id
ORDER BY coalesce(r.finished_at, r.due_at) DESC, r.run_id DESC
LIMIT %(limit)s::integer;

-- name: console_last_runs
-- The newest run of each of the given jobs of one tenant (the jobs page); index runs_job.
SELECT DISTINCT ON (job_id) job_id, run_id, status, nominal_at, attempt, finished_at,
       error_class
FROM runs
WHERE tenant_id = %(tenant_id)s::bigint AND job_id = ANY(%(job_ids)s::bigint[])
ORDER BY job_id, nominal_at DESC, run_id DESC;
