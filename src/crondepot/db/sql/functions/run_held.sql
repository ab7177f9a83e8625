-- revision: 2
-- crondepot_run_held: whether a hold (limits/holds.py, migration 0016) names the rate limit or the
-- target host of job p_job_id for its tenant. The claim (claim_one_tenant.sql, claim_fair.sql)
-- asks it only for runs of tenants that have a hold, so it costs nothing while none exists;
-- then one primary-key lookup of the job and one of the holds' index per run passed over.
-- (Files are applied in name order: host_of.sql, which this reads, comes first.)
CREATE OR REPLACE FUNCTION crondepot_run_held(p_tenant_id bigint, p_job_id bigint)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (
        SELECT FROM jobs AS j
        JOIN holds AS h
          ON h.tenant_id = p_tenant_id
         AND ((h.kind = 'rate_limit' AND h.name = j.rate_limit)
              OR (h.kind = 'host' AND h.name = crondepot_host_of(j.target)))
        WHERE j.id = p_job_id)
$$;
