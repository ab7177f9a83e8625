-- revision: 2
-- crondepot_claim_deadline: deadline first within a rate limit (issue 34, item 5;
-- docs/worker.md, "Deadline first within a rate limit"). Called by the takes
-- (claim_one_tenant.sql, claim_fair.sql) with a batch they just locked, oldest first, and
-- each run's tenant, rate limit and deadline (runs.rate_limit, runs.deadline_at). Returns
-- the batch with the same number of runs per (tenant, limit), and the same runs in every
-- turn of a run without a limit or without a deadline.
--
-- The queue order decides how many turns each (tenant, limit) gets; among the runs of one
-- tenant and one limit that have a deadline, the turns go to those whose deadline comes
-- first. So when a saturated bucket is the bottleneck, the runs it would let pass their
-- deadline go first, and fewer are skipped. What it never changes: a priority's turns and
-- their lending, each tenant's share, the turns of other limits and of runs with no limit,
-- and the turns of runs with no deadline (run_late: waiting costs them nothing, and giving
-- their turns away would let a steady stream of deadline runs hold them back without end).
-- A run already past its deadline is never taken (as in the takes).
--
-- Per (tenant, limit) with n runs with a deadline in the batch, the latest of them `last`:
-- one range scan of runs_queued_limit_deadline (migration 0033) for at most n ready runs
-- of that tenant and limit outside the batch whose deadline is before `last`, earliest
-- first, with FOR UPDATE SKIP LOCKED; of those and the batch's n, the n earliest (at one
-- deadline, the batch's own first, then the oldest) keep the turns. A batch run that loses
-- its turn stays queued, locked by this claim until it commits (another claim skips it
-- meanwhile, as it would skip any run this claim holds); the run that takes it goes in its
-- place in the batch. Runs already taken by this claim (p_exclude) are not candidates.
-- Settings as crondepot_claim_runs's (generic plans, index scans).
-- Sorts are off too: every read must take its order from the index made for it, whatever
-- the statistics say (docs/worker.md, "The settings").
CREATE OR REPLACE FUNCTION crondepot_claim_deadline(p_priority text, p_batch text[],
                                                    p_tenants bigint[], p_limits text[],
                                                    p_deadlines timestamptz[],
                                                    p_clock timestamptz, p_exclude text[],
                                                    p_held bigint[])
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
    g        record;
    cands    text[];
    cand_dl  timestamptz[];
    better   text[];
    lost     text[];
    result   text[] := p_batch;
BEGIN
    FOR g IN SELECT b.tenant_id, b.rate_limit, count(*)::integer AS n,
                    max(b.deadline_at) AS last
             FROM unnest(p_tenants, p_limits, p_deadlines) AS b(tenant_id, rate_limit, deadline_at)
             WHERE b.rate_limit IS NOT NULL AND b.deadline_at IS NOT NULL
             GROUP BY b.tenant_id, b.rate_limit
    LOOP
        SELECT array_agg(q.run_id), array_agg(q.deadline_at) INTO cands, cand_dl
        FROM (SELECT r.run_id, r.deadline_at FROM runs AS r
              WHERE r.status = 'queued' AND r.priority = p_priority
                AND r.tenant_id = g.tenant_id AND r.rate_limit = g.rate_limit
                AND r.deadline_at >= p_clock AND r.deadline_at < g.last
                AND r.available_at <= p_clock
                AND r.run_id <> ALL (p_batch) AND r.run_id <> ALL (p_exclude)
                AND (p_held IS NULL OR r.tenant_id <> ALL (p_held)
                     OR NOT crondepot_run_held(r.tenant_id, r.job_id))
              ORDER BY r.deadline_at, r.available_at
              LIMIT g.n
              FOR UPDATE SKIP LOCKED) AS q;
        CONTINUE WHEN cands IS NULL;

        -- The n earliest of the batch's runs of the group and the candidates keep the turns:
        -- `better`, the candidates among them, earliest first; `lost`, the batch's runs
        -- outside them, in batch order (as many as `better`).
        SELECT array_agg(u.run_id ORDER BY u.rk) FILTER (WHERE u.rk <= g.n AND NOT u.mine),
               array_agg(u.run_id ORDER BY u.o) FILTER (WHERE u.rk > g.n AND u.mine)
        INTO better, lost
        FROM (SELECT v.run_id, v.mine, v.o,
                     row_number() OVER (ORDER BY v.deadline_at, v.mine DESC, v.o) AS rk
              FROM (SELECT b.run_id, b.deadline_at, true AS mine, b.o
                    FROM unnest(p_batch, p_tenants, p_limits, p_deadlines)
                         WITH ORDINALITY AS b(run_id, tenant_id, rate_limit, deadline_at, o)
                    WHERE b.tenant_id = g.tenant_id AND b.rate_limit = g.rate_limit
                      AND b.deadline_at IS NOT NULL
                    UNION ALL
                    SELECT c.run_id, c.deadline_at, false, c.o
                    FROM unnest(cands, cand_dl) WITH ORDINALITY AS c(run_id, deadline_at, o)
                   ) AS v) AS u;
        CONTINUE WHEN better IS NULL;
        FOR k IN 1..cardinality(lost) LOOP
            result[array_position(result, lost[k])] := better[k];
        END LOOP;
    END LOOP;
    RETURN result;
END
$$;
