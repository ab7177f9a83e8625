-- name: set_actor
-- Who this session acts for (API: per request; CLI: per command). Audit triggers read it.
SELECT set_config('crondepot.actor', %(actor)s::text, false);

-- name: clear_actor
-- A pooled connection forgets its last request's actor before it is lent again.
SELECT set_config('crondepot.actor', '', false);

-- name: audit_summary
-- One entry standing for many rows (a bulk action's batch, a backfill, a hold), by the
-- session's actor or 'role:<session_user>'. The runtime role may not insert into audit_log:
-- this SECURITY DEFINER function (migration 0020) writes the summary actions, and only them.
SELECT crondepot_audit_summary(%(tenant_id)s::bigint, %(action)s::text, %(subject)s::text,
                               %(after)s::jsonb);

-- name: list_audit
-- A tenant's audit entries, newest first, optionally one subject's or one action's.
SELECT id, at, actor, action, subject, before, after
FROM audit_log
WHERE tenant_id = %(tenant_id)s::bigint
  AND (%(subject)s::text IS NULL OR subject = %(subject)s::text)
  AND (%(action)s::text IS NULL OR action = %(action)s::text)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s::integer;
