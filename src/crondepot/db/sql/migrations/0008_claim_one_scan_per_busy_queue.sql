-- The claim scanned a busy queue twice when the others were empty: once for its own turns,
-- then again for the turns the empty queues lent it. Under one-priority load (every
-- reminder `normal`, the common case, and the benchmark's) that was four index scans of
-- runs_queued per claim where three do: the second walked again past the entries the first
-- had just locked and past the dead entries of runs claimed moments before.
--
-- Now urgent and bulk are scanned first and normal last. By then urgent's spare turns are
-- known (normal is its first borrower) and so is bulk's (normal is its borrower when urgent
-- is dry), so normal's one scan takes its own turns and those loans together. The runs taken
-- per priority are exactly what the lending rules give (a property test checks the function
-- against a model of the rules; another counts the scans): normal would have been lent
-- those turns first anyway, a scan of one index range in available_at order takes the same
-- runs in one go as in two, and a loan normal cannot supply goes on, in the passes below, to
-- the next borrower as before. Loans into urgent and bulk are still taken in scans of their
-- own, as their lenders are not all known when they are scanned.
--
-- Same signature, result and settings as before (0004, 0005).
CREATE OR REPLACE FUNCTION crondepot_claim_runs(p_owner text, p_limits integer[], p_lendable integer[],
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
    found    integer;
    used     integer;
    borrower integer;
    i        integer;
    own      integer;
    loan_u   integer;
    loan_b   integer;
    lim      integer;
BEGIN
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
        -- ORDER BY + LIMIT inside, array_agg outside: the rows locked are the rows returned.
        SELECT coalesce(array_agg(q.run_id), '{}') INTO batch
        FROM (SELECT r.run_id FROM runs AS r
              WHERE r.status = 'queued' AND r.priority = queues[i] AND r.available_at <= clock
              ORDER BY r.available_at
              LIMIT lim
              FOR UPDATE SKIP LOCKED) AS q;
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
