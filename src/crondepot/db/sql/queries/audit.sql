-- name: set_actor
-- Who this session acts for (API: per request; CLI: per command). Audit triggers read it.
SELECT set_config('crondepot.actor', %(actor)s::text, false);

-- name: clear_actor
-- A pooled connection forgets its last request's actor before it is lent again.
SELECT set_config('crondepot.actor', '', false), set_config('crondepot.audit_rows', '', false);

-- name: audit_rows_off
-- Inside a bulk import's transaction: one summary entry instead of one per job.
SELECT set_config('crondepot.audit_rows', 'off', true);

-- name: audit_summary
-- One entry standing for many rows (an import batch); like the triggers, only for sessions
-- that name an actor.
INSERT INTO audit_log (tenant_id, actor, action, subject, after)
SELECT %(tenant_id)s, current_setting('crondepot.actor', true), %(action)s, %(subject)s,
       %(after)s
WHERE coalesce(current_setting('crondepot.actor', true), '') <> '';

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
