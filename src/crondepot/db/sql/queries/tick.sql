-- name: claim_due_jobs
-- The scheduler's claim. Rows come from the partial indexes of due jobs in due order; SKIP
-- LOCKED lets every scheduler copy take a different slice of the due jobs at once instead
-- of queueing behind each other's locks. The locks last until the tick's transaction ends,
-- so a job is planned by exactly one copy per pass. "now" is the database's clock (or one
-- injected by tests), never a host clock: copies on skewed hosts agree on what is due.
-- OFFSET 0 keeps "now" a value of its own (a parameter of the scan): pulled up into the
-- scan's WHERE as coalesce(...), PostgreSQL counts it as leaky (it may not run before the
-- row-level security policy, docs/operations.md) and reads every job instead of jobs_due.
-- Urgent jobs come first, whatever their due time: in due order alone an urgent job due at
-- 9:00:05 waits until the copies have written every reminder due at 9:00:00 (docs/scheduler.md).
-- The first branch reads jobs_due_urgent (migration 0038; one empty probe when no urgent job
-- is due), the second jobs_due without them. An
-- Append runs its branches in order (a plan with FOR UPDATE is never parallel), and the
-- outer LIMIT stops it: a branch's rows are locked one by one as they are returned, so the
-- second branch locks only what fills the batch. (FOR UPDATE may not apply to a UNION's
-- branch itself, hence the subqueries.)
-- delivery_window is the job's own; its tenant's default comes from tenant_delivery_windows,
-- read once a tick for the batch's tenants, never a probe of tenants per claimed job.
-- overlap and rate_limit travel with the job to insert_runs, which then reads no job row.
SELECT j.id, j.key, j.cron, j.tz, j.next_nominal_at, j.spread_seconds, j.spread_key,
       j.catchup, j.max_catchup, j.misfire_policy, j.misfire_seconds, j.misfire_until,
       j.tenant_id, j.priority, j.at, j.start_at, j.end_at, j.max_runs, j.fire_count,
       j.calendar, t.now, j.delivery_window, j.overlap, j.rate_limit
FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now OFFSET 0) AS t,
     LATERAL (
         SELECT * FROM (SELECT * FROM jobs
                        WHERE active AND NOT paused AND next_run_at <= t.now
                              AND priority = 'urgent'
                        ORDER BY next_run_at
                        LIMIT %(batch)s
                        FOR UPDATE SKIP LOCKED) AS urgent
         UNION ALL
         SELECT * FROM (SELECT * FROM jobs
                        WHERE active AND NOT paused AND next_run_at <= t.now
                              AND priority <> 'urgent'
                        ORDER BY next_run_at
                        LIMIT %(batch)s
                        FOR UPDATE SKIP LOCKED) AS other
     ) AS j
LIMIT %(batch)s;

-- name: tenant_delivery_windows
-- The default delivery windows of these tenants (those that have one), for the claimed jobs
-- without a window of their own.
SELECT id, delivery_window FROM tenants
WHERE id = ANY(%(tenant_ids)s::bigint[]) AND delivery_window IS NOT NULL;

-- name: insert_runs
-- All the runs of a tick (or of a job's settled fires, job/store.py) in one statement, one
-- round trip however many rows. They come as kinds and members (scheduler/batch.py): each
-- distinct kind of run (tenant, priority, nominal and due times, skip reason, deadline,
-- overlap, rate limit) once, as binary arrays; per run only its id, its job and its kind's
-- number, as array literals. A burst's 2,000 runs a tick are a few kinds, so nearly
-- nothing is sent twice. ON CONFLICT DO NOTHING makes a repeated run id (a retried tick, a
-- manual trigger of the same instant) a no-op instead of a second run. It names no conflict
-- target on purpose (every insert of runs does the same): the arbiters are then the unique
-- indexes of the table the row lands in, runs_pkey here (an inserted run is never running,
-- so runs_overlap_running never arbitrates). A target of (run_id) needs a unique index on
-- run_id alone on the table named, which `runs` partitioned by nominal time cannot have
-- (the partition key must be in it); without a target this statement works on both layouts,
-- so a release that partitions runs can roll out beside this one (docs/operations.md,
-- "Partitions of runs").
-- Each run carries its job's overlap policy (migration 0026): the tick passes the one its
-- claim read (the job row is locked until the tick commits, so it cannot change); a kind
-- with a null one gets it read here, by one jobs_pkey probe per run, so no caller can
-- forget it. (The probe for every run was ~4 buffer hits a run, a tenth of the insert at
-- 100 k jobs.) Its job's rate limit likewise (migration 0033; NULL is a value, no limit,
-- so a caller that does not know the limits says so with limits_known).
INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at,
                  status, skip_reason, finished_at, deadline_at, overlap, rate_limit)
