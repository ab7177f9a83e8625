-- name: bulk_preview
-- How many of a tenant's jobs a bulk action would change, and the first few keys (dry run).
-- Every filter is optional (NULL = any); the caller requires at least one. Labels are
-- served by jobs_labelled (GIN, migrations 0016 and 0039) through crondepot_labelled_jobs
-- (functions/labelled_jobs.sql: under row-level security an inline labels @> could not use
-- it), the rest by jobs_tenant_key or a scan of the tenant's jobs.
WITH matching AS (
    SELECT id, key FROM jobs
    WHERE tenant_id = %(tenant_id)s::bigint AND active
      AND (%(paused)s::boolean IS NULL OR paused = %(paused)s::boolean)
      AND (%(key_prefix)s::text IS NULL OR starts_with(key, %(key_prefix)s::text))
      AND (%(labels)s::jsonb IS NULL
           OR id = ANY (ARRAY(SELECT crondepot_labelled_jobs(%(tenant_id)s::bigint,
                                                         %(labels)s::jsonb))))
      AND (%(host)s::text IS NULL OR crondepot_host_of(target) = %(host)s::text)
      AND (%(rate_limit)s::text IS NULL OR rate_limit = %(rate_limit)s::text)
      AND (%(priority)s::text IS NULL OR priority = %(priority)s::text)
)
SELECT (SELECT count(*) FROM matching) AS count,
       (SELECT coalesce(array_agg(coalesce(s.key, s.id::text)), '{}')
        FROM (SELECT id, key FROM matching ORDER BY id LIMIT %(sample)s::integer) AS s)
       AS sample;

-- name: bulk_lock_batch
-- The next batch of a bulk action, in id order after the last one, locked as a single-job
-- change locks its job (lock_tenant_job): a scheduler tick or another change of one of
-- them waits for this batch's commit, and the batch sees each job as it stands.
SELECT * FROM stored_jobs
WHERE tenant_id = %(tenant_id)s::bigint AND active AND id > %(after)s::bigint
  AND (%(paused)s::boolean IS NULL OR paused = %(paused)s::boolean)
  AND (%(key_prefix)s::text IS NULL OR starts_with(key, %(key_prefix)s::text))
  AND (%(labels)s::jsonb IS NULL
           OR id = ANY (ARRAY(SELECT crondepot_labelled_jobs(%(tenant_id)s::bigint,
                                                         %(labels)s::jsonb))))
  AND (%(host)s::text IS NULL OR crondepot_host_of(target) = %(host)s::text)
  AND (%(rate_limit)s::text IS NULL OR rate_limit = %(rate_limit)s::text)
  AND (%(priority)s::text IS NULL OR priority = %(priority)s::text)
ORDER BY id
LIMIT %(limit)s::integer
FOR UPDATE;

-- name: bulk_set_paused
-- pause_job (paused true) or resume_job (false) for a batch, one statement: each job's next
-- fire (the first of its pause, or of its timetable from now) is at its id's position in the
-- arrays. The owed fires were written first (insert_runs; 'paused' skips before a resume),
-- as the single-job actions do. Not a join with unnest(): with the statistics saying no job is paused
-- (or all are), the planner joined a seq scan of jobs to the arrays in a nested loop, 8 s
-- a batch of 1,000 among 20,000 jobs; id = ANY is an index scan whatever they say, and
-- array_position costs microseconds for a batch's 1,000 ids.
UPDATE jobs
SET paused = %(paused)s::boolean,
    next_run_at = (%(next_run_ats)s::timestamptz[])[array_position(%(ids)s::bigint[], id)],
    next_nominal_at =
        (%(next_nominal_ats)s::timestamptz[])[array_position(%(ids)s::bigint[], id)],
    -- As resume_job: a job that paused itself starts its failure count again.
    failing_fires = CASE WHEN NOT %(paused)s::boolean
                              AND paused_by = 'crondepot:pause_after_failures' THEN 0
                         ELSE failing_fires END,
    pause_note = CASE WHEN %(paused)s::boolean THEN %(note)s::text END,
    paused_at = CASE WHEN %(paused)s::boolean THEN now() END,
    paused_by = CASE WHEN %(paused)s::boolean THEN crondepot_audit_actor() END,
    version = version + 1, updated_at = now()
WHERE id = ANY (%(ids)s::bigint[]) AND tenant_id = %(tenant_id)s::bigint AND active
  AND paused <> %(paused)s::boolean;

-- name: bulk_cancel_jobs
-- cancel_job for a batch: cancelled_at is the instant their fires were settled up to.
UPDATE jobs
SET active = false, cancelled_at = %(now)s::timestamptz, version = version + 1,
    updated_at = now()
WHERE id = ANY (%(ids)s::bigint[]) AND tenant_id = %(tenant_id)s::bigint AND active;

-- name: bulk_cancel_queued_runs
-- cancel_queued_runs for a batch (runs_job serves it): running runs finish.
UPDATE runs
SET status = 'cancelled', finished_at = now(), updated_at = now(),
    -- a held run's own ready time back (holds.py): only queued runs are at 'infinity'
    available_at = coalesce(held_available_at, available_at), held_available_at = NULL
WHERE job_id = ANY (%(ids)s::bigint[]) AND status = 'queued';
