-- The ledger check (crondepot/ledger.py, `crondepot verify`). Every query here takes the same
-- scope: %(tenant)s (NULL: every tenant), and the window %(since)s..%(until)s of nominal
-- times. A job's timetables are its current one, in force after coalesce(timetable_since,
-- created_at) until cancelled_at (or for good), and the earlier ones in job_timetables. A
-- job created with "active": false has no timetable in force (it never fires); the inactive
-- filters below (active OR its end after the window's start) keep its rows out.

-- name: repeatable_read
-- One snapshot for the whole check: a tick that commits meanwhile is seen whole or not at all.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;

-- name: ledger_timetables
-- The distinct (cron, tz) pairs in force somewhere in the window: their fires are computed
-- once each, however many jobs share them.
SELECT DISTINCT cron, tz FROM (
    SELECT cron, tz FROM jobs
    WHERE (%(tenant)s::bigint IS NULL OR tenant_id = %(tenant)s::bigint)
      AND coalesce(timetable_since, created_at) < %(until)s::timestamptz
      AND (active OR coalesce(cancelled_at, created_at) >= %(since)s::timestamptz)
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
      AND coalesce(timetable_since, created_at) < %(until)s::timestamptz
      AND (active OR coalesce(cancelled_at, created_at) >= %(since)s::timestamptz)
    UNION ALL
    SELECT job_id, cron, tz FROM job_timetables
    WHERE (%(tenant)s::bigint IS NULL OR tenant_id = %(tenant)s::bigint)
      AND since < %(until)s::timestamptz AND until >= %(since)s::timestamptz
) AS s
JOIN unnest(%(crons)s::text[], %(tzs)s::text[]) AS h(cron, tz) USING (cron, tz)
JOIN jobs AS j ON j.id = s.job_id;

-- name: ledger_fires
-- The window's fires judged: how many there are, how many are pending (not owed a row yet:
-- at or after an active job's next_nominal_at), unaccounted (owed, no row) and duplicated
-- (more than one row), on every row; then the first %(limit)s problem fires, one a row (a
-- single row of NULLs after the counts when there is none). A fire's rows are found on
-- runs_job (job_id, nominal_at): one index probe per fire.
WITH segments AS (
    SELECT id AS job_id, cron, tz, coalesce(timetable_since, created_at) AS since,
           CASE WHEN active THEN NULL ELSE coalesce(cancelled_at, created_at) END AS until
    FROM jobs
    WHERE (%(tenant)s::bigint IS NULL OR tenant_id = %(tenant)s::bigint)
      AND coalesce(timetable_since, created_at) < %(until)s::timestamptz
      AND (active OR coalesce(cancelled_at, created_at) >= %(since)s::timestamptz)
    UNION ALL
    SELECT job_id, cron, tz, since, until FROM job_timetables
    WHERE (%(tenant)s::bigint IS NULL OR tenant_id = %(tenant)s::bigint)
      AND since < %(until)s::timestamptz AND until >= %(since)s::timestamptz
),
fires AS (
    SELECT s.job_id, f.nominal
    FROM segments AS s
    JOIN unnest(%(crons)s::text[], %(tzs)s::text[], %(nominals)s::timestamptz[])
         AS f(cron, tz, nominal) USING (cron, tz)
    WHERE f.nominal > s.since AND (s.until IS NULL OR f.nominal <= s.until)
    UNION ALL
    SELECT s.job_id, f.nominal
    FROM segments AS s
    JOIN unnest(%(h_job_ids)s::bigint[], %(h_crons)s::text[], %(h_tzs)s::text[],
                %(h_nominals)s::timestamptz[]) AS f(job_id, cron, tz, nominal)
         USING (job_id, cron, tz)
    WHERE f.nominal > s.since AND (s.until IS NULL OR f.nominal <= s.until)
),
judged AS MATERIALIZED (
    SELECT f.job_id, j.tenant_id, j.key, f.nominal AS nominal_at,
           (j.active AND j.next_nominal_at IS NOT NULL AND f.nominal >= j.next_nominal_at)
               AS not_owed,
           (SELECT count(*) FROM runs AS r
            WHERE r.job_id = f.job_id AND r.nominal_at = f.nominal) AS rows
    FROM fires AS f JOIN jobs AS j ON j.id = f.job_id
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
