-- Deadline first among the runs of one rate limit (issue 34, item 5; docs/worker.md,
-- "Deadline first within a rate limit"). When a saturated bucket is the bottleneck, the
-- claim gives each of a limit's turns to that limit's ready run with the earliest misfire
-- deadline, so the runs that would be lost first go first (functions/claim_deadline.sql).
--
-- runs.rate_limit is a copy of the job's rate limit made when the run is written (as
-- priority and overlap are), so the claim can name it and the index below can hold it.
-- NULL: no limit (or a run written by the previous release: it keeps its queue turn, as
-- before). Nullable without a default: adding it rewrites nothing.
ALTER TABLE runs ADD COLUMN rate_limit text;

-- The runs waiting or in flight carry their job's limit from now on (a running run may be
-- retried: it is queued again with it). Dead runs are left as they are: they are never
-- pruned, so on a long-lived database an update of them all would hold this migration's
-- locks on runs for long, under the previous release's heartbeats and outcomes; a dead run
-- replayed keeps its queue turn, as every run did before.
UPDATE runs AS r SET rate_limit = j.rate_limit
FROM jobs AS j
WHERE j.id = r.job_id AND j.rate_limit IS NOT NULL
  AND r.status IN ('queued', 'running');

-- The queued runs of a limit that have a deadline, per (priority, tenant, limit), earliest
-- deadline first and, at one deadline, oldest first: the claim's one range scan for a
-- limit's earlier-deadline runs. Runs without a deadline or a limit are not in it.
CREATE INDEX runs_queued_limit_deadline
    ON runs (priority, tenant_id, rate_limit, deadline_at, available_at)
    WHERE status = 'queued' AND rate_limit IS NOT NULL AND deadline_at IS NOT NULL;
