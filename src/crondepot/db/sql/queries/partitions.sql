-- name: runs_partitioned
-- Whether runs is the partitioned parent (migration 0040) or still one table.
SELECT c.relkind = 'p' AS partitioned FROM pg_class AS c WHERE c.oid = 'runs'::regclass;

-- name: runs_lock_timeout
-- How long this transaction's DDL on runs may wait for its lock: while it waits, every
-- query of runs waits behind it, so a short bound and a later turn beat a long wait.
SELECT set_config('lock_timeout', %(ms)s::text, true);

-- name: runs_partitions_ahead
-- Day partitions made up to %(days)s days after %(now)s's UTC day (or the database clock's).
SELECT made FROM crondepot_runs_partitions_ahead(coalesce(%(now)s::timestamptz, now()),
                                                 %(days)s::integer) AS made;

-- name: runs_partitions_ended
-- The partitions whose last instant is before the retention cut-off, oldest first.
SELECT p.name FROM crondepot_runs_partitions() AS p
WHERE p.hi <= %(cutoff)s::timestamptz ORDER BY p.hi;

-- name: runs_partition_retire
SELECT r.moved, r.size FROM crondepot_runs_retire(%(name)s, %(cutoff)s::timestamptz) AS r;

-- name: runs_history_switch
-- The conversion's switch: the start of the UTC day after tomorrow. Runs are written at
-- their nominal time or later, so none of the present table is at or after it, and the two
-- steps before the attach have a day and more to finish.
SELECT (date_trunc('day', coalesce(%(now)s::timestamptz, now()) AT TIME ZONE 'UTC')
        + interval '2 days') AT TIME ZONE 'UTC' AS switch;

-- name: runs_history_mark
SELECT crondepot_runs_history_mark(%(until)s::timestamptz);

-- name: runs_history_validate
-- Reads every run under a SHARE UPDATE EXCLUSIVE lock: the tick's and the workers' writes
-- go on meanwhile.
ALTER TABLE runs VALIDATE CONSTRAINT runs_history_until;

-- name: runs_history_unmark
ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_history_until;

-- name: runs_partition
SELECT crondepot_runs_partition(%(until)s::timestamptz);
