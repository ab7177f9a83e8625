-- name: tenant_uses
-- What one tenant may use: its name, the handlers granted to it, the rate limits it may
-- name (the shared ones granted to it and the ones it owns), and the broker connections
-- granted to it. A few dozen names; read once
-- per admission (crondepot.tenancy.grants) and, cached for seconds, by the worker.
SELECT t.name,
       ARRAY(SELECT handler FROM handler_grants WHERE tenant_id = t.id ORDER BY handler),
       ARRAY(SELECT limit_name FROM limit_grants WHERE tenant_id = t.id
             UNION SELECT name FROM rate_limits WHERE tenant_id = t.id ORDER BY 1),
       ARRAY(SELECT connection_name FROM connection_grants WHERE tenant_id = t.id ORDER BY 1)
FROM tenants AS t
WHERE t.id = %(tenant_id)s::bigint;

-- name: grant_handler
INSERT INTO handler_grants (tenant_id, handler) VALUES (%(tenant_id)s, %(name)s)
ON CONFLICT DO NOTHING;

-- name: grant_limit
-- Only a shared bucket is granted; the caller checked that it exists and has no owner.
INSERT INTO limit_grants (tenant_id, limit_name) VALUES (%(tenant_id)s, %(name)s)
ON CONFLICT DO NOTHING;

-- name: revoke_handler
DELETE FROM handler_grants WHERE tenant_id = %(tenant_id)s AND handler = %(name)s;

-- name: revoke_limit
DELETE FROM limit_grants WHERE tenant_id = %(tenant_id)s AND limit_name = %(name)s;

-- name: list_grants
-- A tenant's grants, for `crondepot tenants show`: connections, handlers, then shared
-- limits, by name.
SELECT 'handler' AS kind, handler AS name, granted_at FROM handler_grants
WHERE tenant_id = %(tenant_id)s
UNION ALL
SELECT 'connection', connection_name, granted_at FROM connection_grants
WHERE tenant_id = %(tenant_id)s
UNION ALL
SELECT 'limit', limit_name, granted_at FROM limit_grants WHERE tenant_id = %(tenant_id)s
ORDER BY 1, 2;

-- name: rate_limit_owner
-- Whether a bucket exists, and whose it is (NULL: shared, the operator's).
SELECT tenant_id FROM rate_limits WHERE name = %(name)s;

-- name: tenant_quota_for_update
-- The tenant's caps and current counts, its row locked until the transaction ends: every
-- admission of new jobs takes this lock first, so two of them (two API processes, an API
-- and an import) take turns and the second sees the counts the first one's insert moved.
-- NO KEY UPDATE, not UPDATE: foreign-key checks (FOR KEY SHARE) on the tenant, such as any
-- other insert of a job or token, are not blocked by it.
SELECT name, max_jobs, max_urgent_jobs, urgent_allowed, active_jobs, urgent_jobs
FROM tenants WHERE id = %(tenant_id)s::bigint
FOR NO KEY UPDATE;

-- name: lock_tenant
-- The same lock for a writer of jobs that admits nothing (the library's create_jobs): every
-- writer of a tenant's jobs takes the tenant row before its rows, so two writers cannot
-- wait on each other (one for the tenant row, which the insert trigger updates, the other
-- for a key the first inserted).
SELECT 1 FROM tenants WHERE id = %(tenant_id)s::bigint FOR NO KEY UPDATE;

-- name: tenant_quota
-- The same, read without a lock (`crondepot tenants show`).
SELECT name, max_jobs, max_urgent_jobs, urgent_allowed, active_jobs, urgent_jobs
FROM tenants WHERE id = %(tenant_id)s::bigint;

-- name: set_tenant_quota
-- Each cap is changed only when its set_ flag is true; a given NULL removes the cap.
UPDATE tenants
SET max_jobs = CASE WHEN %(set_max_jobs)s THEN %(max_jobs)s::integer ELSE max_jobs END,
    max_urgent_jobs = CASE WHEN %(set_max_urgent_jobs)s THEN %(max_urgent_jobs)s::integer
                           ELSE max_urgent_jobs END,
    urgent_allowed = coalesce(%(urgent_allowed)s::boolean, urgent_allowed)
WHERE id = %(tenant_id)s::bigint
RETURNING name, max_jobs, max_urgent_jobs, urgent_allowed, active_jobs, urgent_jobs;

-- name: existing_job_keys
-- Which of these keys the tenant already uses: creating one writes nothing (it is the same
-- job, or a conflict), so it takes no room in the quota. The (tenant_id, key) unique index.
SELECT key FROM jobs WHERE tenant_id = %(tenant_id)s::bigint AND key = ANY(%(keys)s::text[]);

-- name: tenant_limits
-- The buckets a tenant may see: those it owns and the shared ones granted to it.
SELECT r.name, r.rate_per_second, r.burst, r.tenant_id IS NOT NULL AS owned
FROM rate_limits AS r
WHERE r.tenant_id = %(tenant_id)s::bigint
   OR (r.tenant_id IS NULL AND EXISTS (SELECT 1 FROM limit_grants AS g
                                      WHERE g.tenant_id = %(tenant_id)s::bigint
                                        AND g.limit_name = r.name))
ORDER BY r.name;

-- name: put_tenant_limit
-- A tenant creates or changes its own bucket. A name that exists and is not the tenant's
-- (shared, or another tenant's) is left as it is: nothing is returned.
INSERT INTO rate_limits AS r (name, rate_per_second, burst, tokens, tenant_id)
VALUES (%(name)s, %(rate)s, %(burst)s, %(burst)s, %(tenant_id)s)
ON CONFLICT (name) DO UPDATE
SET rate_per_second = excluded.rate_per_second, burst = excluded.burst,
    tokens = least(r.tokens, excluded.burst)
WHERE r.tenant_id = excluded.tenant_id
RETURNING name, rate_per_second, burst, (xmax = 0) AS created;

-- name: put_connection
-- The operator names a broker URL (tenancy/connections.py); true when the name is new.
INSERT INTO connections (name, url) VALUES (%(name)s, %(url)s)
ON CONFLICT (name) DO UPDATE SET url = excluded.url
RETURNING (xmax = 0) AS created;

-- name: remove_connection
DELETE FROM connections WHERE name = %(name)s;

-- name: list_connections
-- Every connection; the caller shows the URL's scheme and host only.
SELECT name, url, created_at FROM connections ORDER BY name;

-- name: connection_url
-- A worker's look-up of the URL a run's target names (cached, ConnectionUrls).
SELECT url FROM connections WHERE name = %(name)s;

-- name: grant_connection
-- The caller checked that the connection exists (the foreign key would refuse it anyway).
INSERT INTO connection_grants (tenant_id, connection_name) VALUES (%(tenant_id)s, %(name)s)
ON CONFLICT DO NOTHING;

-- name: revoke_connection
DELETE FROM connection_grants WHERE tenant_id = %(tenant_id)s AND connection_name = %(name)s;
