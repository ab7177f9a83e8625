-- runs partitioned by range of nominal_at, a partition a UTC day (issue 34, item 3): a burst's
-- runs go into one day's indexes, not indexes of the whole history, and a day past retention
-- is dropped, not deleted. docs/operations.md, "Partitions of runs", is the operator's side;
-- the measurements that decided it are in docs/records/performance-runs.md.
--
-- The layout:
--   - `runs` is the partitioned parent. It has the listing and claim indexes (each
--     partition has its copy, named <partition>_<the parent's name less "runs">) but no
--     primary key: a unique index of a partitioned table must hold the partition key. Each
--     partition has its own primary key on run_id, and its own unique runs_overlap_running.
--     A run id is "<job>:<Unix seconds of nominal_at>" (timetable/runid.py) and every
--     partition bound is a whole second, so one run id always routes to one partition and
--     that partition's key keeps it unique; the inserts name no conflict target
--     (queries/tick.sql, insert_runs) so its index arbitrates.
--   - runs_pYYYYMMDD: one UTC day, made ahead by the maintenance leader
--     (crondepot_runs_partitions_ahead, below) and dropped whole once retention has passed
--     its last instant (crondepot_runs_retire; its kept rows move to the default first).
--   - runs_default: whatever no day holds: the runs written before the first day partition
--     was made, a backfill of a day already dropped. Pruned row by row, as before.
--   - runs_history (only on a database converted by `crondepot db partition-runs`): the
--     table as it was, attached whole for every nominal time before the conversion's
--     switch, behind a validated CHECK so that the attach reads nothing.
--
-- A fresh database (no run and no job) is partitioned here. A database with runs is left as
-- it is: the previous release, rolling beside this one, writes ON CONFLICT (run_id), which
-- a partitioned runs refuses; `crondepot db partition-runs` converts it online once every
-- process runs this release (docs/operations.md, "Upgrading").

-- A partition's own objects: its primary key and overlap guard (the parent can have
-- neither), its copies of the parent's indexes renamed after it, its extended statistics,
-- and row-level security with the parent's policy (a query of the parent is checked by the
-- parent's policy alone; one naming the partition is checked by its own).
CREATE FUNCTION crondepot_runs_partition_own(p_part regclass) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    part text := (SELECT c.relname FROM pg_class AS c WHERE c.oid = p_part);
    ix   record;
BEGIN
    FOR ix IN SELECT c.relname AS child, pc.relname AS parent
              FROM pg_index AS x
              JOIN pg_class AS c ON c.oid = x.indexrelid
              JOIN pg_inherits AS i ON i.inhrelid = x.indexrelid
              JOIN pg_class AS pc ON pc.oid = i.inhparent
              WHERE x.indrelid = p_part
    LOOP
        IF ix.child <> part || substr(ix.parent, 5) THEN
            EXECUTE format('ALTER INDEX %I RENAME TO %I', ix.child, part || substr(ix.parent, 5));
        END IF;
    END LOOP;
    EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I PRIMARY KEY (run_id)', p_part,
                   part || '_pkey');
    EXECUTE format('CREATE UNIQUE INDEX %I ON %s (job_id) '
                   'WHERE status = ''running'' AND overlap <> ''allow''',
                   part || '_overlap_running', p_part);
    EXECUTE format('CREATE STATISTICS %I ON (coalesce(finished_at, due_at)) FROM %s',
                   part || '_ended', p_part);
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', p_part);
    EXECUTE format($p$CREATE POLICY tenant_rows ON %s USING (
        (SELECT current_setting('crondepot.tenant_id', true) = 'all')
        OR tenant_id = (SELECT NULLIF(NULLIF(current_setting('crondepot.tenant_id', true),
                                             'all'), '')::bigint))$p$, p_part);
END
$$;

