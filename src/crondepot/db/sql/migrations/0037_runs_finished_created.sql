-- Retention reads only the runs it deletes (issue 34, item 3). The pruner asks for finished
-- runs created before a cut-off, a bounded pass at a time. The BRIN index on created_at
-- (0001) could not serve that for long: a BRIN range's minimum never rises when its old rows
-- are deleted, the freed pages are filled again with new runs, and the dead-lettered runs
-- the pruner keeps stay in them, so after one retention period every range matches every
-- cut-off and each pass reads the whole table (docs/records/performance-runs.md, "The
-- prune"). This partial b-tree holds exactly the runs the pruner may delete, in created_at
-- order: a pass reads its own rows' index entries and heap tuples, nothing else. A run
-- enters it once, when it finishes (that update is not HOT anyway: status is indexed).
-- Built without CONCURRENTLY (migrations run in a transaction): it blocks writes to runs
-- while it is built, a few seconds per million runs.
CREATE INDEX runs_finished_created ON runs (created_at)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'cancelled');

DROP INDEX runs_created_brin;
