-- revision: 1
-- crondepot_console_session_principal: the tenant, role and token (and the token's hash, for
-- its request budget) of a console session (api/console/session.py): nothing for an unknown,
-- logged-out or expired session, or one whose token was revoked. The token's last use is
-- written as for a bearer token (token_principal.sql), at most once a minute.
--
-- SECURITY DEFINER for the reason token_principal.sql gives: the session is looked up
-- before its tenant is known, and row-level security (migration 0021) shows a connection
-- without crondepot.tenant_id no token and no tenant; its search_path as there (the DO block
-- names the schema migrate created it in, then pg_temp).
DO $do$
BEGIN
EXECUTE format($f$
CREATE OR REPLACE FUNCTION crondepot_console_session_principal(p_id_hash bytea)
RETURNS TABLE (tenant_id bigint, tenant text, role text, token_id bigint, token_hash bytea)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = %I, pg_temp AS $$
    WITH found AS (
        SELECT tok.tenant_id, tn.name AS tenant, tok.role, tok.id AS token_id,
               tok.token_hash, tok.last_used_at
        FROM console_sessions s
        JOIN api_tokens tok ON tok.id = s.token_id
        JOIN tenants tn ON tn.id = tok.tenant_id
        WHERE s.id_hash = p_id_hash AND s.expires_at > now() AND tok.revoked_at IS NULL
    ), touched AS (
        UPDATE api_tokens SET last_used_at = now()
        WHERE id IN (SELECT f.token_id FROM found AS f
                     WHERE f.last_used_at IS NULL
                        OR f.last_used_at < now() - interval '1 minute')
    )
    SELECT f.tenant_id, f.tenant, f.role, f.token_id, f.token_hash FROM found AS f
$$
$f$, current_schema());
END
$do$;
REVOKE EXECUTE ON FUNCTION crondepot_console_session_principal(bytea) FROM PUBLIC;
