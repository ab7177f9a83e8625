-- revision: 2
-- crondepot_labelled_jobs: the ids of tenant p_tenant_id's jobs whose labels contain
-- p_labels, found through the jobs_labelled GIN index (migration 0039), which holds only
-- jobs that have labels; an empty p_labels, which every job's labels contain, is answered
-- by the second branch, without it.
--
-- Why a SECURITY DEFINER function: under a policy, PostgreSQL evaluates a "leaky" condition
-- (one whose function is not LEAKPROOF, as jsonb's @> is not) only after the policy's, so
-- labels @> … in a query of the runtime role can no longer be an index condition: a filter
-- by a rare label read all of a tenant's jobs (1.6 ms to 124 ms for 40,000 jobs,
-- docs/performance.md). Run as the owner, which no policy binds, the look-up uses the index
-- again. It returns ids only, and the queries that filter by label (queries/jobs.sql
-- list_tenant_jobs, queries/bulk.sql) read the jobs themselves under the policy, so an id
-- of another tenant's job shows that job to no one; called directly, it tells which ids of
-- a tenant's jobs carry a label, which a session of the runtime role may learn anyway (it
-- may set 'all'). search_path: as token_principal.sql (the schema, then pg_temp).
DO $do$
BEGIN
EXECUTE format($f$
CREATE OR REPLACE FUNCTION crondepot_labelled_jobs(p_tenant_id bigint, p_labels jsonb)
RETURNS SETOF bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = %I, pg_temp AS $$
    SELECT j.id FROM jobs AS j
    WHERE j.labels @> p_labels AND j.labels <> '{}'::jsonb AND j.tenant_id = p_tenant_id
    UNION ALL
    SELECT j.id FROM jobs AS j
    WHERE p_labels = '{}'::jsonb AND j.labels = '{}'::jsonb AND j.tenant_id = p_tenant_id
$$
$f$, current_schema());
END
$do$;
REVOKE EXECUTE ON FUNCTION crondepot_labelled_jobs(bigint, jsonb) FROM PUBLIC;
