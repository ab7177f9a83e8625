-- revision: 2
-- crondepot_claim_pick: one take of the claim (functions/claim_runs.sql calls it for each
-- priority's turns and each loan): up to p_want ready runs of p_priority among the tenants
-- p_ready, locked, with the overlap rules applied when p_rules (some queued run has one).
-- One tenant: crondepot_claim_one_tenant; several: crondepot_claim_fair (their shares).
-- p_exclude: the runs this claim already holds (leased or passed) or '{}'.
--
-- Without rules it is the take alone, as before. With them, the runs a rule did not lease
-- (a buffered run that waits, a run written skipped, a job another claim is deciding) are
-- `passed`, and the take is repeated for the turns they left, at most three more times,
-- each time reading four times as many runs as turns are left (claim_overlap leases no
-- more than the turns; the runs read beyond them are left, undecided). Waiting runs sit
-- at the front of their tenant's range (oldest first): without the repeat a claim of one
-- run would find one every time and claim nothing while other runs are ready; with it, a
-- claim looks past up to 85 times its turns of them (1 + 4 + 16 + 64). `passed` and
-- `busy` carry across the claim's takes (claim_overlap.sql).
-- p_rules is read by the caller in an earlier statement than the take, so under READ
-- COMMITTED a tick that commits between the two can bring ruled runs the take returns while
-- p_rules says there are none: leased as `allow`, two runs of one job would break
-- runs_overlap_running and fail the whole claim (revision 2). So when p_rules is false it is
-- asked again after the take, in a statement of its own: its snapshot is later than the
-- take's and the runs the take locked are still queued, so it sees every ruled run the take
-- could return. Asked as claim_runs asks it, in runs_overlap_queued's order (one descent).
CREATE OR REPLACE FUNCTION crondepot_claim_pick(p_priority text, p_ready bigint[],
                                                p_want integer, p_clock timestamptz,
                                                p_exclude text[], p_held bigint[],
                                                p_rules boolean,
                                                INOUT passed text[], INOUT busy bigint[],
                                                OUT batch text[])
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_mergejoin = off
SET enable_hashjoin = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    got   text[];
    kept  text[];
    left_ text[];
    want  integer;
    read_ integer;
BEGIN
    batch := '{}';
    FOR round IN 1..4 LOOP
        want := p_want - cardinality(batch);
        EXIT WHEN want <= 0;
        read_ := want * (1 << (2 * (round - 1)));      -- 1, 4, 16, 64 times the turns left
        IF cardinality(p_ready) = 1 THEN
            got := crondepot_claim_one_tenant(p_priority, p_ready[1], read_, p_clock,
                                              p_exclude || batch, p_held);
        ELSE
            got := crondepot_claim_fair(p_priority, p_ready, read_, p_clock,
                                        p_exclude || batch, p_held);
        END IF;
        IF NOT p_rules THEN
            p_rules := (SELECT true FROM runs AS r
                        WHERE r.status = 'queued' AND r.overlap <> 'allow'
                        ORDER BY r.job_id, r.available_at LIMIT 1) IS NOT NULL;
        END IF;
        IF NOT p_rules THEN
            batch := got;
            RETURN;
        END IF;
        SELECT o.lease, o.passed, o.busy INTO kept, left_, busy
        FROM crondepot_claim_overlap(got, p_clock, busy, want) AS o;
        batch := batch || kept;
        passed := passed || left_;
        p_exclude := p_exclude || left_;
        -- Done when the turns are filled (next round), nothing was passed (the take had
        -- all it could) or the take was short (no more ready runs).
        EXIT WHEN cardinality(left_) = 0 OR cardinality(got) < read_;
    END LOOP;
END
$$;
