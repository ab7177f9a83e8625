-- revision: 6
-- crondepot_record_successes: the outcome writer's successes, many runs in one statement
-- and one commit (queue/outcome.py through queue.sql's record_successes). This file is the
-- function's one home; `crondepot migrate` re-applies it whenever its text changes.
--
-- p_successes is one jsonb array of {run_id, token, attempt, result}: one parameter to send
-- (psycopg dumps a list parameter element by element in Python), and a row estimate that
-- does not depend on its value. Each row is fenced by its lease token. Two cases are
-- accepted: the holder still holds the run; or its lease expired and the run was reaped
-- back to the queue but nobody has claimed it since (same attempt number, no token). The
-- call happened; recording it then prevents a second call. Once another worker has claimed
-- the run (attempt moved on), nothing is written. The run ids returned are the ones
-- recorded; a run missing from the result lost its lease.
--
-- The run keeps the name of the worker that made its last attempt (`worker`: the lease
-- owner, which the outcome clears; after a reap the reaper already copied it). A success
-- heals its job: jobs.failing_fires goes back to 0. Only a job that was failing is written
-- (and locked, in id order, so that two batches healing the same jobs cannot deadlock); a
-- healthy job's success costs one probe of jobs_pkey and no write. A first-attempt success
-- writes no run_attempts row.
--
-- Plans: a function, as the claim is (docs/worker.md, "How the claim is built"), so its
-- plans are kept for the session. The batch's size is unknown when they are made (100 rows
-- is the estimate for a function's result), so they must be right for tables of any size,
-- analyzed or not. Joined on run_id alone, the planner may choose a sequential scan of runs
-- and a hash join, or a full scan of the primary key per batch row. With the batch's run
-- ids as an array, `run_id = ANY (ids)` is an index condition on the primary key whatever
-- the statistics say, and the other scans are switched off so nothing else looks cheaper.
CREATE OR REPLACE FUNCTION crondepot_record_successes(p_successes jsonb)
RETURNS TABLE (run_id text)
LANGUAGE plpgsql
SET enable_seqscan = off
SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    ids text[];
BEGIN
    SELECT array_agg(e ->> 'run_id') INTO ids FROM jsonb_array_elements(p_successes) AS e;
    RETURN QUERY
    WITH done AS (
        UPDATE runs AS r
        SET status = 'succeeded', finished_at = now(), updated_at = now(), result = s.result,
            worker = coalesce(r.lease_owner, r.worker),
            lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
            last_error = NULL, error_class = NULL
        FROM jsonb_to_recordset(p_successes)
             AS s(run_id text, token uuid, attempt integer, result jsonb)
        WHERE r.run_id = ANY (ids) AND r.run_id = s.run_id
          AND ((r.status = 'running' AND r.lease_token = s.token)
               OR (r.status = 'queued' AND r.lease_token IS NULL AND r.attempt = s.attempt))
        RETURNING r.run_id, r.job_id
    ), failing AS (
        -- jobs alone, by `id = ANY (…)`: the primary key is then the only index path the
        -- planner builds, whatever the statistics (joined with the batch, a plan made
        -- while jobs held one row could read the whole table, here and in `healed`, and
        -- keep doing so as jobs grows). Locked in id order, so two batches healing the
        -- same jobs cannot deadlock; the ORDER BY costs no sort (the scan of the sorted,
        -- deduplicated array returns that order), and jobs_pkey is the only index that
        -- provides it, with the same index condition. `<> 0`, not `> 0` (the
        -- same: the count is never negative): `> 0` would make the partial index
        -- jobs_failing a path, read whole on the day a gateway is down.
        SELECT j.id FROM jobs AS j
        WHERE j.id = ANY (ARRAY(SELECT done.job_id FROM done)) AND j.failing_fires <> 0
        ORDER BY j.id
        FOR UPDATE OF j
    ), healed AS (
        UPDATE jobs AS j SET failing_fires = 0
        WHERE j.id = ANY (ARRAY(SELECT failing.id FROM failing))
    )
    SELECT done.run_id FROM done;
END
$$;
