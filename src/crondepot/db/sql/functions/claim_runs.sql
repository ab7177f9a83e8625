-- revision: 7
-- crondepot_claim_runs: a worker's claim in one call (queue/claim.py calls it through
-- queue.sql's claim_runs). This file is the function's one home: `crondepot migrate`
-- re-applies it whenever its text changes (db/migrations.py, "definitions"); the migrations
-- that created earlier versions (0004, 0005, 0008) are history, not the current code.
--
-- Why a function: planning the claim as one statement of CTEs cost more server time than
-- running it (about 1.5 ms a claim). Here each step is a small statement whose plan PL/pgSQL
-- keeps for the session: a loose index scan of runs_queued for the (priority, tenant) pairs
-- with runs ready, an index range scan per busy queue (per tenant when several have runs
-- ready), then primary-key lookups for the claimed runs, their jobs and tenants.
--
-- p_limits[i]:   how many runs of priority i (urgent, normal, bulk) to take; for urgent it
--                includes the urgent-only slots' turns.
-- p_lendable[i]: the part of p_limits[i] that may be lent when priority i has too few ready
--                runs (the urgent-only turns are never lent; all zeros when the claim does
--                not lend). Urgent runs fill the urgent-only turns first.
-- A spare turn goes to the next priority (urgent -> normal -> bulk -> urgent) that still has
-- ready runs; what that one cannot use goes on to the one after. A claim never takes more
-- than sum(p_limits) runs. Every claimed run gets a fresh lease token and attempt+1; the
-- lease is measured on the database clock, and db_now is returned so the worker can
-- translate the deadline to its monotonic clock without trusting its wall clock.
--
-- Fair across tenants (docs/worker.md, "Fair across tenants"; migration 0012): the claim first lists, in one
-- statement, the (priority, tenant) pairs that have a run ready. runs_queued is ordered
-- (priority, tenant_id, available_at), so a recursive query hops from one pair to the
-- next: one index descent per pair with queued runs, however many runs each has. A queue
-- with no ready run is not scanned at all. A queue with one tenant ready (the common case)
-- is scanned as before, in available_at order, within that tenant's range. A queue with
-- several shares its turns among them by their tenants.claim_weight
-- (functions/claim_fair.sql): a tenant with 200,000 runs due at 9:00 takes its share, and
-- another tenant's run due at 9:00:05 starts with the next claim, not after the 200,000.
-- Each queue's share is whatever the weighted order and the lending below give it, exactly
-- as before: a fair take returns as many runs as a plain scan would (a tenant short of
-- runs leaves its turns to the others), so the lending rules see the same counts.
--
-- One scan per busy queue: urgent and bulk are scanned first and normal last, so normal's
-- one scan takes its own turns and the turns urgent and bulk lend it together (under
-- one-priority load, one tenant: the listing's two index descents and normal's one scan).
-- A property test checks the runs taken per priority against a model of the lending rules,
-- with the runs spread over several tenants; another counts the scans.
--
-- The deadline (docs/scheduler.md, "Catch-up, misfire, spread"): a run whose misfire deadline (runs.deadline_at) has passed is
-- never leased: every scan passes over it (NULL, run_late, is never past), so a claim fills
-- its turns with runs still worth sending however many late ones wait ahead of them. The
-- workers' maintenance records the late ones skipped, 'deadline_passed'
-- (queue.sql: skip_runs_past_deadline). The result columns are those of the first release:
-- workers of the previous release keep claiming while a new one migrates.
--
-- Holds (holds.py, migrations 0016 and 0018): held runs are moved out of the
-- ready range (available_at = 'infinity', their own time kept in held_available_at) when
-- the hold is made and, for runs queued later, by the rescuer each turn; so no scan here
-- walks a held backlog (100,000 held runs cost every claim about a second when they were
-- only filtered here). The runs queued since the rescuer's last turn are passed over like
-- late ones: the claim reads the tenants with a hold once (one probe of the holds table's
-- primary key, empty in the common case); each scan asks crondepot_run_held only for the
-- runs of those tenants, so without a hold the scans are the plans they were (the extra
-- condition is a test of a NULL array). A tenant whose runs are all moved out is listed
-- below (its newest entry is at 'infinity') and found not ready by one probe of the front.
--
-- Settings: plans are made once per session, perhaps while runs is nearly empty, and kept
-- after it has grown; a plan made then would seq-scan it (12 ms a claim over 40,000 runs),
-- so seq scans are off. So are bitmap scans, merge and hash joins: every statement here
-- joins a handful of rows by primary key. For the statements with LIMIT from a parameter,
-- the plan cache chose a custom plan on every call (about 30 % of the server's CPU per run
-- in a two-worker drain): generic plans are forced, as the statements have one right plan
-- whatever the values.
--
-- The final UPDATE has one right plan too, because of its shape (revision 6; revision 7
-- leaves a run whose job row is gone queued, as revision 5 did): it names runs alone,
-- reached by `run_id = ANY (taken)`, so the primary key is the only index path the planner
-- builds (a full scan of another index is built only for an order or a join to use, and
-- there is neither). The job's fields come from one probe of jobs_pkey per run, in a
-- LATERAL subquery with LIMIT 1: it cannot be flattened into a join, so the claimed rows
-- drive it. Revision 5 joined runs to jobs in the UPDATE and planned it on every call
-- (EXECUTE): a join planned on the statistics of a runs table analyzed with no run or one (a
-- fresh install) chose a full scan of runs_job, every run of a job per claim, and a plan
-- kept for the session (revision 4) kept doing so as the table grew (at 500 runs due a
-- second, claims took longer every minute). Planning per call avoided keeping it, but not
-- making it while the statistics stayed small: once one job's runs piled up, each claim of
-- 10 read its 600 runs; and planning it showed in the function's own time (4 to 6 µs per
-- run less without it in a 100-slot drain, track_functions; within noise end to end).
-- Tests plan the claim on tables analyzed empty and with one run, then count the tuples a
-- claim reads once runs, or one job's runs, have grown. The tenant's signing secret is read per run, not joined.
CREATE OR REPLACE FUNCTION crondepot_claim_runs(p_owner text, p_limits integer[], p_lendable integer[],
                                     p_now timestamptz DEFAULT NULL)
