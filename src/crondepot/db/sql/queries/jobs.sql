-- name: db_now
-- The database clock: every "now" that decides a schedule comes from here.
SELECT coalesce(%(now)s::timestamptz, now());

-- name: reserve_job_ids
-- Ids are taken before the insert because H fields and spread offsets hash on the id of a
-- job without a key, and the first next_run_at depends on them.
SELECT nextval(pg_get_serial_sequence('jobs', 'id')) FROM generate_series(1, %(count)s);

-- name: insert_jobs
-- Many jobs in one statement (API create, bulk import). A key already used by the tenant
-- inserts nothing; the caller finds the existing job by key.
INSERT INTO jobs (id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active,
                  target, payload, misfire_policy, misfire_seconds, misfire_until, catchup,
                  max_catchup, spread_seconds, spread_key, max_attempts, lease_seconds,
                  rate_limit)
OVERRIDING SYSTEM VALUE
SELECT * FROM unnest(
    %(ids)s::bigint[], %(tenant_ids)s::bigint[], %(keys)s::text[], %(crons)s::text[],
    %(tzs)s::text[], %(next_run_ats)s::timestamptz[], %(next_nominal_ats)s::timestamptz[],
    %(priorities)s::text[], %(actives)s::boolean[], %(targets)s::jsonb[], %(payloads)s::jsonb[],
    %(misfire_policies)s::text[], %(misfire_seconds)s::integer[], %(misfire_untils)s::time[],
    %(catchups)s::text[], %(max_catchups)s::integer[], %(spread_seconds)s::integer[],
    %(spread_keys)s::text[], %(max_attempts)s::integer[], %(lease_seconds)s::integer[],
    %(rate_limits)s::text[])
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING id;

-- name: notify_jobs_changed
-- Wake the schedulers so a job due in a second is not started a tick late.
SELECT pg_notify('crondepot_jobs', '');
