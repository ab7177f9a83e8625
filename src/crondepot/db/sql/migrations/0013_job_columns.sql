-- The job's columns named once (issue 16, "one definition of the job document"): the store's
-- reads and writes spelled the list out six times (four selects, two inserts, a staging
-- table and its COPY). Two simple views now hold them; queries name a view, not columns.
-- Both are plain projections of jobs: PostgreSQL inlines them (same plans, same indexes),
-- locks through them (SELECT … FOR UPDATE) and writes through them (INSERT … ON CONFLICT).

-- A job as the store reads it (job/store.py _stored): its document, its state, its times.
CREATE VIEW stored_jobs AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since
FROM jobs;

-- A new job, in the order create_jobs writes its values (job/store.py _COLUMNS, then the
-- creation instant): INSERT INTO job_inserts takes a row without a column list, and the
-- import's staging table is made from it (CREATE TABLE … AS … WITH NO DATA).
CREATE VIEW job_inserts AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority,
       active, target, payload, misfire_policy, misfire_seconds, misfire_until, catchup,
       max_catchup, spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit,
       created_at
FROM jobs;

-- A cron step wider than its field is refused from this version on (issue 16:
-- */999999999999999999999 was accepted and fired hourly). Such a step names one value: the
-- item's start (a, of a/N or a-b/N; the field's first value, of */N; H stays H). Crons
-- stored with one, in jobs and in the ledger's past timetables, are rewritten to that
-- value, which fires exactly as before, so the scheduler and `crondepot verify` can still
-- read them. Items are found as the cron parser splits them (blanks, then commas).
CREATE FUNCTION pg_temp.narrow_wide_steps(cron text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    spans constant integer[] := ARRAY[60, 24, 31, 12, 8];   -- high - low + 1 per field
    lows constant integer[] := ARRAY[0, 0, 1, 1, 0];
    fields text[];
    items text[];
    step text[];
    wide boolean;
    changed boolean := false;
BEGIN
    IF cron LIKE '@%' OR position('/' IN cron) = 0 THEN
        RETURN cron;
    END IF;
    fields := regexp_split_to_array(btrim(cron, E' \t\r\n\f\v'), E'[ \t\r\n\f\v]+');
    IF cardinality(fields) <> 5 THEN
        RETURN cron;
    END IF;
    FOR f IN 1..5 LOOP
        items := string_to_array(fields[f], ',');
        FOR i IN 1..cardinality(items) LOOP
            step := regexp_match(items[i], '^([^/]+)/0*([0-9]+)$');
            CONTINUE WHEN step IS NULL;
            wide := CASE WHEN length(step[2]) > 4 THEN true ELSE step[2]::integer > spans[f] END;
            CONTINUE WHEN NOT wide;
            items[i] := CASE WHEN step[1] = '*' THEN lows[f]::text
                             WHEN step[1] ~* '^h' THEN step[1]
                             ELSE split_part(step[1], '-', 1) END;
            changed := true;
        END LOOP;
        fields[f] := array_to_string(items, ',');
    END LOOP;
    RETURN CASE WHEN changed THEN array_to_string(fields, ' ') ELSE cron END;
END $$;

UPDATE jobs SET cron = pg_temp.narrow_wide_steps(cron)
WHERE cron <> pg_temp.narrow_wide_steps(cron);
UPDATE job_timetables SET cron = pg_temp.narrow_wide_steps(cron)
WHERE cron <> pg_temp.narrow_wide_steps(cron);
DROP FUNCTION pg_temp.narrow_wide_steps(text);
