-- revision: 10
-- crondepot_claim_runs: a worker's claim in one call (queue/claim.py, through queue.sql's
-- claim_runs). How it is built and why: docs/worker.md, "How the claim is built".
-- p_owner: the worker, written to lease_owner. p_now: the clock to claim at (NULL: now()).
-- p_limits[i]: runs of priority i (urgent, normal, bulk) to take; urgent's include the
--   urgent-only slots' turns, which urgent runs fill first.
-- p_lendable[i]: the part of p_limits[i] that may be lent (never the urgent-only turns;
--   all zeros: nothing is lent). A lendable turn that finds no ready run goes to the next
--   priority (urgent -> normal -> bulk -> urgent) that still has some; what that one cannot
--   use goes on to the one after.
-- Returns the runs claimed with their jobs' fields, and db_now: leases run on the database
-- clock, not the worker's. Never more than sum(p_limits) runs; each gets a fresh lease
-- token and attempt + 1. A run past its deadline (runs.deadline_at) or held (holds) is
-- never leased; one another worker has locked is skipped, not waited for. A run of a job
-- with an overlap policy other than allow is leased only when no run of its job is
-- running, else waits or is written skipped 'overlap' (functions/claim_overlap.sql; when
-- no queued run has a policy, one index descent finds so and the claim is as before). The
-- result columns are the previous release's, so its workers keep claiming while a new one
-- migrates.
-- Sorts are off too: every read must take its order from the index made for it, whatever
-- the statistics say (docs/worker.md, "The settings").
CREATE OR REPLACE FUNCTION crondepot_claim_runs(p_owner text, p_limits integer[], p_lendable integer[],
                                     p_now timestamptz DEFAULT NULL)
RETURNS TABLE (run_id text, job_id bigint, job_key text, tenant_id bigint, priority text,
               nominal_at timestamptz, due_at timestamptz, attempt integer,
               lease_token uuid, lease_expires_at timestamptz, db_now timestamptz,
               target jsonb, payload jsonb, max_attempts integer, lease_seconds integer,
               rate_limit text, signing_secret text)
LANGUAGE plpgsql
-- Settings: the plans are kept for the session and must stay primary-key and range scans
-- whatever the tables' size and statistics were when they were made (docs/worker.md).
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_mergejoin = off
SET enable_hashjoin = off
SET enable_sort = off
SET enable_incremental_sort = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    -- The slots of the per-priority arrays (p_limits, p_lendable, got, dry, spare, wanted):
    -- urgent, normal, bulk, the order queue.sql passes the counts in (PRIORITIES) and the
    -- lending cycle's, so the slot after bulk is urgent's.
    urgent   constant integer := 1;
    normal   constant integer := 2;
    bulk     constant integer := 3;
    queues   constant text[] := ARRAY['urgent', 'normal', 'bulk'];
    clock    constant timestamptz := coalesce(p_now, now());
    got      integer[] := ARRAY[0, 0, 0];
    dry      boolean[] := ARRAY[false, false, false];
    taken    text[] := '{}';
    batch    text[];
    spare    integer[] := ARRAY[0, 0, 0];
    wanted   integer[];
    lent_to  integer[];
    ready_u  bigint[];          -- tenants with an urgent run ready
    ready_n  bigint[];          -- ... normal
    ready_b  bigint[];          -- ... bulk
    ready    bigint[];
    found    integer;
    used     integer;
    borrower integer;
    i        integer;
    own      integer;
    loan_u   integer;
    loan_b   integer;
    lim      integer;
    held     bigint[];          -- tenants with a hold (NULL: none)
    rules    boolean;           -- some queued run has an overlap policy (not allow)
    passed   text[] := '{}';    -- runs taken and locked but not leased (overlap rules)
    busy     bigint[] := '{}';  -- jobs with a ruled run leased by this claim
