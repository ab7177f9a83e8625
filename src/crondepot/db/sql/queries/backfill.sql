-- Backfill (crondepot/runs/backfill.py): the fires of one job in a past range that have no row,
-- written with the run ids the tick would have given them; skipped ones queued again on
-- request. The job row is locked by the caller (lock_tenant_job) for the whole transaction,
-- so the tick, which claims jobs FOR UPDATE SKIP LOCKED and writes only fires from
-- next_nominal_at on, cannot write this job's fires meanwhile; ON CONFLICT on the run id
-- makes a fire written by anyone else a no-op, never a second row.

-- name: backfill_job_timetables
-- The job's earlier timetables in force somewhere in [since, until): (since, until] each,
-- with the window (start_at, end_at) that bounded their fires then.
SELECT cron, tz, since, until, start_at, end_at FROM job_timetables
WHERE job_id = %(job_id)s::bigint AND tenant_id = %(tenant_id)s::bigint
  AND since < %(until)s::timestamptz AND until >= %(since)s::timestamptz
ORDER BY since;

-- name: backfill_existing_runs
-- The rows these fires already have (primary-key probes).
SELECT run_id, status FROM runs
WHERE run_id = ANY(%(run_ids)s::text[]) AND job_id = %(job_id)s::bigint
  AND tenant_id = %(tenant_id)s::bigint;

-- name: backfill_insert_runs
-- The missing fires: queued and due now, or later where a calendar moved one to a business
-- day still ahead (or skipped, past their misfire deadline or by their calendar, as the tick
-- would have written them), one statement; a run id that exists is left as it is.
-- With the job's overlap policy and rate limit, as the tick writes them (tick.sql
-- insert_runs).
INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at,
                  status, skip_reason, finished_at, deadline_at, overlap, rate_limit)
SELECT r.run_id, %(job_id)s::bigint, %(tenant_id)s::bigint, %(priority)s::text, r.nominal_at,
       greatest(%(now)s::timestamptz, r.due_at), greatest(%(now)s::timestamptz, r.due_at),
       CASE WHEN r.skip_reason IS NULL THEN 'queued' ELSE 'skipped' END,
       r.skip_reason,
       CASE WHEN r.skip_reason IS NULL THEN NULL ELSE %(now)s::timestamptz END,
       r.deadline_at,
       coalesce((SELECT j.overlap FROM jobs AS j WHERE j.id = %(job_id)s::bigint), 'allow'),
       (SELECT j.rate_limit FROM jobs AS j WHERE j.id = %(job_id)s::bigint)
FROM unnest(%(run_ids)s::text[], %(nominal_ats)s::timestamptz[], %(due_ats)s::timestamptz[],
            %(skip_reasons)s::text[], %(deadline_ats)s::timestamptz[])
     AS r(run_id, nominal_at, due_at, skip_reason, deadline_at)
ON CONFLICT DO NOTHING
RETURNING run_id, status;

-- name: backfill_requeue_skipped
-- Skipped fires queued again, as a dead-letter replay does (deadletter.sql): the same row
-- and run id, a fresh attempt budget, due now, with the misfire deadline of the job's rule.
-- Conditional on status = 'skipped', so two backfills at once queue a fire once.
UPDATE runs AS r
SET status = 'queued', skip_reason = NULL, attempt = 0, lease_used = interval '0',
    available_at = %(now)s::timestamptz, updated_at = now(), finished_at = NULL,
    last_error = NULL, error_class = NULL, deadline_at = u.deadline_at
FROM unnest(%(run_ids)s::text[], %(deadline_ats)s::timestamptz[]) AS u(run_id, deadline_at)
WHERE r.run_id = u.run_id AND r.job_id = %(job_id)s::bigint
  AND r.tenant_id = %(tenant_id)s::bigint AND r.status = 'skipped'
RETURNING r.run_id;
