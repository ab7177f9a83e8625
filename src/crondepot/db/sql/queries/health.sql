-- name: run_attempts
-- A run's ended attempts that did not end it (retried, lease expired, failed or dead before
-- a retry), oldest first; served by run_attempts_run. The run row holds the latest attempt.
SELECT attempt, started_at, ended_at, outcome, error, error_class, worker
FROM run_attempts
WHERE run_id = %(run_id)s::text
ORDER BY ended_at, attempt;

-- name: run_worker
-- The worker of the run's latest attempt: the lease owner while it runs, else the name the
-- outcome kept.
SELECT coalesce(lease_owner, worker) AS worker FROM runs WHERE run_id = %(run_id)s::text;

-- name: job_health
-- One job's health: its maintained count of failed fires in a row (jobs.failing_fires), its
-- threshold (the job's, else its tenant's), and its last success, read from runs_job newest
-- first: the scan stops at the first succeeded run, so it reads about failing_fires + 1
-- index entries (all the job's kept runs if it never succeeded).
SELECT j.failing_fires, coalesce(j.alert_after_failures, t.alert_after_failures) AS alert_after,
       j.alert_after_failures IS NOT NULL AS own_threshold,
       s.run_id AS last_success_run_id, s.finished_at AS last_success_at
FROM jobs AS j
JOIN tenants AS t ON t.id = j.tenant_id
LEFT JOIN LATERAL (
    SELECT r.run_id, r.finished_at FROM runs AS r
    WHERE r.job_id = j.id AND r.status = 'succeeded'
    ORDER BY r.nominal_at DESC
    LIMIT 1
) AS s ON true
WHERE j.id = %(job_id)s::bigint AND j.tenant_id = %(tenant_id)s::bigint;

-- name: list_unhealthy_jobs
-- A page of a tenant's unhealthy jobs (failed fires in a row at or above the threshold) in
-- id order, after the cursor id, with list_tenant_jobs' filters. Read from the partial index
-- jobs_failing: only jobs whose last fire failed are in it, never the healthy millions.
SELECT j.* FROM stored_jobs AS j
JOIN jobs AS f ON f.id = j.id
JOIN tenants AS t ON t.id = j.tenant_id
WHERE f.tenant_id = %(tenant_id)s::bigint AND f.failing_fires > 0
  AND f.id > %(after)s::bigint
  AND f.failing_fires >= coalesce(f.alert_after_failures, t.alert_after_failures)
  AND (%(priority)s::text IS NULL OR j.priority = %(priority)s::text)
  AND (%(paused)s::boolean IS NULL OR j.paused = %(paused)s::boolean)
  AND (%(active)s::boolean IS NULL OR j.active = %(active)s::boolean)
  AND (%(key_prefix)s::text IS NULL OR starts_with(j.key, %(key_prefix)s::text))
  AND (%(labels)s::jsonb IS NULL OR f.labels @> %(labels)s::jsonb)
ORDER BY f.id
LIMIT %(limit)s::integer;

-- name: unhealthy_among
-- Which jobs of a page are unhealthy: one primary-key probe per job shown (`<> 0`, not
-- `> 0`, so that the planner cannot prefer reading the tenant's part of jobs_failing, which
-- holds every failing job of the tenant on a bad day).
SELECT j.id FROM jobs AS j JOIN tenants AS t ON t.id = j.tenant_id
WHERE j.id = ANY(%(job_ids)s::bigint[]) AND j.tenant_id = %(tenant_id)s::bigint
  AND j.failing_fires <> 0
  AND j.failing_fires >= coalesce(j.alert_after_failures, t.alert_after_failures);

-- name: unhealthy_jobs_by_tenant
-- The gauge crondepot_jobs_unhealthy{tenant}: per tenant (bounded cardinality), the jobs
-- whose failed fires in a row reached their threshold, but not cancelled ones (a cancel is
-- the operator's answer; an alert on it could never clear). A job that ended by itself
-- (a one-off whose only run failed) still counts. Reads jobs_failing only.
SELECT t.name AS tenant, count(j.id) AS jobs
FROM tenants AS t
LEFT JOIN jobs AS j
  ON j.tenant_id = t.id AND j.failing_fires > 0 AND j.cancelled_at IS NULL
 AND j.failing_fires >= coalesce(j.alert_after_failures, t.alert_after_failures)
GROUP BY t.name;

-- name: set_tenant_alert_after
-- A tenant's default alert threshold for its jobs.
UPDATE tenants SET alert_after_failures = %(alert_after)s::integer
WHERE name = %(tenant)s::text
RETURNING id;

-- name: tenant_alert_after
SELECT alert_after_failures FROM tenants WHERE id = %(tenant_id)s::bigint;

-- name: jobs_to_pause_for_failures
-- Jobs whose latest fires failed pause_after_failures times in a row and that still run:
-- the maintenance leader pauses them (maintenance/pause_on_failure.py). Read on the partial
-- index jobs_failing (failing_fires > 0), never the healthy jobs.
SELECT id, tenant_id, failing_fires
FROM jobs
WHERE failing_fires > 0 AND failing_fires >= pause_after_failures AND active AND NOT paused
ORDER BY id
LIMIT 1000;
