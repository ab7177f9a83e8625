-- name: lock_tenant_tokens
-- Token changes of one tenant take turns (the tenant's row, FOR NO KEY UPDATE): two revokes
-- at once cannot each see the other's token as the admin that remains, and two creates at
-- once cannot both slip under the cap.
SELECT id FROM tenants WHERE id = %(tenant_id)s FOR NO KEY UPDATE;

-- name: count_active_tokens
-- Unrevoked tokens of a tenant, and how many of them are admin tokens.
SELECT count(*) AS active, count(*) FILTER (WHERE role = 'admin') AS admins
FROM api_tokens WHERE tenant_id = %(tenant_id)s AND revoked_at IS NULL;

-- name: insert_token
-- A token issued to an existing tenant; only its sha256 is stored.
INSERT INTO api_tokens (tenant_id, token_hash, role, label)
VALUES (%(tenant_id)s, %(token_hash)s, %(role)s, %(label)s)
RETURNING id, tenant_id, role, label, created_at, last_used_at, revoked_at;

-- name: list_tokens
-- A tenant's tokens, revoked ones too (never the token: only its hash is stored, and that
-- is not shown either). A handful of rows per tenant; the foreign key's scan is enough.
SELECT id, tenant_id, role, label, created_at, last_used_at, revoked_at
FROM api_tokens WHERE tenant_id = %(tenant_id)s ORDER BY id;

-- name: token_of_tenant
-- One token of one tenant; another tenant's token id finds nothing (a 404, as for jobs).
SELECT id, tenant_id, role, label, created_at, last_used_at, revoked_at
FROM api_tokens WHERE id = %(token_id)s AND tenant_id = %(tenant_id)s;

-- name: revoke_token
-- Revocation: the token is refused from the next request on (nothing caches tokens); an
-- already revoked token keeps its first revocation time (the update matches nothing).
UPDATE api_tokens SET revoked_at = now()
WHERE id = %(token_id)s AND tenant_id = %(tenant_id)s AND revoked_at IS NULL
RETURNING id, tenant_id, role, label, created_at, last_used_at, revoked_at;

-- name: end_token_sessions
-- A revoked token's console sessions end with it.
DELETE FROM console_sessions WHERE token_id = %(token_id)s;

-- name: api_token_principal
-- Bearer-token authentication, before the tenant is known: through the SECURITY DEFINER
-- function (functions/token_principal.sql), since row-level security shows a connection
-- without a tenant no token. Nothing for an unknown or revoked token.
SELECT tenant_id, tenant, role, token_id FROM crondepot_token_principal(%(token_hash)s);