BEGIN
    SELECT array_agg(DISTINCT h.tenant_id) INTO held FROM holds AS h;
    -- One descent of runs_overlap_queued (migration 0026): asked in that index's order, so
    -- that with sorts off no other index can serve it (an EXISTS would drop the ORDER BY).
    rules := (SELECT true FROM runs AS r WHERE r.status = 'queued' AND r.overlap <> 'allow'
              ORDER BY r.job_id, r.available_at LIMIT 1) IS NOT NULL;

    -- The (priority, tenant) pairs with a run ready: a loose index scan of runs_queued,
    -- backwards, each step one descent to the previous pair's last (newest) entry. Backwards
    -- because the dead entries of runs claimed moments before sit at the front of each
    -- pair's range (oldest first) until vacuum removes them: the take below walks past them
    -- once; this listing does not. A pair whose newest run is ready is ready; one whose
    -- newest run waits (a retry's backoff) is probed from the front.
    WITH RECURSIVE tails AS (
        (SELECT r.priority, r.tenant_id, r.available_at
         FROM runs AS r
         WHERE r.status = 'queued'
         ORDER BY r.priority DESC, r.tenant_id DESC, r.available_at DESC
         LIMIT 1)
        UNION ALL
        SELECT n.priority, n.tenant_id, n.available_at
        FROM tails AS t
        CROSS JOIN LATERAL (
            SELECT r.priority, r.tenant_id, r.available_at
            FROM runs AS r
            WHERE r.status = 'queued' AND (r.priority, r.tenant_id) < (t.priority, t.tenant_id)
            ORDER BY r.priority DESC, r.tenant_id DESC, r.available_at DESC
            LIMIT 1) AS n
    )
    -- (In no particular order: the sharing is fair in any order, and an ordered aggregate
    -- would sort on every claim.)
    SELECT array_agg(p.tenant_id) FILTER (WHERE p.priority = 'urgent'),
           array_agg(p.tenant_id) FILTER (WHERE p.priority = 'normal'),
           array_agg(p.tenant_id) FILTER (WHERE p.priority = 'bulk')
    INTO ready_u, ready_n, ready_b
    FROM tails AS p
    -- OFFSET 0 keeps the EXISTS a probe per pair; without it the planner may hash the
    -- subquery instead, which reads every ready queued run.
    WHERE CASE WHEN p.available_at <= clock THEN true
               ELSE EXISTS (SELECT FROM runs AS r
                            WHERE r.status = 'queued' AND r.priority = p.priority
                              AND r.tenant_id = p.tenant_id AND r.available_at <= clock
                            OFFSET 0)
          END;

    -- Each priority's own turns, normal last: urgent's spare goes to normal, and bulk's to
    -- urgent unless urgent is dry, then to normal. Both are known once urgent and bulk
    -- have taken, so normal's one scan takes its own turns and both loans (one scan per
    -- busy queue).
    FOREACH i IN ARRAY ARRAY[urgent, bulk, normal] LOOP
        own := greatest(coalesce(p_limits[i], 0), 0);
        loan_u := 0;
        loan_b := 0;
        IF i = normal THEN
            loan_u := greatest(spare[urgent], 0);
            IF dry[urgent] THEN
                loan_b := greatest(spare[bulk], 0);
            END IF;
        END IF;
        lim := own + loan_u + loan_b;
        CONTINUE WHEN lim = 0;
        ready := CASE i WHEN urgent THEN ready_u WHEN normal THEN ready_n ELSE ready_b END;
        IF ready IS NULL THEN
            batch := '{}';
        ELSE
            -- (One tenant: '{}', not taken: nothing of this priority is taken yet.)
            SELECT p.batch, p.passed, p.busy INTO batch, passed, busy
            FROM crondepot_claim_pick(queues[i], ready, lim, clock,
                                      CASE WHEN cardinality(ready) = 1 THEN passed
                                           ELSE taken || passed END,
                                      held, rules, passed, busy) AS p;
        END IF;
        found := cardinality(batch);
        taken := taken || batch;
        got[i] := least(found, own);
        dry[i] := found < lim;
        -- Spare, per lender: its lendable turns that found no run of its own (the turns it
        -- may not lend are filled first).
        spare[i] := coalesce(p_lendable[i], 0)
                    - greatest(0, got[i] - (own - coalesce(p_lendable[i], 0)));
        IF i = normal THEN                  -- settle the loans it carried, in lender order
            found := found - got[i];
            used := least(loan_u, found);
            spare[urgent] := spare[urgent] - used;
            spare[bulk] := spare[bulk] - least(loan_b, found - used);
        END IF;
    END LOOP;

    -- Each lender's spare goes to its first borrower that is not dry; what a borrower
    -- cannot supply goes, in the second round, to the lender's other borrower. Loans to the
    -- same borrower are taken in one scan.
    FOR pass IN 1..2 LOOP
        wanted := ARRAY[0, 0, 0];
        lent_to := ARRAY[0, 0, 0];
        FOR lender IN urgent..bulk LOOP
            CONTINUE WHEN spare[lender] <= 0;
            FOR step IN 1..2 LOOP
                borrower := (lender + step - 1) % 3 + 1;    -- the next slots in the cycle
                IF NOT dry[borrower] THEN
                    lent_to[lender] := borrower;
                    wanted[borrower] := wanted[borrower] + spare[lender];
                    EXIT;
                END IF;
            END LOOP;
        END LOOP;
        EXIT WHEN wanted = ARRAY[0, 0, 0];
        FOR borrower IN urgent..bulk LOOP
            CONTINUE WHEN wanted[borrower] = 0;
            ready := CASE borrower WHEN urgent THEN ready_u WHEN normal THEN ready_n
                     ELSE ready_b END;
            IF ready IS NULL THEN
                batch := '{}';
            ELSE
                SELECT p.batch, p.passed, p.busy INTO batch, passed, busy
                FROM crondepot_claim_pick(queues[borrower], ready, wanted[borrower], clock,
                                          taken || passed, held, rules, passed, busy) AS p;
            END IF;
            taken := taken || batch;
            found := cardinality(batch);
            dry[borrower] := found < wanted[borrower];
            FOR lender IN urgent..bulk LOOP     -- settle the loans, in lender order
                CONTINUE WHEN lent_to[lender] <> borrower;
                used := least(spare[lender], found);
                spare[lender] := spare[lender] - used;
                found := found - used;
            END LOOP;
        END LOOP;
    END LOOP;

    IF cardinality(taken) = 0 THEN
        RETURN;
    END IF;
    -- runs alone, by `run_id = ANY (taken)`, and the job's fields by one jobs_pkey probe per
    -- run in a LATERAL subquery with LIMIT 1 (it cannot be flattened into a join): the
    -- primary keys are the only plan, whatever the statistics (docs/worker.md).
    RETURN QUERY
    WITH claimed AS (
        UPDATE runs AS r
        SET status = 'running', attempt = r.attempt + 1, lease_owner = p_owner,
            lease_token = gen_random_uuid(),
            lease_expires_at = clock + make_interval(
                secs => (SELECT j.lease_seconds FROM jobs AS j WHERE j.id = r.job_id)),
            first_claimed_at = coalesce(r.first_claimed_at, clock),
            started_at = clock, updated_at = clock
        WHERE r.run_id = ANY (taken)
          -- A run whose job row is gone (runs.job_id has no foreign key) is left queued:
          -- leased without a job it would break runs_check (no lease_seconds) and fail
          -- every claim that reached it. A scalar subquery, not EXISTS: that would become
          -- a join, for the planner to plan.
          AND (SELECT true FROM jobs AS j WHERE j.id = r.job_id)
        RETURNING r.run_id, r.job_id, r.tenant_id, r.priority, r.nominal_at, r.due_at,
                  r.attempt, r.lease_token, r.lease_expires_at
    )
    SELECT c.run_id, c.job_id, j.key, c.tenant_id, c.priority, c.nominal_at, c.due_at,
           c.attempt, c.lease_token, c.lease_expires_at, clock, j.target, j.payload,
           j.max_attempts, j.lease_seconds, j.rate_limit,
           (SELECT t.signing_secret FROM tenants AS t WHERE t.id = c.tenant_id)
    FROM claimed AS c
    CROSS JOIN LATERAL (SELECT j.key, j.target, j.payload, j.max_attempts, j.lease_seconds,
                               j.rate_limit
                        FROM jobs AS j WHERE j.id = c.job_id LIMIT 1) AS j;
END
$$;
