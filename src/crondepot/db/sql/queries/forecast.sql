-- Queries of `crondepot forecast` and GET /v1/forecast (forecast/report.py): read only.

-- name: forecast_no_jit
-- The forecast reads a tenant's jobs and queued runs whole (hundreds of thousands of rows):
-- their estimated cost passes the JIT thresholds, and compiling gains a single pass nothing.
SET LOCAL jit = off;

-- name: forecast_job_groups
-- One tenant's live jobs due by %(until)s, grouped by everything that decides their runs
-- (forecast/fires.py), so half a million identical reminders are one row with a count. The
-- job key stays in the group only where it changes the fires: the spread offset (hashed
-- from spread_key, else the key, else the id) and H fields (a cron with an H: the parser
-- decides which really are, the key is kept for any). A host hold is asked only when the
-- tenant has one (the join meets no hold row otherwise), so crondepot_host_of runs per job
-- only then. The tenant's default window stands in for a job without its own.
SELECT j.cron, j.tz, j.at, j.start_at, j.end_at, j.next_run_at, j.next_nominal_at,
       j.catchup, j.max_catchup, j.misfire_policy, j.misfire_seconds, j.misfire_until,
       CASE WHEN j.max_runs IS NULL THEN NULL
            ELSE greatest(j.max_runs - j.fire_count, 0) END AS remaining,
       j.calendar, coalesce(j.delivery_window, t.delivery_window) AS delivery_window,
       j.rate_limit, j.spread_seconds,
       CASE WHEN j.spread_seconds > 0 OR strpos(j.cron, 'H') > 0
            THEN coalesce(j.key, j.id::text) END AS hash_key,
       CASE WHEN j.spread_seconds > 0 THEN j.spread_key END AS spread_key,
       EXISTS (SELECT FROM holds AS h
               WHERE h.tenant_id = j.tenant_id AND h.kind = 'host'
                 AND h.name = crondepot_host_of(j.target)) AS host_held,
       count(*) AS jobs
FROM jobs AS j JOIN tenants AS t ON t.id = j.tenant_id
WHERE j.tenant_id = %(tenant_id)s::bigint AND j.active AND NOT j.paused
  AND j.next_run_at <= %(until)s::timestamptz
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20;

-- name: forecast_queued_runs
-- The tenant's runs queued now and ready by %(until)s, grouped by rate limit, host hold,
-- ready time and misfire deadline. A held run's ready time is its own (held_available_at),
-- not the 'infinity' that keeps it from the claim (limits/holds.py).
SELECT j.rate_limit,
       EXISTS (SELECT FROM holds AS h
               WHERE h.tenant_id = j.tenant_id AND h.kind = 'host'
                 AND h.name = crondepot_host_of(j.target)) AS host_held,
       q.ready, r.deadline_at, count(*) AS runs
FROM runs AS r
JOIN jobs AS j ON j.id = r.job_id,
LATERAL (SELECT CASE WHEN r.available_at = 'infinity' THEN r.held_available_at
                     ELSE r.available_at END AS ready) AS q
WHERE r.tenant_id = %(tenant_id)s::bigint AND r.status = 'queued'
  AND q.ready <= %(until)s::timestamptz
GROUP BY 1, 2, 3, 4;

-- name: forecast_bucket_levels
-- The tokens each named bucket holds at %(now)s (refilled since its last take, up to its
-- burst), so a forecast starts from the bucket as it is, not full.
SELECT name,
       least(burst::float8, tokens + rate_per_second
             * greatest(0, extract(epoch FROM %(now)s::timestamptz - refilled_at)))
FROM rate_limits
WHERE name = ANY(%(names)s::text[]);

-- name: forecast_held_limits
-- The rate limits the tenant holds (limits/holds.py): their runs are not sent while held.
SELECT name FROM holds WHERE tenant_id = %(tenant_id)s::bigint AND kind = 'rate_limit';
