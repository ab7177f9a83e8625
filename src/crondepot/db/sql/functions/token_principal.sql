-- revision: 1
-- crondepot_token_principal: bearer-token authentication (api/auth.py). The sha256 of the
-- presented token, never the token itself, is looked up; a revoked token finds nothing, like
-- an unknown one. Nothing is cached, so a revocation holds for the next request of every API
-- process. The token's last use is written at most once a minute (the UPDATE matches no row
-- otherwise): a read almost always.
--
-- SECURITY DEFINER: the token is looked up before its tenant is known, when the API's
-- connection has no crondepot.tenant_id and row-level security (migration 0021) shows it no
-- token at all; so it runs as the schema's owner, which no policy binds. It finds one token
-- by its hash and returns only that token's tenant, role and id. Its search_path is the
-- schema migrate created it in, then pg_temp (which PostgreSQL otherwise searches first), so
-- a caller's temporary table cannot stand in for api_tokens; hence the DO block, which
-- names that schema.
DO $do$
BEGIN
EXECUTE format($f$
CREATE OR REPLACE FUNCTION crondepot_token_principal(p_token_hash bytea)
RETURNS TABLE (tenant_id bigint, tenant text, role text, token_id bigint)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = %I, pg_temp AS $$
    WITH found AS (
        SELECT tok.tenant_id, tn.name AS tenant, tok.role, tok.id AS token_id,
               tok.last_used_at
        FROM api_tokens tok
        JOIN tenants tn ON tn.id = tok.tenant_id
        WHERE tok.token_hash = p_token_hash AND tok.revoked_at IS NULL
    ), touched AS (
        UPDATE api_tokens SET last_used_at = now()
        WHERE id IN (SELECT f.token_id FROM found AS f
                     WHERE f.last_used_at IS NULL
                        OR f.last_used_at < now() - interval '1 minute')
    )
    SELECT f.tenant_id, f.tenant, f.role, f.token_id FROM found AS f
$$
$f$, current_schema());
END
$do$;
REVOKE EXECUTE ON FUNCTION crondepot_token_principal(bytea) FROM PUBLIC;