RETURNS TABLE (run_id text, job_id bigint, job_key text, tenant_id bigint, priority text,
               nominal_at timestamptz, due_at timestamptz, attempt integer,
               lease_token uuid, lease_expires_at timestamptz, db_now timestamptz,
               target jsonb, payload jsonb, max_attempts integer, lease_seconds integer,
               rate_limit text, signing_secret text)
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_mergejoin = off
SET enable_hashjoin = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
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
BEGIN
    SELECT array_agg(DISTINCT h.tenant_id) INTO held FROM holds AS h;

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
    -- costs a sort per claim.)
    SELECT array_agg(p.tenant_id) FILTER (WHERE p.priority = 'urgent'),
           array_agg(p.tenant_id) FILTER (WHERE p.priority = 'normal'),
           array_agg(p.tenant_id) FILTER (WHERE p.priority = 'bulk')
    INTO ready_u, ready_n, ready_b
    FROM tails AS p
    WHERE CASE WHEN p.available_at <= clock THEN true
               ELSE EXISTS (SELECT FROM runs AS r
                            WHERE r.status = 'queued' AND r.priority = p.priority
                              AND r.tenant_id = p.tenant_id AND r.available_at <= clock)
          END;

    FOREACH i IN ARRAY ARRAY[1, 3, 2] LOOP   -- normal last: see above
        own := greatest(coalesce(p_limits[i], 0), 0);
        loan_u := 0;
        loan_b := 0;
        IF i = 2 THEN
            -- Urgent's spare goes to normal first; bulk's goes to urgent unless urgent is
            -- dry, then to normal. Both are known now: take them in normal's own scan.
            loan_u := greatest(spare[1], 0);
            IF dry[1] THEN
                loan_b := greatest(spare[3], 0);
            END IF;
        END IF;
        lim := own + loan_u + loan_b;
        CONTINUE WHEN lim = 0;
        ready := CASE i WHEN 1 THEN ready_u WHEN 2 THEN ready_n ELSE ready_b END;
        IF ready IS NULL THEN
            batch := '{}';
        ELSIF cardinality(ready) = 1 THEN
            -- ORDER BY + LIMIT inside, array_agg outside: the rows locked are the rows
            -- returned.
            SELECT coalesce(array_agg(q.run_id), '{}') INTO batch
            FROM (SELECT r.run_id FROM runs AS r
                  WHERE r.status = 'queued' AND r.priority = queues[i]
                    AND r.tenant_id = ready[1] AND r.available_at <= clock
                    AND NOT coalesce(r.deadline_at < clock, false)
                    AND (held IS NULL OR r.tenant_id <> ALL (held)
                         OR NOT crondepot_run_held(r.tenant_id, r.job_id))
                  ORDER BY r.available_at
                  LIMIT lim
                  FOR UPDATE SKIP LOCKED) AS q;
        ELSE
            batch := crondepot_claim_fair(queues[i], ready, lim, clock, taken, held);
        END IF;
        found := cardinality(batch);
        taken := taken || batch;
        got[i] := least(found, own);
        dry[i] := found < lim;
        -- Spare, per lender: its lendable turns that found no run of its own (the turns it
        -- may not lend are filled first).
        spare[i] := coalesce(p_lendable[i], 0)
                    - greatest(0, got[i] - (own - coalesce(p_lendable[i], 0)));
        IF i = 2 THEN                       -- settle the loans it carried, in lender order
            found := found - got[i];
            used := least(loan_u, found);
            spare[1] := spare[1] - used;
            spare[3] := spare[3] - least(loan_b, found - used);
        END IF;
    END LOOP;

    -- Each lender's spare goes to its first borrower that is not dry; what a borrower
    -- cannot supply goes, in the second round, to the lender's other borrower. Loans to the
    -- same borrower are taken in one scan.
    FOR pass IN 1..2 LOOP
        wanted := ARRAY[0, 0, 0];
        lent_to := ARRAY[0, 0, 0];
        FOR lender IN 1..3 LOOP
            CONTINUE WHEN spare[lender] <= 0;
            FOR step IN 1..2 LOOP
                borrower := (lender + step - 1) % 3 + 1;
                IF NOT dry[borrower] THEN
                    lent_to[lender] := borrower;
                    wanted[borrower] := wanted[borrower] + spare[lender];
                    EXIT;
                END IF;
            END LOOP;
        END LOOP;
        EXIT WHEN wanted = ARRAY[0, 0, 0];
        FOR borrower IN 1..3 LOOP
            CONTINUE WHEN wanted[borrower] = 0;
            ready := CASE borrower WHEN 1 THEN ready_u WHEN 2 THEN ready_n ELSE ready_b END;
            IF ready IS NULL THEN
                batch := '{}';
            ELSIF cardinality(ready) = 1 THEN
                -- Our own locks are not skipped by SKIP LOCKED: leave out what we hold.
                SELECT coalesce(array_agg(q.run_id), '{}') INTO batch
                FROM (SELECT r.run_id FROM runs AS r
                      WHERE r.status = 'queued' AND r.priority = queues[borrower]
                        AND r.tenant_id = ready[1] AND r.available_at <= clock
                        AND r.run_id <> ALL (taken)
                        AND NOT coalesce(r.deadline_at < clock, false)
                        AND (held IS NULL OR r.tenant_id <> ALL (held)
                             OR NOT crondepot_run_held(r.tenant_id, r.job_id))
                      ORDER BY r.available_at
                      LIMIT wanted[borrower]
                      FOR UPDATE SKIP LOCKED) AS q;
            ELSE
                batch := crondepot_claim_fair(queues[borrower], ready, wanted[borrower],
                                              clock, taken, held);
            END IF;
            taken := taken || batch;
            found := cardinality(batch);
            dry[borrower] := found < wanted[borrower];
            FOR lender IN 1..3 LOOP       -- settle the loans, in lender order
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
    -- One plan whatever the statistics: see "Settings" above.
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
          -- A run whose job row is gone (runs.job_id has no foreign key) is left queued, as
          -- the join of revision 5 left it: leased without a job it would break runs_check
          -- (no lease_seconds) and fail every claim that reached it. A scalar subquery, not
          -- EXISTS: that would become a join, for the planner to plan.
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
