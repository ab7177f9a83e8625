-- A claim writes a new version of each run it takes (status running: status is indexed, so
-- the update is never HOT), and each version costs one entry in every index of runs. The
-- runs list across jobs keeps its index, runs_tenant_status_ended, but without running
-- runs: they are few (at most the workers' slots), runs_running already lists them, and
-- the list reads them from there (queries/api.sql, api_list_runs). One index entry fewer
-- per claim: about a tenth of the WAL a run writes in a worker drain (docs/performance.md).
--
-- The planner reads the statistics of an index's expression only from indexes without a
-- predicate: without these, it guessed a third of a tenant's runs for "ended in the last
-- hour" and listed them with a sequential scan of runs. ANALYZE fills them now, not at
-- autovacuum's next pass; but never on an empty runs (a fresh install): the claim keeps
-- its plans for the session, and plans made on a table analyzed empty read a tenant's
-- whole queue per claim (a table never analyzed is costed as a few pages, and planned
-- right). The first ANALYZE is autovacuum's, once runs has rows.
CREATE STATISTICS runs_ended ON (coalesce(finished_at, due_at)) FROM runs;
DO $$
BEGIN
    IF EXISTS (SELECT FROM runs) THEN
        ANALYZE runs;
    END IF;
END
$$;
-- Built under a new name first, then swapped: the build (about a second per million runs)
-- holds the lock CREATE INDEX takes, under which writes to runs wait and reads go on; only
-- the swap takes the lock that stops reads too, and it is instant (but waits for the
-- queries on runs in progress, as every query then waits for it: run the migration when
-- no long report is reading runs).
CREATE INDEX runs_tenant_status_ended_next ON runs
    (tenant_id, status, (coalesce(finished_at, due_at)) DESC, run_id DESC)
    WHERE status <> 'running';
DROP INDEX runs_tenant_status_ended;
ALTER INDEX runs_tenant_status_ended_next RENAME TO runs_tenant_status_ended;