SELECT r.run_id, r.job_id, k.tenant_id, k.priority, k.nominal_at, k.due_at, k.due_at,
       CASE WHEN k.skip_reason IS NULL THEN 'queued' ELSE 'skipped' END,
       k.skip_reason,
       CASE WHEN k.skip_reason IS NULL THEN NULL
            ELSE coalesce(%(now)s::timestamptz, now()) END,
       k.deadline_at,
       coalesce(k.overlap, (SELECT j.overlap FROM jobs AS j WHERE j.id = r.job_id), 'allow'),
       CASE WHEN %(limits_known)s::boolean THEN k.rate_limit
            ELSE (SELECT j.rate_limit FROM jobs AS j WHERE j.id = r.job_id) END
FROM unnest(%(run_ids)s::text[], %(job_ids)s::bigint[], %(kinds)s::integer[])
     AS r(run_id, job_id, kind)
JOIN unnest(%(tenant_ids)b::bigint[], %(priorities)b::text[], %(nominal_ats)b::timestamptz[],
            %(due_ats)b::timestamptz[], %(skip_reasons)b::text[],
            %(deadline_ats)b::timestamptz[], %(overlaps)b::text[], %(rate_limits)b::text[])
     WITH ORDINALITY
     AS k(tenant_id, priority, nominal_at, due_at, skip_reason, deadline_at, overlap,
          rate_limit, kind)
     ON k.kind = r.kind
ON CONFLICT DO NOTHING;

-- name: advance_jobs
-- Every claimed job's next run in one statement (the rows are still locked by this
-- transaction, so nobody else moved them meanwhile), the fires written counted (max_runs);
-- a job with no further fire ends here (ended_reason, and ended_at: its last fire's
-- nominal time, after which the ledger owes it nothing), and leaves the jobs_due index.
-- Like insert_runs, each distinct plan comes once and each job names its plan's number.
UPDATE jobs AS j
SET next_run_at = p.next_run_at, next_nominal_at = p.next_nominal_at,
    fire_count = j.fire_count + p.fires,
    active = j.active AND p.ended_reason IS NULL,
    ended_reason = coalesce(p.ended_reason, j.ended_reason),
    ended_at = CASE WHEN p.ended_reason IS NULL THEN j.ended_at ELSE p.ended_at END
FROM unnest(%(ids)s::bigint[], %(plans)s::integer[]) AS u(id, plan)
     JOIN unnest(%(next_run_ats)b::timestamptz[], %(next_nominal_ats)b::timestamptz[],
                 %(fires)b::integer[], %(ended_reasons)b::text[],
                 %(ended_ats)b::timestamptz[]) WITH ORDINALITY
          AS p(next_run_at, next_nominal_at, fires, ended_reason, ended_at, plan)
          ON p.plan = u.plan
WHERE j.id = u.id;

-- name: put_off_jobs
-- Claimed jobs whose timetable cannot be read: due again later; next_nominal_at stays, so
-- the fires they owe stay owed (pending to the ledger) until the job is edited or readable.
UPDATE jobs
SET next_run_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(seconds)s)
WHERE id = ANY(%(ids)s::bigint[]);

-- name: notify_runs_queued
-- Wake idle workers; delivered only if the tick commits.
SELECT pg_notify('crondepot_runs', %(priorities)s);

-- name: seconds_until_next_due
-- How long the scheduler may sleep: until the earliest due job, on the database clock.
SELECT extract(epoch FROM min(next_run_at) - coalesce(%(now)s::timestamptz, now()))::float8
FROM jobs
WHERE active AND NOT paused;

-- name: listen_jobs_changed
-- Job writers NOTIFY crondepot_jobs so that a job due in one second is not started late.
LISTEN crondepot_jobs;
