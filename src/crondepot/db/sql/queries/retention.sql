-- name: prune_cutoff
-- The retention cut-off, on the database's clock unless %(now)s is given: computed by its own
-- statement so that prune_finished_runs gets it as a plain parameter (below). `cutoff` is
-- the retention's own; `rows_before` is where the row-by-row prune stops: on a partitioned
-- runs (migration 0040) no later than the start of the oldest day partition, because a day
-- goes whole once the cut-off passes its end (crondepot_runs_retire), never row by row.
-- The default and history partitions are pruned row by row. A day partition's runs have
-- nominal times in it and were written at them or later, so the row prune finds none there.
SELECT c.cutoff,
       least(c.cutoff, (SELECT min(p.lo) FROM crondepot_runs_partitions() AS p
                        WHERE p.lo > '-infinity')) AS rows_before
FROM (SELECT coalesce(%(now)s::timestamptz, now())
             - make_interval(secs => %(keep_seconds)s::float8) AS cutoff) AS c;

-- name: prune_finished_runs
-- Retention: delete up to %(limit)s finished runs created before %(cutoff)s, oldest first. A
-- pass reads only the rows it deletes: the partial index runs_finished_created holds exactly
-- the runs a prune may delete, in created_at order, and the LIMIT bounds each pass, so a
-- pass costs the same on a table of a million runs or a billion (docs/operations.md,
-- "Retention"). The cut-off must be a parameter: computed here (a scalar subquery, an
-- InitPlan) the planner cannot estimate it and takes a third of the table for it, and
-- written inline coalesce(...) counts as leaky under row-level security and is no index
-- condition at all. Dead runs are kept: a person decides about them. SKIP LOCKED lets a
-- manual `crondepot prune` run beside the maintenance leader's pruner. A run's earlier
-- attempts (run_attempts, no foreign key) go in the same statement. Both deletes take the
-- ids as an array (an index condition: one probe of run_attempts_run and of runs_pkey a
-- run) rather than a join, which the planner made a hash join over all of run_attempts.
WITH old AS (
    SELECT run_id FROM runs
    WHERE created_at < %(cutoff)s::timestamptz
      AND status IN ('succeeded', 'failed', 'skipped', 'cancelled')
    ORDER BY created_at
    LIMIT %(limit)s::integer
    FOR UPDATE SKIP LOCKED
), attempts AS (
    DELETE FROM run_attempts WHERE run_id = ANY (ARRAY(SELECT run_id FROM old))
)
DELETE FROM runs WHERE run_id = ANY (ARRAY(SELECT run_id FROM old));
