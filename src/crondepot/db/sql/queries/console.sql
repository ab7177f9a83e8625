-- The web console's "why is 9:00 late?" panels (crondepot/api/console/views.py).

-- name: console_limit_panel
-- Per tenant (one, or every tenant for NULL) and per rate limit it may use (its own buckets,
-- the shared ones granted to it) or that its queued runs' jobs name: the bucket's rate,
-- burst and tokens now, and the tenant's queued runs of that limit that are due (ready now,
-- or held and due). Tokens are read as take_tokens (ratelimit.sql) would compute them,
-- without taking any and without writing the row: min(burst less what a worker may hold,
-- tokens + rate × seconds since the refill). A name with no bucket (its runs fail,
-- UnknownLimit) has NULL rate. Reads the queued runs and the small grant and bucket tables,
-- never the whole jobs table: it is polled every few seconds.
WITH queued AS (
    SELECT r.tenant_id, j.rate_limit AS name,
           count(*) FILTER (WHERE coalesce(r.held_available_at, r.available_at) <= now())
               AS waiting
    FROM runs AS r
    JOIN jobs AS j ON j.id = r.job_id
    WHERE (%(tenant_id)s::bigint IS NULL OR r.tenant_id = %(tenant_id)s::bigint)
      AND r.status = 'queued' AND j.rate_limit IS NOT NULL
    GROUP BY 1, 2
), used AS (
    SELECT tenant_id, name FROM queued
    UNION
    SELECT tenant_id, limit_name FROM limit_grants
    WHERE %(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s::bigint
    UNION
    SELECT tenant_id, name FROM rate_limits
    WHERE tenant_id IS NOT NULL
      AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s::bigint)
)
SELECT t.name AS tenant, u.tenant_id, u.name, b.rate_per_second, b.burst,
       least(greatest(1, b.burst - b.rate_per_second * %(hold)s::float8),
             b.tokens + b.rate_per_second
             * greatest(0, extract(epoch FROM clock_timestamp() - b.refilled_at)))::float8
           AS tokens,
       b.tenant_id IS NULL AS shared,
       coalesce(q.waiting, 0) AS waiting,
       EXISTS (SELECT FROM holds AS h WHERE h.tenant_id = u.tenant_id
                                        AND h.kind = 'rate_limit' AND h.name = u.name)
           AS held
FROM used AS u
JOIN tenants AS t ON t.id = u.tenant_id
LEFT JOIN rate_limits AS b ON b.name = u.name
LEFT JOIN queued AS q ON q.tenant_id = u.tenant_id AND q.name = u.name
ORDER BY t.name, u.name;

-- name: console_processes
-- The schedulers and the maintenance leader as PostgreSQL sees their sessions (no table of
-- their own: a scheduler keeps a LISTEN session named crondepot-<name>-listen, the
-- maintenance leader holds the advisory lock of maintenance_try_lead in a session named
-- crondepot-<name>-maintenance). last_active: the newest state change of the process's
-- sessions (NULL where PostgreSQL hides it: sessions of another role).
WITH here AS (
    SELECT pid, application_name AS app, state_change
    FROM pg_stat_activity
    WHERE datname = current_database() AND application_name LIKE 'crondepot-%'
), leader AS (
    SELECT l.pid
    FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid::text::bigint = 7301847220451893402 >> 32
      AND l.objid::text::bigint = 7301847220451893402 & 4294967295
), processes AS (
    SELECT 'scheduler' AS kind,
           substr(app, 11, length(app) - 17) AS name
    FROM here
    WHERE app LIKE 'crondepot-%-listen' AND app <> 'crondepot-worker-listen'
    UNION
    SELECT 'maintenance leader', substr(app, 11, length(app) - 22)
    FROM here
    WHERE app LIKE 'crondepot-%-maintenance' AND pid IN (SELECT pid FROM leader)
)
SELECT p.kind, p.name,
       (SELECT count(*) FROM here AS h
        WHERE h.app = 'crondepot-' || p.name OR h.app LIKE 'crondepot-' || p.name || '-%')
           AS sessions,
       extract(epoch FROM now() - (SELECT max(h.state_change) FROM here AS h
                                   WHERE h.app = 'crondepot-' || p.name
                                      OR h.app LIKE 'crondepot-' || p.name || '-%'))::float8
           AS last_active_seconds
FROM processes AS p
ORDER BY p.kind DESC, p.name;

-- name: console_tenants
-- Every tenant, for the operator's console (names and ids only).
SELECT id, name FROM tenants ORDER BY name;

-- name: console_read_only
-- The operator's console reads across tenants: its transactions cannot write.
SET TRANSACTION READ ONLY;
