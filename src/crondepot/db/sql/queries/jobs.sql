-- name: db_now
-- The database clock: every "now" that decides a schedule comes from here.
SELECT coalesce(%(now)s::timestamptz, now());

-- name: db_clock
-- The database clock now, not at the transaction's start: read after a job's row lock, it
-- is later than the now() of any tick that held the lock before us.
SELECT coalesce(%(now)s::timestamptz, clock_timestamp());

-- name: reserve_job_ids
-- Ids are taken before the insert because H fields and spread offsets hash on the id of a
-- job without a key, and the first next_run_at depends on them.
SELECT nextval(pg_get_serial_sequence('jobs', 'id')) FROM generate_series(1, %(count)s);

-- name: insert_jobs
-- Many jobs in one statement (API create, bulk import). A key already used by the tenant
-- inserts nothing; the caller finds the existing job by key. Arrays travel in binary
-- format: psycopg would otherwise quote every element in Python. created_at is the instant
-- the first fire was computed from (the job's timetable is in force after it). One array
-- per column of job_writes_7, in its order, named and typed as the column table
-- (job/columns.py WRITES) names and types it; a test holds the two together.
INSERT INTO job_writes_7
OVERRIDING SYSTEM VALUE
SELECT * FROM unnest(
    %(id)b::bigint[], %(tenant_id)b::bigint[], %(key)b::text[], %(cron)b::text[],
    %(tz)b::text[], %(next_run_at)b::timestamptz[], %(next_nominal_at)b::timestamptz[],
    %(priority)b::text[], %(active)b::boolean[], %(target)b::jsonb[], %(payload)b::jsonb[],
    %(misfire_policy)b::text[], %(misfire_seconds)b::integer[], %(misfire_until)b::time[],
    %(catchup)b::text[], %(max_catchup)b::integer[], %(spread_seconds)b::integer[],
    %(spread_key)b::text[], %(max_attempts)b::integer[], %(lease_seconds)b::integer[],
    %(rate_limit)b::text[], %(at)b::timestamptz[], %(start_at)b::timestamptz[],
    %(end_at)b::timestamptz[], %(max_runs)b::integer[], %(labels)b::jsonb[],
    %(alert_after_failures)b::integer[], %(retry_base_s)b::float8[],
    %(retry_cap_s)b::float8[], %(pause_after_failures)b::integer[],
    %(crons)b::jsonb[], %(every_s)b::integer[], %(anchor_at)b::timestamptz[],
    %(calendar)b::jsonb[], %(overlap)b::text[], %(delivery_window)b::jsonb[],
    %(created_at)b::timestamptz[])
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING id;

-- name: create_import_table
-- The session's staging table for create_jobs batches of COPY_AT_LEAST or more: the columns
-- of job_writes_7. Filled by binary COPY (psycopg writes those rows in C, with less Python
-- work per job than packing insert_jobs's arrays), emptied at every commit.
CREATE TEMP TABLE IF NOT EXISTS import_jobs ON COMMIT DELETE ROWS AS
SELECT * FROM job_writes_7 WITH NO DATA;

-- name: copy_import_rows
-- The rows of one batch, every column of job_writes_7 in order.
COPY pg_temp.import_jobs FROM STDIN (FORMAT BINARY);

-- name: insert_import_rows
-- insert_jobs for a staged batch, with the same conflict rule. Only ids from first_id on
-- are this batch's: ids come from a sequence, so a batch written earlier in the same
-- transaction (not yet emptied by a commit) has smaller ones. ORDER BY id: the first of two
-- lines with one key wins, as with unnest.
INSERT INTO job_writes_7
OVERRIDING SYSTEM VALUE
SELECT *
FROM pg_temp.import_jobs
WHERE id >= %(first_id)s
ORDER BY id
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING id;

-- name: notify_jobs_changed
-- Wake the schedulers so a job due in a second is not started a tick late.
SELECT pg_notify('crondepot_jobs', '');

-- name: get_tenant_job
-- One job of one tenant. Another tenant's id finds nothing, exactly like an unknown id: the
-- API must not reveal that a job it will not show exists.
SELECT * FROM stored_jobs
WHERE id = %(id)s::bigint AND tenant_id = %(tenant_id)s::bigint;

-- name: lock_tenant_job
-- The same row locked for a read-modify-write (patch, pause, resume, cancel, trigger), so two
-- writers of one job take turns and the version check below them is exact.
SELECT * FROM stored_jobs
WHERE id = %(id)s::bigint AND tenant_id = %(tenant_id)s::bigint
FOR UPDATE;

-- name: get_job_by_key
-- The job a client key names (idempotent create: the key existed, compare documents).
SELECT * FROM stored_jobs
WHERE tenant_id = %(tenant_id)s::bigint AND key = %(key)s::text;

-- name: list_tenant_jobs
-- A page of a tenant's jobs in id order, after the cursor id. Every filter is optional
-- (NULL = any). Keyset pagination: a page costs the same however deep the cursor is.
-- Labels through crondepot_labelled_jobs (functions/labelled_jobs.sql): under row-level
-- security, labels @> here could no longer use the jobs_labelled index.
SELECT * FROM stored_jobs
WHERE tenant_id = %(tenant_id)s::bigint
  AND id > %(after)s::bigint
  AND (%(priority)s::text IS NULL OR priority = %(priority)s::text)
  AND (%(paused)s::boolean IS NULL OR paused = %(paused)s::boolean)
  AND (%(active)s::boolean IS NULL OR active = %(active)s::boolean)
  AND (%(key_prefix)s::text IS NULL OR starts_with(key, %(key_prefix)s::text))
  AND (%(labels)s::jsonb IS NULL
       OR id = ANY (ARRAY(SELECT crondepot_labelled_jobs(%(tenant_id)s::bigint,
                                                         %(labels)s::jsonb))))
ORDER BY id
LIMIT %(limit)s::integer;

-- name: update_job_document
-- A patched document and the next run recomputed from it. Conditional on the version the
-- caller read (If-Match), so a concurrent change is never overwritten.
UPDATE jobs
SET cron = %(cron)s, tz = %(tz)s, priority = %(priority)s, target = %(target)s,
    payload = %(payload)s, misfire_policy = %(misfire_policy)s,
    misfire_seconds = %(misfire_seconds)s, misfire_until = %(misfire_until)s,
    catchup = %(catchup)s, max_catchup = %(max_catchup)s,
    spread_seconds = %(spread_seconds)s, spread_key = %(spread_key)s,
    max_attempts = %(max_attempts)s, lease_seconds = %(lease_seconds)s,
    rate_limit = %(rate_limit)s, at = %(at)s, start_at = %(start_at)s, end_at = %(end_at)s,
    max_runs = %(max_runs)s, labels = %(labels)s,
    alert_after_failures = %(alert_after_failures)s, retry_base_s = %(retry_base_s)s,
    retry_cap_s = %(retry_cap_s)s, pause_after_failures = %(pause_after_failures)s,
    crons = %(crons)s, every_s = %(every_s)s, anchor_at = %(anchor_at)s,
    calendar = %(calendar)s, overlap = %(overlap)s, delivery_window = %(delivery_window)s,
    next_run_at = %(next_run_at)s,
    next_nominal_at = %(next_nominal_at)s, timetable_since = %(timetable_since)s,
    version = version + 1, updated_at = now()
WHERE id = %(id)s::bigint AND tenant_id = %(tenant_id)s::bigint
  AND version = %(version)s::integer AND active;

-- name: set_queued_runs_overlap
-- An edit changed the overlap policy: the job's queued runs carry the new one (the claim
-- reads it from the run row, migration 0026). Running runs keep the one they were leased
-- under: a run leased as `allow` is not counted as running by a rule set after it.
UPDATE runs SET overlap = %(overlap)s::text
WHERE job_id = %(job_id)s::bigint AND status = 'queued' AND overlap <> %(overlap)s::text;

-- name: set_queued_runs_rate_limit
-- An edit changed the rate limit: the job's queued runs carry the new one (the claim's
-- deadline-first order reads it from the run row, migration 0033; the bucket a run takes
-- its token from is always the job's, read at claim time).
UPDATE runs SET rate_limit = %(rate_limit)s::text
WHERE job_id = %(job_id)s::bigint AND status = 'queued'
  AND rate_limit IS DISTINCT FROM %(rate_limit)s::text;

-- name: pause_job
-- Paused jobs leave the jobs_due index. The fires up to the pause are settled by the caller;
-- next_run_at marks the first fire of the pause, from which resume records them 'paused'.
-- The note and the actor (as the audit log names it: crondepot_audit_actor) say why and who.
UPDATE jobs
SET paused = true, next_run_at = %(next_run_at)s, next_nominal_at = %(next_nominal_at)s,
    pause_note = %(note)s::text, paused_at = now(),
    paused_by = crondepot_audit_actor(),
    version = version + 1, updated_at = now()
WHERE id = %(id)s::bigint AND tenant_id = %(tenant_id)s::bigint AND active AND NOT paused;

-- name: resume_job
-- Resuming restarts the timetable from now: the fires missed while paused are not caught up
-- (the caller writes them skipped, reason 'paused').
-- A job that paused itself (pause_after_failures) starts its failure count again: resumed,
-- it would otherwise pause at once.
UPDATE jobs
SET paused = false, next_run_at = %(next_run_at)s, next_nominal_at = %(next_nominal_at)s,
    failing_fires = CASE WHEN paused_by = 'crondepot:pause_after_failures' THEN 0
                         ELSE failing_fires END,
    pause_note = NULL, paused_at = NULL, paused_by = NULL,
    version = version + 1, updated_at = now()
WHERE id = %(id)s::bigint AND tenant_id = %(tenant_id)s::bigint AND active AND paused;

-- name: cancel_job
-- Cancel keeps the row and its runs (history); the job leaves the jobs_due index for good.
-- cancelled_at is the instant the caller settled the job's fires up to: its timetable's end.
UPDATE jobs
SET active = false, cancelled_at = %(now)s::timestamptz, version = version + 1,
    updated_at = now()
WHERE id = %(id)s::bigint AND tenant_id = %(tenant_id)s::bigint AND active;

-- name: count_fires
-- The fires a change to the job settled (store._settle): max_runs counts them like the tick's.
UPDATE jobs SET fire_count = fire_count + %(fires)s::integer WHERE id = %(id)s::bigint;

-- name: end_job
-- A job whose schedule has no further fire (its at run written, its window closed, max_runs
-- reached) ends: like cancel, it keeps its row and runs and leaves the jobs_due index;
-- ended_at is its last fire's nominal time (or the instant its fires were settled up to).
UPDATE jobs
SET active = false, ended_reason = %(reason)s::text, ended_at = %(ended_at)s::timestamptz,
    next_run_at = NULL, next_nominal_at = NULL, version = version + 1, updated_at = now()
WHERE id = %(id)s::bigint AND active;

-- name: cancel_queued_runs
-- The queued runs of a cancelled job are not sent. Running ones finish: their call may
-- already have happened.
UPDATE runs
SET status = 'cancelled', finished_at = now(), updated_at = now(),
    -- a held run's own ready time back (holds.py): only queued runs are at 'infinity'
    available_at = coalesce(held_available_at, available_at), held_available_at = NULL
WHERE job_id = %(job_id)s::bigint AND status = 'queued';

-- name: insert_manual_run
-- Trigger now: one queued run due at once. Its id is made from the second it was asked for,
-- so a retried trigger in the same second (or a scheduled run of that very instant) is the
-- same run, not a second one.
-- With the job's overlap policy (a trigger obeys it too) and rate limit, as the tick writes
-- them.
INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at,
                  overlap, rate_limit)
VALUES (%(run_id)s, %(job_id)s, %(tenant_id)s, %(priority)s, %(now)s, %(now)s, %(now)s,
        coalesce((SELECT j.overlap FROM jobs AS j WHERE j.id = %(job_id)s::bigint), 'allow'),
        (SELECT j.rate_limit FROM jobs AS j WHERE j.id = %(job_id)s::bigint))
ON CONFLICT DO NOTHING
RETURNING run_id;

-- name: insert_job_timetable
-- An edit changed cron, tz or the window (start_at, end_at): the old timetable, its window
-- and the interval (since, until] in which its fires were the job's (crondepot verify and
-- backfill read them). A second change at the same instant leaves an empty interval, which
-- holds no fire and is not kept.
INSERT INTO job_timetables (job_id, tenant_id, cron, tz, since, until, start_at, end_at)
VALUES (%(job_id)s, %(tenant_id)s, %(cron)s, %(tz)s, %(since)s, %(until)s, %(start_at)s,
        %(end_at)s)
ON CONFLICT (job_id, until) DO NOTHING;
