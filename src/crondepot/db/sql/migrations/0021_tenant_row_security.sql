-- Tenant isolation in the database as well as in the queries (issue 30, item 2b): row-level
-- security on every table whose rows belong to one tenant, keyed by the session setting
-- crondepot.tenant_id (docs/operations.md, "Row-level security"):
--   * a tenant's id (the API sets it for the token's tenant, per request): that tenant's rows;
--   * 'all' (schedulers, workers, the maintenance leader, the operator's commands declare it
--     when they connect, db/connect.py): every row;
--   * unset or empty (an API connection before its token is known): no row at all.
-- So a query that forgets its tenant_id filter, run for an API request, finds nothing of
-- another tenant's, and a write of another tenant's row is refused (WITH CHECK).
--
-- The policies bind the runtime role (db/roles.py), which owns nothing: ENABLE is enough,
-- and no FORCE, so the owner (migrate, and the SECURITY DEFINER look-ups of a token and of
-- a console session, functions/token_principal.sql, console_session_principal.sql) is not
-- bound. A superuser or a BYPASSRLS role is never bound.
--
-- The setting is read through scalar subqueries, so each statement evaluates it once (an
-- initplan), not once a row. An id that is not a number is an error, not a quiet "nothing".
--
-- Not expand-only: a process of the previous release, which never sets crondepot.tenant_id,
-- sees no rows through the runtime role once this is applied (CHANGELOG.md, upgrade notes).
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['api_tokens', 'audit_log', 'handler_grants', 'holds',
                             'job_timetables', 'jobs', 'limit_grants', 'runs']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format($p$
            CREATE POLICY tenant_rows ON %I
            USING ((SELECT current_setting('crondepot.tenant_id', true) = 'all')
                   OR tenant_id = (SELECT nullif(nullif(
                          current_setting('crondepot.tenant_id', true), 'all'), '')::bigint))
        $p$, t);
    END LOOP;
END
$$;

-- A tenant is its own row.
ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON tenants
USING ((SELECT current_setting('crondepot.tenant_id', true) = 'all')
       OR id = (SELECT nullif(nullif(
              current_setting('crondepot.tenant_id', true), 'all'), '')::bigint));

-- A bucket is its tenant's (tenant_id), or shared (NULL, the operator's). A tenant reads
-- the shared ones granted to it (limit_grants, itself bound by its policy) and writes only
-- its own.
ALTER TABLE rate_limits ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON rate_limits
USING ((SELECT current_setting('crondepot.tenant_id', true) = 'all')
       OR tenant_id = (SELECT nullif(nullif(
              current_setting('crondepot.tenant_id', true), 'all'), '')::bigint));
CREATE POLICY granted_shared_rows ON rate_limits FOR SELECT
USING (tenant_id IS NULL
       AND EXISTS (SELECT FROM limit_grants AS g WHERE g.limit_name = rate_limits.name));

-- An attempt has no tenant_id of its own: it is its run's (runs, bound by its policy).
ALTER TABLE run_attempts ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON run_attempts
USING ((SELECT current_setting('crondepot.tenant_id', true) = 'all')
       OR EXISTS (SELECT FROM runs AS r WHERE r.run_id = run_attempts.run_id));

-- Views read as the querying role, so the policies above apply through them too (a view
-- otherwise reads its tables as its owner, which no policy binds).
ALTER VIEW job_inserts SET (security_invoker = true);
ALTER VIEW job_writes SET (security_invoker = true);
ALTER VIEW stored_jobs SET (security_invoker = true);
