-- name: insert_console_session
-- A console login: the sha256 of the cookie's random id, the token it logged in with, and
-- when it ends (on the database clock, like the lookup that checks it).
INSERT INTO console_sessions (id_hash, token_id, expires_at)
VALUES (%(id_hash)s, %(token_id)s, now() + make_interval(secs => %(lifetime_seconds)s))
RETURNING expires_at;

-- name: console_session_principal
-- The tenant, role and token of a console session, before the tenant is known: through the
-- SECURITY DEFINER function (functions/console_session_principal.sql). Nothing for an
-- unknown, logged-out or expired session, or one whose token was revoked.
SELECT tenant_id, tenant, role, token_id, token_hash
FROM crondepot_console_session_principal(%(id_hash)s);

-- name: end_console_session
-- Logout: the session is gone, so a replayed cookie finds nothing.
DELETE FROM console_sessions WHERE id_hash = %(id_hash)s;

-- name: sweep_console_sessions
-- Expired sessions, removed at each login (console_sessions_expiry): the table holds about
-- the sessions alive now, without a maintenance service of its own.
DELETE FROM console_sessions WHERE expires_at <= now();
