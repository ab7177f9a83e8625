-- The worker's claim as a function. It was one statement of eight CTEs: planning it cost
-- about 1.5 ms of server time per claim, more than executing it. Here each step is a small
-- statement whose plan PL/pgSQL keeps for the session: an index range scan of runs_queued
-- per priority, and primary-key lookups for the claimed runs, their jobs and tenants.
--
-- p_limits[i]:   how many runs of priority i (urgent, normal, bulk) to take; for urgent it
--                includes the urgent-only slots' turns.
-- p_lendable[i]: the part of p_limits[i] that may be lent when priority i has too few ready
--                runs (the urgent-only turns are never lent; all zeros when the claim does
--                not lend). Urgent runs fill the urgent-only turns first.
-- A spare turn goes to the next priority (urgent -> normal -> bulk -> urgent) that still has
-- ready runs, so an empty normal queue under an urgent flood gives its turns to bulk, not
-- to urgent; what that one cannot use goes on to the one after. A claim never takes more
-- than sum(p_limits) runs.
-- Every claimed run gets a fresh lease token and attempt+1; the lease is measured on the
-- database clock, and db_now is returned so the worker can translate the deadline to its
-- monotonic clock without trusting its wall clock.
CREATE FUNCTION crondepot_claim_runs(p_owner text, p_limits integer[], p_lendable integer[],
                                     p_now timestamptz DEFAULT NULL)
RETURNS TABLE (run_id text, job_id bigint, job_key text, tenant_id bigint, priority text,
               nominal_at timestamptz, due_at timestamptz, attempt integer,
               lease_token uuid, lease_expires_at timestamptz, db_now timestamptz,
               target jsonb, payload jsonb, max_attempts integer, lease_seconds integer,
               rate_limit text, signing_secret text)
LANGUAGE plpgsql
-- The plans are made once per session, perhaps while runs is nearly empty, and kept after it
-- has grown (until an ANALYZE): a plan made then would seq-scan it (measured: 12 ms a claim
-- over 40,000 runs). Every read here has an index made for it, so take seq scans off the
-- table rather than trust statistics of the moment.
SET enable_seqscan = off
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
    found    integer;
    used     integer;
    borrower integer;
BEGIN
    FOR i IN 1..3 LOOP
        CONTINUE WHEN coalesce(p_limits[i], 0) <= 0;
        -- ORDER BY + LIMIT inside, array_agg outside: the rows locked are the rows returned.
        SELECT coalesce(array_agg(q.run_id), '{}') INTO batch
        FROM (SELECT r.run_id FROM runs AS r
              WHERE r.status = 'queued' AND r.priority = queues[i] AND r.available_at <= clock
              ORDER BY r.available_at
              LIMIT p_limits[i]
              FOR UPDATE SKIP LOCKED) AS q;
        got[i] := cardinality(batch);
        dry[i] := got[i] < p_limits[i];
        taken := taken || batch;
    END LOOP;

    -- Spare turns, per lender: its lendable turns that found no run of its own.
    FOR lender IN 1..3 LOOP
        spare[lender] := coalesce(p_lendable[lender], 0)
                         - greatest(0, got[lender] - (coalesce(p_limits[lender], 0)
                                                      - coalesce(p_lendable[lender], 0)));
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
            -- Our own locks are not skipped by SKIP LOCKED: leave out what we already hold.
            SELECT coalesce(array_agg(q.run_id), '{}') INTO batch
            FROM (SELECT r.run_id FROM runs AS r
                  WHERE r.status = 'queued' AND r.priority = queues[borrower]
                    AND r.available_at <= clock AND r.run_id <> ALL (taken)
                  ORDER BY r.available_at
                  LIMIT wanted[borrower]
                  FOR UPDATE SKIP LOCKED) AS q;
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
    RETURN QUERY
    UPDATE runs AS r
    SET status = 'running', attempt = r.attempt + 1, lease_owner = p_owner,
        lease_token = gen_random_uuid(),
        lease_expires_at = clock + make_interval(secs => j.lease_seconds),
        first_claimed_at = coalesce(r.first_claimed_at, clock),
        started_at = clock, updated_at = clock
    FROM jobs AS j, tenants AS t
    WHERE r.run_id = ANY (taken) AND j.id = r.job_id AND t.id = r.tenant_id
    RETURNING r.run_id, r.job_id, j.key, r.tenant_id, r.priority, r.nominal_at, r.due_at,
              r.attempt, r.lease_token, r.lease_expires_at, clock, j.target, j.payload,
              j.max_attempts, j.lease_seconds, j.rate_limit, t.signing_secret;
END
$$;
