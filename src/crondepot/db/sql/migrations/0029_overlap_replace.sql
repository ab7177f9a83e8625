-- overlap `replace` (issue 31, item 1): a fire of a `replace` job that comes while a run of
-- the job is running asks for that run to be given up. The claim that finds the new run
-- waiting writes the request on the running run (functions/claim_overlap.sql); the worker
-- holding it reads it with its next lease renewal (queries/queue.sql,
-- extend_acquired_leases), cancels the call where it can and records the run skipped,
-- reason 'replaced' (docs/worker.md, "Overlap rules in the claim"). The database stays the
-- only place the request lives: a worker that restarts, or another that reaps the run,
-- reads the same column. Nullable without a default: adding it rewrites nothing, and
-- every run of the previous release has no request.
ALTER TABLE runs ADD COLUMN replace_requested_at timestamptz;
