-- name: prune_finished_runs
-- Retention: delete up to %(limit)s finished runs written before the cut-off. The BRIN index
-- on created_at finds the old block ranges directly, and the LIMIT bounds each pass, so a
-- pass costs the same on a table of a million runs or a billion. Dead runs are kept: a
-- person decides about them. SKIP LOCKED lets a manual `crondepot prune` run beside the
-- maintenance leader's pruner. A run's earlier attempts (run_attempts, no foreign key) go in
-- the same statement: one probe of run_attempts_run per run pruned. The cut-off is a
-- scalar subquery (computed once, a parameter of the scan): written inline, coalesce(...)
-- counts as leaky under row-level security (docs/operations.md) and could not be the BRIN
-- index's condition, so every pass would read all of runs.
WITH old AS (
    SELECT run_id FROM runs
    WHERE created_at < (SELECT coalesce(%(now)s::timestamptz, now())
                               - make_interval(secs => %(keep_seconds)s::float8))
      AND status IN ('succeeded', 'failed', 'skipped', 'cancelled')
    LIMIT %(limit)s::integer
    FOR UPDATE SKIP LOCKED
), attempts AS (
    DELETE FROM run_attempts AS a USING old WHERE a.run_id = old.run_id
)
DELETE FROM runs AS r USING old WHERE r.run_id = old.run_id;
