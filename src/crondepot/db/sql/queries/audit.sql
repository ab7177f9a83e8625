-- name: set_actor
-- Who this session acts for (API: per request; CLI: per command). Audit triggers read it.
SELECT set_config('crondepot.actor', %(actor)s::text, false);

-- name: clear_actor
-- A pooled connection forgets its last request's actor, and the tenant whose rows it saw
-- (row-level security, migration 0021), before it is lent again.
SELECT set_config('crondepot.actor', '', false), set_config('crondepot.tenant_id', '', false);

-- name: serve_tenant
-- An API request's token is known: the session sees its tenant's rows only (row-level
-- security, migration 0021) and audits its changes under the token (tenancy/scope.py).
SELECT set_config('crondepot.tenant_id', %(tenant_id)s::bigint::text, false),
       set_config('crondepot.actor', %(actor)s::text, false);

-- name: see_all_tenants
-- A session that reads across tenants by design (the API's /metrics gauges) sees every row.
SELECT set_config('crondepot.tenant_id', 'all', false);

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

-- name: session_tenant
-- The tenant this session sees rows of, whence it came (startup options, the role's or the
-- database's default, set_config): a connection through a transaction-mode pooler must
-- see 'all' from its role before it is used (db/connect.py, connect_pooled).
SELECT current_setting('crondepot.tenant_id', true) AS tenant;

-- name: server_session
-- The server process this statement ran in: through a pooler, not the one the client was
-- told at connect, and through a transaction-mode pooler, one another client may also get
-- (db/connect.py, refuse_transaction_pooler).
SELECT pg_backend_pid() AS pid;

-- name: serve_tenant_in_transaction
-- serve_tenant for an API request that is one transaction (its pool behind a
-- transaction-mode pooler, db/connect.py): for this transaction only, so nothing of it stays
-- on the server connection that the pooler lends to its next client.
SELECT set_config('crondepot.tenant_id', %(tenant_id)s::bigint::text, true),
       set_config('crondepot.actor', %(actor)s::text, true);

-- name: see_all_tenants_in_transaction
-- see_all_tenants for an API request that is one transaction (as above).
SELECT set_config('crondepot.tenant_id', 'all', true);

-- name: request_scope
-- The tenant and actor of this transaction, carried over a batch commit of a request that is
-- one transaction (tenancy/scope.py, checkpoint).
SELECT current_setting('crondepot.tenant_id', true) AS tenant,
       current_setting('crondepot.actor', true) AS actor;

-- name: restore_request_scope
-- The tenant and actor read by request_scope, for the transaction that follows the batch.
SELECT set_config('crondepot.tenant_id', coalesce(%(tenant)s::text, ''), true),
       set_config('crondepot.actor', coalesce(%(actor)s::text, ''), true);

-- name: begin_request
-- An API request's one transaction (behind a transaction-mode pooler).
BEGIN;

-- name: begin_read_request
-- A read request's one transaction: its reads share one snapshot, as the ledger check's and
-- the forecast's need (db/transactions.py).
BEGIN ISOLATION LEVEL REPEATABLE READ;
