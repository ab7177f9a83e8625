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
-- */999999999999999999999 was accepted and fired hourly). Such a step names one value (the
-- item's start), and so does the field's widest step: each is lowered to the field's range
-- (*/90 -> */60 in minutes, 2/30 -> 2/24 in hours, H/99 -> H/60), which names the same
-- values and keeps the '/' that CronSpec.fixed_time reads in the hour field (the DST rules
-- depend on it). Crons stored with one, in jobs and in the ledger's past timetables, are
-- rewritten so the scheduler and `crondepot verify` can still read them; a rewritten job's
-- version moves on (its ETag changes) and the change is audited as the migration's.
-- Fields are found as the cron parser finds them: Python's str.strip() (the ASCII part of
-- its whitespace here), then split at runs of [ \t\r\n\f\v], then at commas. The regex
-- is a plain string so that the regex engine reads \v (an E'' string has no \v: it would
-- be the letter v), and the trim set spells vertical tab as chr(11) for the same reason.
CREATE FUNCTION pg_temp.narrow_wide_steps(cron text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    spans constant integer[] := ARRAY[60, 24, 31, 12, 8];   -- high - low + 1 per field
    blanks constant text := ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)
                            || chr(28) || chr(29) || chr(30) || chr(31);
    fields text[];
    items text[];
    step text[];
    wide boolean;
    changed boolean := false;
BEGIN
    IF position('/' IN cron) = 0 OR ltrim(cron, blanks) LIKE '@%' THEN
        RETURN cron;
    END IF;
    fields := regexp_split_to_array(btrim(cron, blanks), '[ \t\r\n\f\v]+');
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
            items[i] := step[1] || '/' || spans[f];
            changed := true;
        END LOOP;
        fields[f] := array_to_string(items, ',');
    END LOOP;
    RETURN CASE WHEN changed THEN array_to_string(fields, ' ') ELSE cron END;
END $$;

SELECT set_config('crondepot.actor', 'migration 0013', true);
UPDATE jobs SET cron = pg_temp.narrow_wide_steps(cron), version = version + 1, updated_at = now()
WHERE cron <> pg_temp.narrow_wide_steps(cron);
SELECT set_config('crondepot.actor', '', true);
UPDATE job_timetables SET cron = pg_temp.narrow_wide_steps(cron)
WHERE cron <> pg_temp.narrow_wide_steps(cron);
DROP FUNCTION pg_temp.narrow_wide_steps(text);
