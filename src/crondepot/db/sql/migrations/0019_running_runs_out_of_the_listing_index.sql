-- A claim writes a new version of each run it takes (status running: status is indexed, so
-- the update is never HOT), and each version costs one entry in every index of runs. The
-- runs list across jobs keeps its index, runs_tenant_status_ended, but without running
-- runs: they are few (at most the workers' slots), runs_running already lists them, and
-- the list reads them from there (queries/api.sql, api_list_runs). One index entry fewer
-- per claim: about a tenth of the WAL a run writes in a worker drain (docs/performance.md).
-- Rebuilt without CONCURRENTLY (migrations run in a transaction): writes to runs wait for
-- it, about a second per million runs.
DROP INDEX runs_tenant_status_ended;
CREATE INDEX runs_tenant_status_ended ON runs
    (tenant_id, status, (coalesce(finished_at, due_at)) DESC, run_id DESC)
    WHERE status <> 'running';
-- The planner reads the statistics of an index's expression only from indexes without a
-- predicate: without these, it guessed a third of a tenant's runs for "ended in the last
-- hour" and listed them with a sequential scan of runs.
CREATE STATISTICS runs_ended ON (coalesce(finished_at, due_at)) FROM runs;
