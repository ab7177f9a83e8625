-- revision: 3
-- crondepot_claim_one_tenant: the claim's take from one priority when one tenant has runs
-- ready in it (functions/claim_runs.sql calls it; claim_fair.sql is the take when several
-- have). Locks and returns the ids of up to p_want queued runs of p_priority and p_tenant,
-- ready at p_clock and not in p_taken, oldest first: one index range scan of runs_queued
-- with its own LIMIT and FOR UPDATE SKIP LOCKED, so it locks no row it does not return and
-- never waits for another worker's. A run past its deadline, or held (a tenant in p_held
-- whose run crondepot_run_held names), is passed over, never taken. Among the runs of one
-- rate limit that have a deadline, the earliest deadlines take the batch's turns
-- (crondepot_claim_deadline; asked only when the batch holds such a run).
-- Called only from crondepot_claim_runs, under its settings, which are repeated here so a
-- plan made by a direct call is the same (docs/worker.md, "How the claim is built").
-- (Files are applied in name order: this one comes before claim_runs.sql, which calls it,
-- and after claim_deadline.sql.)
-- Sorts are off too: every read must take its order from the index made for it, whatever
-- the statistics say (docs/worker.md, "The settings").
CREATE OR REPLACE FUNCTION crondepot_claim_one_tenant(p_priority text, p_tenant bigint,
                                                      p_want integer, p_clock timestamptz,
                                                      p_taken text[],
                                                      p_held bigint[] DEFAULT NULL)
RETURNS text[]
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_mergejoin = off
SET enable_hashjoin = off
SET enable_sort = off
SET enable_incremental_sort = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    batch     text[];
    limits    text[];
    deadlines timestamptz[];
BEGIN
    -- ORDER BY + LIMIT inside, array_agg outside: the rows locked are the rows returned.
    -- Our own locks are not skipped by SKIP LOCKED: p_taken leaves out what we hold.
    SELECT coalesce(array_agg(q.run_id), '{}'), array_agg(q.rate_limit),
           array_agg(q.deadline_at)
    INTO batch, limits, deadlines
    FROM (SELECT r.run_id, r.rate_limit, r.deadline_at FROM runs AS r
          WHERE r.status = 'queued' AND r.priority = p_priority
            AND r.tenant_id = p_tenant AND r.available_at <= p_clock
            AND r.run_id <> ALL (p_taken)
            AND NOT coalesce(r.deadline_at < p_clock, false)
            AND (p_held IS NULL OR r.tenant_id <> ALL (p_held)
                 OR NOT crondepot_run_held(r.tenant_id, r.job_id))
          ORDER BY r.available_at
          LIMIT p_want
          FOR UPDATE SKIP LOCKED) AS q;
    IF EXISTS (SELECT FROM unnest(limits, deadlines) AS b(rate_limit, deadline_at)
               WHERE b.rate_limit IS NOT NULL AND b.deadline_at IS NOT NULL) THEN
        batch := crondepot_claim_deadline(p_priority, batch,
                                          array_fill(p_tenant, ARRAY[cardinality(batch)]),
                                          limits, deadlines, p_clock, p_taken, p_held);
    END IF;
    RETURN batch;
END
$$;
