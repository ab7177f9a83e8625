-- Every SECURITY DEFINER function of the schema keeps the search_path schema, pg_catalog,
-- pg_temp. Such a function runs with its owner's rights for a caller who is the runtime role,
-- which may create temporary tables, and a path without pg_temp searches it first: a
-- temporary table named audit_log caught the entries of crondepot_audit_summary (0028, which
-- replaced it in a transaction on the default path) and of
-- crondepot_audit_connection_grants (0031, the same), so a bulk action or a connection grant
-- could go unaudited. The migration runner now makes every migration's path safe before it
-- runs (queries/migrations.sql, safe_search_path), so a fresh database never had the gap;
-- this pins the functions an earlier release made. Idempotent: it sets what is already set
-- on the others. tests/integration/test_migrations.py checks every such function.
DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN SELECT p.oid::regprocedure FROM pg_proc AS p
              WHERE p.prosecdef AND p.pronamespace = current_schema()::regnamespace LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_catalog, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
