-- name: apply_lock
-- Schedules as code (job/apply.py): applies of one tenant's scope take turns. A
-- transaction-level advisory lock on a hash of "tenant:label=value", released at commit or
-- rollback: the second apply reads the jobs only after the first committed, so it plans
-- against the first's result (a no-op when the files agree), never half of it. Two scopes
-- whose hashes collide merely take turns too.
SELECT pg_advisory_xact_lock(hashtextextended(%(name)s::text, 0));

-- name: jobs_by_keys
-- The tenant's jobs these keys name, cancelled and ended ones included (a key names one job
-- for good).
SELECT * FROM stored_jobs
WHERE tenant_id = %(tenant_id)s::bigint AND key = ANY (%(keys)s::text[]);

-- name: scope_jobs
-- The ids and keys of the tenant's active jobs (paused included) that carry the scope's
-- label: what a prune may cancel (only those it cancels are read whole). Through
-- crondepot_labelled_jobs for the jobs_labelled index (see list_tenant_jobs).
SELECT id, key FROM stored_jobs
WHERE tenant_id = %(tenant_id)s::bigint AND active
  AND id = ANY (ARRAY(SELECT crondepot_labelled_jobs(%(tenant_id)s::bigint,
                                                     %(labels)s::jsonb)))
ORDER BY id;

-- name: queued_run_counts
-- How many queued runs each of these jobs has: what cancelling it cancels (the plan says).
SELECT job_id, count(*) AS queued
FROM runs
WHERE job_id = ANY (%(ids)s::bigint[]) AND status = 'queued'
GROUP BY job_id;

-- name: export_jobs
-- A tenant's active jobs (paused included), in id order, for ``crondepot export``: read
-- through a server-side cursor, so memory stays bounded however many there are. Optionally
-- only those carrying the labels (a scope).
SELECT * FROM stored_jobs
WHERE tenant_id = %(tenant_id)s::bigint AND active
  AND (%(labels)s::jsonb IS NULL
       OR id = ANY (ARRAY(SELECT crondepot_labelled_jobs(%(tenant_id)s::bigint,
                                                         %(labels)s::jsonb))))
ORDER BY id;
