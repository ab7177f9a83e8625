-- name: insert_console_session
-- A console login: the sha256 of the cookie's random id, the token it logged in with, and
-- when it ends (on the database clock, like the lookup that checks it).
INSERT INTO console_sessions (id_hash, token_id, expires_at)
VALUES (%(id_hash)s, %(token_id)s, now() + make_interval(secs => %(lifetime_seconds)s))
RETURNING expires_at;

-- name: console_session_principal
-- The tenant, role and token of a console session: nothing for an unknown, logged-out or
-- expired session, or one whose token was revoked. The token's last use is written as for
-- a bearer token (api_token_principal), at most once a minute.
WITH found AS (
    SELECT tok.tenant_id, tn.name AS tenant, tok.role, tok.id AS token_id, tok.token_hash,
           tok.last_used_at
    FROM console_sessions s
    JOIN api_tokens tok ON tok.id = s.token_id
    JOIN tenants tn ON tn.id = tok.tenant_id
    WHERE s.id_hash = %(id_hash)s AND s.expires_at > now() AND tok.revoked_at IS NULL
), touched AS (
    UPDATE api_tokens SET last_used_at = now()
    WHERE id IN (SELECT token_id FROM found
                 WHERE last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
)
SELECT tenant_id, tenant, role, token_id, token_hash FROM found;

-- name: end_console_session
-- Logout: the session is gone, so a replayed cookie finds nothing.
DELETE FROM console_sessions WHERE id_hash = %(id_hash)s;

-- name: sweep_console_sessions
-- Expired sessions, removed at each login (console_sessions_expiry): the table holds about
-- the sessions alive now, without a maintenance service of its own.
DELETE FROM console_sessions WHERE expires_at <= now();
