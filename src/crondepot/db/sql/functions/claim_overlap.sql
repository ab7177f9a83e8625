-- revision: 3
-- crondepot_claim_overlap: the claim's overlap rules (issue 31, item 1; docs/worker.md,
-- "Overlap rules in the claim"). Called by crondepot_claim_pick (claim_pick.sql) with a
-- batch a take just locked (FOR UPDATE: every run of p_batch is this transaction's to
-- change) and p_busy, the jobs this claim is already leasing a ruled run of. Splits the
-- batch into `lease` (to be leased by the claim, at most p_want, oldest first) and
-- `passed` (not leased, decided: left queued, waiting or for another claim to decide, or
-- written skipped 'overlap' here); `busy` is p_busy with the jobs of `lease` added. A run
-- beyond p_want's turns is in neither: left queued, undecided (a later take of this claim
-- may still lease it); a run a rule would have leased past them is not, so no other run
-- of its job is skipped because of it.
--
-- A run of an `allow` job (runs.overlap, copied from the job when the run was written) is
-- leased as before. For the others, per job, oldest first:
--   - the decision is serialised per job by a transaction advisory lock (two-key form,
--     class 31001 * 65536 + 16 more bits of the job id, then its low 31 bits (two jobs
--     that share a key only contend, harmlessly; no id overflows it); never waited for: a job
--     another claim is deciding this instant is passed over, its runs left queued, for a
--     later claim). Released at commit, after the lease is visible;
--   - "running" is then read by a *new statement*, so with a snapshot taken after the lock:
--     under READ COMMITTED each statement of a PL/pgSQL function sees what was committed
--     when it began. A lease another claim committed before our lock is seen; one that
--     commits after cannot exist (that claim would need the lock). A NOT EXISTS in the
--     take's own statement would use the take's snapshot and miss a lease committed
--     between that snapshot and the row lock: two workers would lease two runs of the job;
--   - runs_overlap_running (unique: one leased run per ruled job) is the database's own
--     guarantee behind it: if the logic were ever wrong, the claim would fail, not lease
--     twice. Since runs is partitioned by day (migration 0040) each partition has its own,
--     so it holds for the runs of one day: across days the lock and this probe are the
--     guarantee (tests/integration/test_runs_partitions.py claims two days' runs of one
--     job from two workers at once).
-- Not running: the oldest run is leased; the job is then busy for the rest of the batch.
-- Busy: `skip` writes the run skipped 'overlap' (no attempt counted, never sent);
-- `buffer_one` and `replace` leave the oldest waiting run queued and write any newer one
-- skipped 'overlap': at most one waits, the newer is dropped (Temporal's BufferOne).
-- `replace` also writes runs.replace_requested_at on the running run (migration 0029),
-- once, under the job's lock: its worker reads it at its next lease renewal, cancels the
-- call where it can and records the run skipped 'replaced', which frees the job for the
-- one waiting. Only ever reached on the rules path: an `allow` claim pays nothing. The one waiting is queued and ready: it is leased by the
-- first claim after the running run ends (succeeded, failed, retried or dead) or is
-- reaped when its worker was lost (the reaper's requeue makes it queued, not running).
-- Settings as crondepot_claim_runs's (generic plans, index scans).
CREATE OR REPLACE FUNCTION crondepot_claim_overlap(p_batch text[], p_clock timestamptz,
                                                   p_busy bigint[], p_want integer,
                                                   OUT lease text[], OUT passed text[],
                                                   OUT busy bigint[])
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_mergejoin = off
SET enable_hashjoin = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    c        record;
    job      bigint := NULL;
    locked   boolean := false;
    running  boolean := false;
    waits    boolean := false;
    held     text;                  -- the job's running run (leased by an earlier claim)
    asked    boolean := true;       -- it was asked to give way (or there is none to ask)
    dropped  text[] := '{}';
BEGIN
    busy := p_busy;
    passed := '{}';
    -- The batch's ruled runs (primary-key probes); the rest are leased as they are.
    SELECT coalesce(array_agg(r.run_id), '{}') INTO passed
    FROM runs AS r WHERE r.run_id = ANY (p_batch) AND r.overlap <> 'allow';
    IF cardinality(passed) = 0 THEN
        lease := p_batch[1:p_want];
        RETURN;
    END IF;
    -- The allow runs, in the take's order, up to p_want.
    lease := ARRAY(SELECT b.id FROM unnest(p_batch) WITH ORDINALITY AS b(id, o)
                   WHERE b.id <> ALL (passed) ORDER BY b.o);
    lease := lease[1:p_want];
    passed := '{}';

    FOR c IN SELECT r.run_id, r.job_id, r.overlap, r.available_at
             FROM runs AS r
             WHERE r.run_id = ANY (p_batch) AND r.overlap <> 'allow'
             ORDER BY r.job_id, r.available_at, r.run_id
    LOOP
        IF job IS DISTINCT FROM c.job_id THEN
            job := c.job_id;
            locked := pg_try_advisory_xact_lock(
                (31001 * 65536 + ((job >> 31) & 65535))::integer,
                (job & 2147483647)::integer);
            -- (A statement of its own, after the lock: its snapshot is fresh. One probe
            -- of each partition's runs_overlap_running: at most one row. It also reads whether
            -- that run was already asked to give way, for `replace`.) A job this claim
            -- leased a run of (busy) has no other run running.
            held := NULL;
            asked := true;
            IF job = ANY (busy) THEN
                running := true;
            ELSE
                SELECT x.run_id, x.replace_requested_at IS NOT NULL INTO held, asked
                FROM runs AS x
                WHERE x.job_id = job AND x.status = 'running' AND x.overlap <> 'allow';
                running := held IS NOT NULL;
                asked := coalesce(asked, true);
            END IF;
            -- One already waiting: an older ready queued ruled run of the job outside
            -- this batch (another claim holds it this instant, or a take passed it by).
            waits := running AND c.overlap <> 'skip' AND EXISTS (
                SELECT FROM runs AS w
                WHERE w.job_id = job AND w.status = 'queued' AND w.overlap <> 'allow'
                  AND w.available_at <= p_clock AND w.run_id <> ALL (p_batch)
                  AND (w.available_at, w.run_id) < (c.available_at, c.run_id)
                  AND NOT coalesce(w.deadline_at < p_clock, false));
        END IF;
        IF NOT locked THEN
            passed := passed || c.run_id;               -- another claim decides this job
        ELSIF NOT running AND cardinality(lease) >= p_want THEN
            NULL;                                       -- no turn left: undecided
        ELSIF NOT running THEN
            lease := lease || c.run_id;
            busy := busy || job;
            running := true;
        ELSIF c.overlap = 'skip' OR waits THEN
            dropped := dropped || c.run_id;
        ELSE
            passed := passed || c.run_id;               -- the one that waits
            waits := true;
        END IF;
        -- `replace`: the running run (leased by an earlier claim; one this claim leases is
        -- not yet 'running' and is left alone) is asked to give way, once: a primary-key
        -- update under the job's lock, only when the probe above found it not yet asked
        -- (a waiting run met again by later claims costs nothing more).
        IF locked AND c.overlap = 'replace' AND NOT asked THEN
            UPDATE runs AS x SET replace_requested_at = p_clock
            WHERE x.run_id = held AND x.status = 'running'
              AND x.replace_requested_at IS NULL;
            asked := true;
        END IF;
    END LOOP;

    IF cardinality(dropped) > 0 THEN
        UPDATE runs AS r
        SET status = 'skipped', skip_reason = 'overlap', finished_at = p_clock,
            updated_at = p_clock,
            -- a held run's own ready time back, as every settling of a queued run does
            available_at = coalesce(r.held_available_at, r.available_at),
            held_available_at = NULL
        WHERE r.run_id = ANY (dropped) AND r.status = 'queued';
        passed := passed || dropped;
    END IF;
END
$$;
