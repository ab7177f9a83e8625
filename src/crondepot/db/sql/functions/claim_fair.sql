-- revision: 6
-- crondepot_claim_fair: the claim's take from one priority when several tenants have runs
-- ready in it (functions/claim_runs.sql calls it; claim_one_tenant.sql is the take when one
-- has; docs/worker.md, "Claiming" and "How the claim is built").
-- Locks and returns the ids of up to p_want queued runs of p_priority, ready at p_clock and
-- not in p_taken, shared among p_tenants in proportion to tenants.claim_weight; each
-- tenant's runs oldest first. Work-conserving: a tenant with fewer ready runs than its share
-- leaves the rest to the others, so it returns min(p_want, ready runs) as a plain scan does
-- (runs locked by other workers aside, which both skip).
--
-- The shares: each tenant's exact share of the turns, p_want * weight / sum of weights, is
-- rounded down or up so that the shares add up to p_want and each is rounded up with the
-- probability that makes its expected value exact (systematic sampling: the weights laid
-- end to end on a line of p_want turns, one random offset u in [0, 1), a turn at u, u + 1,
-- ...; a tenant gets the turns that fall on its stretch). So every claim gives every tenant
-- its share to within one run (tenants A and B of weights 3 and 1: 15 and 5 of 20, always;
-- 10,000 runs of A queued before B's 10: a claim of 20 takes B's 10 and 10 of A's), and the
-- runs that do not divide evenly go by lot: over many claims each tenant gets its weight's
-- share even of claims of one run (a fixed rounding would give those to the same tenant
-- every time). No counter is kept between claims: workers claiming at once do not queue on
-- a shared row, and a worker that dies leaves no state behind.
--
-- Then one statement takes every tenant's share with its own index range scan (LIMIT and
-- FOR UPDATE SKIP LOCKED each); a tenant that returns fewer than its share leaves, and the
-- turns left are shared again among the others, until the claim is full or no tenant is
-- left. Among each tenant's runs of one rate limit that have a deadline, the earliest
-- deadlines take the turns (crondepot_claim_deadline, asked only when a batch holds such a
-- run; it keeps every tenant's count). Called only from crondepot_claim_runs, under its settings (generic plans, no seq
-- scans), which are repeated here so a plan made by a direct call is the same.
-- Sorts are off too: every read must take its order from the index made for it, whatever
-- the statistics say (docs/worker.md, "The settings").
CREATE OR REPLACE FUNCTION crondepot_claim_fair(p_priority text, p_tenants bigint[],
                                                p_want integer, p_clock timestamptz,
                                                p_taken text[], p_held bigint[] DEFAULT NULL)
RETURNS text[]
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_sort = off
SET enable_incremental_sort = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    among    bigint[] := p_tenants;   -- the tenants still sharing
    weights  integer[];
    shares   integer[];
    batch    text[];
    owners   bigint[];
    got      text[] := '{}';
    left_    integer := p_want;
    u        float8;
    limits    text[];
    deadlines timestamptz[];
BEGIN
    SELECT array_agg(coalesce(t.claim_weight, 1) ORDER BY x.o) INTO weights
    FROM unnest(among) WITH ORDINALITY AS x(id, o)
    LEFT JOIN tenants AS t ON t.id = x.id;

    WHILE left_ > 0 AND cardinality(among) > 0 LOOP
        -- Stretch o covers [left_ * upto_(o-1) / total, left_ * upto_o / total); its turns
        -- are the integers k with k + u in it.
        u := random();
        SELECT array_agg((ceil((left_ * s.upto)::float8 / s.total - u)
                          - ceil((left_ * (s.upto - s.weight))::float8 / s.total - u))::integer
                         ORDER BY s.o)
        INTO shares
        FROM (SELECT w.o, w.weight, sum(w.weight) OVER (ORDER BY w.o) AS upto,
                     sum(w.weight) OVER () AS total
              FROM unnest(weights) WITH ORDINALITY AS w(weight, o)) AS s;

        -- Each tenant's share, oldest first, in one statement: a range scan per tenant.
        -- Our own locks are not skipped by SKIP LOCKED: leave out what we already hold.
        SELECT coalesce(array_agg(q.run_id), '{}'), coalesce(array_agg(s.tenant_id), '{}'),
               array_agg(q.rate_limit), array_agg(q.deadline_at)
        INTO batch, owners, limits, deadlines
        FROM unnest(among, shares) AS s(tenant_id, n)
        CROSS JOIN LATERAL (
            SELECT r.run_id, r.rate_limit, r.deadline_at FROM runs AS r
            WHERE r.status = 'queued' AND r.priority = p_priority
              AND r.tenant_id = s.tenant_id AND r.available_at <= p_clock
              AND r.run_id <> ALL (p_taken) AND r.run_id <> ALL (got)
              AND NOT coalesce(r.deadline_at < p_clock, false)   -- never a late run
              AND (p_held IS NULL OR r.tenant_id <> ALL (p_held)
                   OR NOT crondepot_run_held(r.tenant_id, r.job_id))
            ORDER BY r.available_at
            LIMIT s.n
            FOR UPDATE SKIP LOCKED) AS q
        WHERE s.n > 0;
        IF EXISTS (SELECT FROM unnest(limits, deadlines) AS b(rate_limit, deadline_at)
                   WHERE b.rate_limit IS NOT NULL AND b.deadline_at IS NOT NULL) THEN
            batch := crondepot_claim_deadline(p_priority, batch, owners, limits, deadlines,
                                              p_clock, p_taken || got, p_held);
        END IF;
        got := got || batch;
        left_ := left_ - cardinality(batch);
        EXIT WHEN left_ <= 0;

        -- Short of its share: that tenant has no more runs for this claim. The others
        -- (those that filled their share, and those that had none this round) share again.
        SELECT coalesce(array_agg(s.tenant_id ORDER BY s.o), '{}'),
               coalesce(array_agg(s.weight ORDER BY s.o), '{}')
        INTO among, weights
        FROM unnest(among, weights, shares) WITH ORDINALITY AS s(tenant_id, weight, n, o)
        WHERE (SELECT count(*) FROM unnest(owners) AS w(id) WHERE w.id = s.tenant_id) >= s.n;
    END LOOP;
    RETURN got;
END
$$;
