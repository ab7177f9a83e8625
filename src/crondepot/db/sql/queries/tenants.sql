-- name: insert_tenant
INSERT INTO tenants (name, signing_secret) VALUES (%(name)s, %(signing_secret)s)
RETURNING id, created_at;

-- name: insert_api_token
-- Only the token's sha256 is stored: a leaked database does not leak working tokens.
INSERT INTO api_tokens (tenant_id, token_hash, role, label)
VALUES (%(tenant_id)s, %(token_hash)s, %(role)s, %(label)s)
RETURNING id;

-- name: list_tenants
SELECT t.id, t.name, t.created_at,
       (SELECT count(*) FROM jobs j WHERE j.tenant_id = t.id AND j.active) AS active_jobs,
       t.claim_weight
FROM tenants t ORDER BY t.name;

-- name: tenant_by_name
SELECT id, name, created_at FROM tenants WHERE name = %(name)s;

-- name: tenant_delivery_window
-- The tenant's default delivery window (jsonb), for its jobs without their own.
SELECT delivery_window FROM tenants WHERE id = %(tenant_id)s::bigint;

-- name: set_tenant_delivery_window
-- Set (or, with null, clear) the tenant's default delivery window: its jobs' fires planned
-- from now on follow it (runs already queued keep their due times; the worker's guard
-- checks each claimed run against the window in force then).
UPDATE tenants SET delivery_window = %(window)s::jsonb WHERE id = %(tenant_id)s::bigint
RETURNING id;