-- The layout change itself, in the caller's transaction. p_history_until NULL: `runs` is
-- empty and is replaced. Otherwise `runs` becomes runs_history, attached for nominal times
-- before p_history_until; it must already hold the validated CHECK runs_history_until
-- (nominal_at < p_history_until), or the attach reads the whole table under its lock.
-- The parent gets what the table had, read from the catalog before the rename, so that
-- nothing here repeats a definition of another file: its non-unique indexes (which then
-- adopt the history's own, renamed, of the same definition: nothing is built), its
-- triggers (the row triggers then reach every partition) and its extended statistics.
CREATE FUNCTION crondepot_runs_partition(p_history_until timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    ddl   text[];
    names text[];
    one   text;
BEGIN
    IF (SELECT c.relkind FROM pg_class AS c WHERE c.oid = 'runs'::regclass) = 'p' THEN
        RETURN;
    END IF;
    ddl := ARRAY(SELECT pg_get_indexdef(x.indexrelid) FROM pg_index AS x
                 WHERE x.indrelid = 'runs'::regclass AND NOT x.indisunique
                 UNION ALL
                 SELECT pg_get_triggerdef(g.oid) FROM pg_trigger AS g
                 WHERE g.tgrelid = 'runs'::regclass AND NOT g.tgisinternal
                 UNION ALL
                 SELECT pg_get_statisticsobjdef(s.oid) FROM pg_statistic_ext AS s
                 WHERE s.stxrelid = 'runs'::regclass);
    FOR one IN SELECT g.tgname FROM pg_trigger AS g
               WHERE g.tgrelid = 'runs'::regclass AND NOT g.tgisinternal
    LOOP
        EXECUTE format('DROP TRIGGER %I ON runs', one);
    END LOOP;
    names := ARRAY(SELECT c.relname FROM pg_index AS x JOIN pg_class AS c
                   ON c.oid = x.indexrelid WHERE x.indrelid = 'runs'::regclass
                   UNION ALL
                   SELECT s.stxname FROM pg_statistic_ext AS s
                   WHERE s.stxrelid = 'runs'::regclass);
    ALTER TABLE runs RENAME TO runs_history;
    FOREACH one IN ARRAY names LOOP
        IF to_regclass(one) IS NOT NULL THEN
            EXECUTE format('ALTER INDEX %I RENAME TO %I', one, 'runs_history' || substr(one, 5));
        ELSE
            EXECUTE format('ALTER STATISTICS %I RENAME TO %I', one,
                           'runs_history' || substr(one, 5));
        END IF;
    END LOOP;
    -- run_attempts' policy names the table, not its name: it followed the rename.
    DROP POLICY tenant_rows ON run_attempts;

    CREATE TABLE runs (LIKE runs_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
        PARTITION BY RANGE (nominal_at);
    ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_history_until;
    ALTER TABLE runs ENABLE ROW LEVEL SECURITY;
    CREATE POLICY tenant_rows ON runs USING (
        (SELECT current_setting('crondepot.tenant_id', true) = 'all')
        OR tenant_id = (SELECT NULLIF(NULLIF(current_setting('crondepot.tenant_id', true),
                                             'all'), '')::bigint));
    CREATE POLICY tenant_rows ON run_attempts USING (
        (SELECT current_setting('crondepot.tenant_id', true) = 'all')
        OR EXISTS (SELECT FROM runs AS r WHERE r.run_id = run_attempts.run_id));
    IF p_history_until IS NULL THEN
        DROP TABLE runs_history;
    ELSE
        EXECUTE format('ALTER TABLE runs ATTACH PARTITION runs_history '
                       'FOR VALUES FROM (MINVALUE) TO (%L)', p_history_until);
    END IF;
    FOREACH one IN ARRAY ddl LOOP
        EXECUTE one;
    END LOOP;
    CREATE TABLE runs_default PARTITION OF runs DEFAULT;
    PERFORM crondepot_runs_partition_own('runs_default'::regclass);
END
$$;

-- The partitions of runs but the default, with their bounds (lo '-infinity' for the history
-- partition's MINVALUE), read from the catalog; none while runs is one table.
CREATE FUNCTION crondepot_runs_partitions()
RETURNS TABLE (name text, lo timestamptz, hi timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text,
           CASE WHEN m[1] = 'MINVALUE' THEN '-infinity'::timestamptz
                ELSE btrim(m[1], '''')::timestamptz END,
           btrim(m[2], '''')::timestamptz
    FROM pg_inherits AS i
    JOIN pg_class AS c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                    'FROM \((.*)\) TO \((.*)\)') AS m
    WHERE i.inhparent = to_regclass('runs') AND m IS NOT NULL
$$;

-- Day partitions made ahead: one per UTC day from p_now's day to p_days later, each that does
-- not exist yet; returns the names made. SECURITY DEFINER: the runtime role may not create
-- tables; this is all it may do with its owner's right. (Its search_path, FROM CURRENT, is
-- the one the migration runner sets safe: queries/migrations.sql, safe_search_path.) A day
-- is passed over, not made, when another partition covers part of it (the history
-- partition's last days after a conversion), when the default already holds runs of it
-- (they stay there: the default keeps what no day holds), or when the lock is not granted
-- within the caller's lock_timeout (the parent's lock for a moment: the next turn tries
-- again).
CREATE FUNCTION crondepot_runs_partitions_ahead(p_now timestamptz, p_days integer)
RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    first date := (p_now AT TIME ZONE 'UTC')::date;
    day   date;
    part  text;
BEGIN
    IF (SELECT c.relkind FROM pg_class AS c WHERE c.oid = 'runs'::regclass) <> 'p' THEN
        RETURN;
    END IF;
    FOR i IN 0 .. p_days LOOP
        day := first + i;
        part := 'runs_p' || to_char(day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass(part) IS NOT NULL;
        BEGIN
            EXECUTE format('CREATE TABLE %I PARTITION OF runs FOR VALUES FROM (%L) TO (%L)',
                           part, day::timestamp AT TIME ZONE 'UTC',
                           (day + 1)::timestamp AT TIME ZONE 'UTC');
            PERFORM crondepot_runs_partition_own(part::regclass);
            RETURN NEXT part;
        EXCEPTION
            WHEN invalid_object_definition OR check_violation OR lock_not_available
                 OR duplicate_table THEN       -- (the last: another leader made it now)
                NULL;
        END;
    END LOOP;
END
$$;

-- Retention by partition: p_part (a day or the history partition) goes whole once its last
-- instant is before p_cutoff, the pruner's cut-off. A run in it that the row pruner would
-- keep (queries/retention.sql, prune_finished_runs: not finished, or dead, or created at or
-- after the cut-off: a late or backfilled run) is moved to the default partition first;
-- the earlier attempts of the others go with them. In the caller's transaction, whose
-- lock_timeout bounds the wait for the parent's lock (DETACH takes it; while it waits,
-- every query of runs waits behind it). Returns the runs moved and the partition's estimated
-- size (reltuples: a count would read it all under that lock).
CREATE FUNCTION crondepot_runs_retire(p_part text, p_cutoff timestamptz,
                                      OUT moved bigint, OUT size bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    upper timestamptz := (SELECT p.hi FROM crondepot_runs_partitions() AS p
                          WHERE p.name = p_part);
    -- The row pruner's own condition (queries/retention.sql, prune_finished_runs), once.
    prunable constant text := format(
        'r.created_at < %L AND r.status IN '
        '(''succeeded'', ''failed'', ''skipped'', ''cancelled'')', p_cutoff);
BEGIN
    IF upper IS NULL AND to_regclass(p_part) IS NULL THEN
        moved := 0;                 -- retired already, by another leader a moment ago
        size := 0;
        RETURN;
    END IF;
    IF upper IS NULL OR upper > p_cutoff THEN
        RAISE EXCEPTION 'runs partition % does not end before the cut-off %', p_part, p_cutoff
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    size := (SELECT greatest(c.reltuples, 0)::bigint FROM pg_class AS c
             WHERE c.oid = p_part::regclass);
    EXECUTE format('DELETE FROM run_attempts AS a USING %I AS r WHERE a.run_id = r.run_id '
                   'AND %s', p_part, prunable);
    EXECUTE format('ALTER TABLE runs DETACH PARTITION %I', p_part);
    EXECUTE format('INSERT INTO runs SELECT * FROM %I AS r WHERE NOT (%s)', p_part, prunable);
    GET DIAGNOSTICS moved = ROW_COUNT;
    EXECUTE format('DROP TABLE %I', p_part);
END
$$;

-- The conversion's first step (`crondepot db partition-runs`, runs/partitions.py): a CHECK
-- that every run of the present table is before p_until, NOT VALID (its lock is a moment;
-- new rows are held to it from here on), to be validated by its own transaction (which
-- reads the table but lets writes through) before crondepot_runs_partition(p_until).
CREATE FUNCTION crondepot_runs_history_mark(p_until timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE runs ADD CONSTRAINT runs_history_until '
                   'CHECK (nominal_at < %L) NOT VALID', p_until);
END
$$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM runs) AND NOT EXISTS (SELECT FROM jobs) THEN
        PERFORM crondepot_runs_partition(NULL);
    END IF;
END
$$;
