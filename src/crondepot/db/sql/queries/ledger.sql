-- The ledger check (crondepot/scheduler/ledger.py, `crondepot verify`). Every query here takes the same
-- scope: %(tenant)s (NULL: every tenant), and the window %(since)s..%(until)s of nominal
-- times. A job's timetables are its current one, in force after coalesce(timetable_since,
-- created_at) until cancelled_at (or for good), and the earlier ones in job_timetables. A
-- job created with "active": false has no timetable in force (it never fires); the inactive
-- filters below (active OR its end after the window's start) keep its rows out.

-- name: repeatable_read
-- One snapshot for the whole check: a tick that commits meanwhile is seen whole or not at all.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;

-- name: transaction_isolation
-- The isolation of the transaction in progress (db/transactions.py): a request's one
-- transaction must already be REPEATABLE READ where a check needs one snapshot.
SELECT current_setting('transaction_isolation');

-- name: ledger_no_jit
-- The check's queries are scans and index probes over millions of rows: their estimated
-- cost passes jit_optimize_above_cost, and compiling them (in each parallel worker) took up
-- to 4 s for a 24-hour window at 2.7 M jobs (bench/ledger.py), for nothing the probes gain.
SET LOCAL jit = off;

-- name: ledger_timetables
-- The distinct (cron, tz) pairs in force somewhere in the window: their fires are computed
-- once each, however many jobs share them.
SELECT DISTINCT cron, tz FROM (
    SELECT cron, tz FROM jobs
    WHERE (%(tenant)s::bigint IS NULL OR tenant_id = %(tenant)s::bigint)
      AND cron IS NOT NULL     -- an at job's one fire is checked on its own (ledger_fires)
      AND coalesce(timetable_since, created_at) < %(until)s::timestamptz
      AND (active OR coalesce(cancelled_at, ended_at, created_at) >= %(since)s::timestamptz)
    UNION ALL
    SELECT cron, tz FROM job_timetables
    WHERE (%(tenant)s::bigint IS NULL OR tenant_id = %(tenant)s::bigint)
      AND since < %(until)s::timestamptz AND until >= %(since)s::timestamptz
) AS t;

-- name: ledger_hashed_jobs
-- The jobs (id, key) whose timetable in the window is one of these H expressions: H hashes
-- on the job's key (or id), so their fires are computed per distinct expansion.
SELECT DISTINCT j.id, j.key, s.cron, s.tz      -- a cron in force twice (A, B, A): once
FROM (
    SELECT id AS job_id, cron, tz FROM jobs
    WHERE (%(tenant)s::bigint IS NULL OR tenant_id = %(tenant)s::bigint)
      AND cron IS NOT NULL
      AND coalesce(timetable_since, created_at) < %(until)s::timestamptz
      AND (active OR coalesce(cancelled_at, ended_at, created_at) >= %(since)s::timestamptz)
    UNION ALL
    SELECT job_id, cron, tz FROM job_timetables
    WHERE (%(tenant)s::bigint IS NULL OR tenant_id = %(tenant)s::bigint)
      AND since < %(until)s::timestamptz AND until >= %(since)s::timestamptz
) AS s
JOIN unnest(%(crons)s::text[], %(tzs)s::text[]) AS h(cron, tz) USING (cron, tz)
JOIN jobs AS j ON j.id = s.job_id;

-- name: ledger_fires
-- A window (start_at, end_at; migration 0015) bounds the fires of its timetable: the job's
-- current one by the job's window, an earlier one by the window kept with it in
-- job_timetables (the one in force while it was, so a window edit owes no fire it excluded
-- when it passed, and drops none it included); a job that ended by its schedule owes nothing after ended_at, as a cancelled one after
-- cancelled_at. The window's fires judged: how many there are, how many are pending (not owed a row yet:
-- at or after an active job's next_nominal_at), unaccounted (owed, no row) and duplicated
-- (more than one row), on every row; then the first %(limit)s problem fires, one a row (a
-- single row of NULLs after the counts when there is none). A fire's rows are found on
-- runs_job (job_id, nominal_at): one index probe per fire.
--
-- Shaped for 2.7 M jobs (bench/ledger.py): each branch reads a job row once and carries the
-- columns the judgement needs. The jobs without H are one pass over jobs, joined by (cron,
-- tz) to the few shared fires. The H jobs are named in the arrays: one primary-key probe
-- per fire, kept by OFFSET 0 (flattened, the planner hashed all of jobs for them, spilling
-- it to disk). A segments CTE read twice, as this query was first written, was stored for
-- every job and sorted for the H join: 4.2 s of server CPU against 2.0 for a 5-minute window
-- at 09:00 IST (540,000 fires).
WITH fires AS (
    -- current timetables without H
    SELECT j.id AS job_id, j.tenant_id, j.key, j.active, j.next_nominal_at, f.nominal
    FROM jobs AS j
    JOIN unnest(%(crons)s::text[], %(tzs)s::text[], %(nominals)s::timestamptz[])
         AS f(cron, tz, nominal) ON f.cron = j.cron AND f.tz = j.tz
    WHERE (%(tenant)s::bigint IS NULL OR j.tenant_id = %(tenant)s::bigint)
      AND coalesce(j.timetable_since, j.created_at) < %(until)s::timestamptz
      AND (j.active OR coalesce(j.cancelled_at, j.ended_at, j.created_at) >= %(since)s::timestamptz)
      AND f.nominal > coalesce(j.timetable_since, j.created_at)
      AND (j.active OR f.nominal <= coalesce(j.cancelled_at, j.ended_at, j.created_at))
      AND f.nominal BETWEEN coalesce(j.start_at, '-infinity') AND coalesce(j.end_at, 'infinity')
    UNION ALL
    -- current timetables with H
    SELECT j.id, j.tenant_id, j.key, j.active, j.next_nominal_at, f.nominal
    FROM unnest(%(h_job_ids)s::bigint[], %(h_crons)s::text[], %(h_tzs)s::text[],
                %(h_nominals)s::timestamptz[]) AS f(job_id, cron, tz, nominal)
    CROSS JOIN LATERAL (SELECT * FROM jobs WHERE id = f.job_id OFFSET 0) AS j
    WHERE j.cron = f.cron AND j.tz = f.tz
      AND (%(tenant)s::bigint IS NULL OR j.tenant_id = %(tenant)s::bigint)
      AND coalesce(j.timetable_since, j.created_at) < %(until)s::timestamptz
      AND (j.active OR coalesce(j.cancelled_at, j.ended_at, j.created_at) >= %(since)s::timestamptz)
      AND f.nominal > coalesce(j.timetable_since, j.created_at)
      AND (j.active OR f.nominal <= coalesce(j.cancelled_at, j.ended_at, j.created_at))
      AND f.nominal BETWEEN coalesce(j.start_at, '-infinity') AND coalesce(j.end_at, 'infinity')
    UNION ALL
    -- earlier timetables without H
    SELECT j.id, j.tenant_id, j.key, j.active, j.next_nominal_at, f.nominal
    FROM job_timetables AS t
    JOIN unnest(%(crons)s::text[], %(tzs)s::text[], %(nominals)s::timestamptz[])
         AS f(cron, tz, nominal) ON f.cron = t.cron AND f.tz = t.tz
    JOIN jobs AS j ON j.id = t.job_id
    WHERE (%(tenant)s::bigint IS NULL OR t.tenant_id = %(tenant)s::bigint)
      AND t.since < %(until)s::timestamptz AND t.until >= %(since)s::timestamptz
      AND f.nominal > t.since AND f.nominal <= t.until
      AND f.nominal BETWEEN coalesce(t.start_at, '-infinity') AND coalesce(t.end_at, 'infinity')
    UNION ALL
    -- earlier timetables with H
    SELECT j.id, j.tenant_id, j.key, j.active, j.next_nominal_at, f.nominal
    FROM unnest(%(h_job_ids)s::bigint[], %(h_crons)s::text[], %(h_tzs)s::text[],
                %(h_nominals)s::timestamptz[]) AS f(job_id, cron, tz, nominal)
    JOIN job_timetables AS t ON t.job_id = f.job_id AND t.cron = f.cron AND t.tz = f.tz
    JOIN jobs AS j ON j.id = t.job_id
    WHERE (%(tenant)s::bigint IS NULL OR t.tenant_id = %(tenant)s::bigint)
      AND t.since < %(until)s::timestamptz AND t.until >= %(since)s::timestamptz
      AND f.nominal > t.since AND f.nominal <= t.until
      AND f.nominal BETWEEN coalesce(t.start_at, '-infinity') AND coalesce(t.end_at, 'infinity')
    UNION ALL
    -- at jobs: their one fire, found on jobs_at (migration 0015)
    SELECT j.id, j.tenant_id, j.key, j.active, j.next_nominal_at, j.at
    FROM jobs AS j
    WHERE j.at IS NOT NULL
      AND j.at BETWEEN %(since)s::timestamptz AND %(until)s::timestamptz
      AND (%(tenant)s::bigint IS NULL OR j.tenant_id = %(tenant)s::bigint)
      AND j.at > coalesce(j.timetable_since, j.created_at)
      AND (j.active OR j.at <= coalesce(j.cancelled_at, j.ended_at, j.created_at))
),
judged AS MATERIALIZED (
    SELECT job_id, tenant_id, key, nominal AS nominal_at,
           (active AND next_nominal_at IS NOT NULL AND nominal >= next_nominal_at) AS not_owed,
           (SELECT count(*) FROM runs AS r
            WHERE r.job_id = f.job_id AND r.nominal_at = f.nominal) AS rows
    FROM fires AS f
),
totals AS (
    SELECT count(*) AS fires,
           count(*) FILTER (WHERE not_owed AND rows = 0) AS pending,
           min(nominal_at) FILTER (WHERE not_owed AND rows = 0) AS oldest_pending,
           count(*) FILTER (WHERE NOT not_owed AND rows = 0) AS unaccounted,
           count(*) FILTER (WHERE rows > 1) AS duplicated
    FROM judged
)
SELECT t.fires, t.pending, t.unaccounted, t.duplicated, t.oldest_pending,
       p.job_id, p.tenant_id, p.key, p.nominal_at, p.rows
FROM totals AS t
LEFT JOIN LATERAL (
    SELECT job_id, tenant_id, key, nominal_at, rows
    FROM judged
    WHERE (NOT not_owed AND rows = 0) OR rows > 1
    ORDER BY nominal_at, job_id
    LIMIT %(limit)s
) AS p ON true;

-- name: ledger_check_turn
-- A scheduler copy's turn to run the periodic check: it holds the lock (no other copy is
-- checking) and the last check is older than %(every)s seconds; and the oldest fire that
-- check found pending, which this one must reach back to.
SELECT pg_try_advisory_lock(7301847220451893401) AS locked,
       coalesce(last.checked_at < now() - make_interval(secs => %(every)s), true) AS due,
       last.oldest_pending
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (SELECT checked_at, oldest_pending FROM ledger_checks
                   ORDER BY checked_at DESC LIMIT 1) AS last ON true;

-- name: ledger_check_release
SELECT pg_advisory_unlock(7301847220451893401);

-- name: record_ledger_check
-- Keep the last day of checks (about 300 rows at one check every five minutes).
WITH pruned AS (DELETE FROM ledger_checks WHERE checked_at < now() - interval '1 day')
INSERT INTO ledger_checks (since, until, fires, unaccounted, duplicated, pending,
                           oldest_pending, seconds)
VALUES (%(since)s, %(until)s, %(fires)s, %(unaccounted)s, %(duplicated)s, %(pending)s,
        %(oldest_pending)s, %(seconds)s);

-- name: latest_ledger_check
SELECT checked_at, since, until, fires, unaccounted, duplicated, pending, seconds
FROM ledger_checks
ORDER BY checked_at DESC
LIMIT 1;
