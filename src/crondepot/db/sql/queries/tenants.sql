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
