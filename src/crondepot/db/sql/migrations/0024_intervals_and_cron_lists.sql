-- Intervals ("every": "90s", "anchor": T) and several crons on one job ("cron": [a, b]).
--
-- The timetable stays in jobs.cron, as the one text every reader keys a timetable by: the
-- scheduler tick (and its memo), the ledger check's distinct (cron, tz) pairs, the history
-- of earlier timetables in job_timetables, backfill. For a list it is the expressions joined
-- by ' | ' ('0 9 * * 1-5 | 0 10 * * 6'); for an interval '@every 90s from <anchor, UTC>'.
-- So job_timetables, the ledger's queries and jobs_cron_or_at need no change, and a reader
-- of an earlier release meets a text its parser refuses (it puts the job off and its verify
-- lists the timetable as unreadable) instead of firing a list's first expression alone or
-- an interval never. The columns below hold the document's own shape, for the API's echo:
-- crons the list as given (jsonb: an array of arrays cannot travel through unnest in
-- insert_jobs), every_s the interval in seconds and anchor_at its anchor (the creation
-- instant, whole seconds, when none was given). Expand only: a previous release's writes
-- leave them null, which reads as a single cron.
ALTER TABLE jobs ADD COLUMN crons jsonb
                     CHECK (jsonb_typeof(crons) = 'array'
                            AND jsonb_array_length(crons) BETWEEN 1 AND 20),
                 ADD COLUMN every_s integer CHECK (every_s BETWEEN 1 AND 315360000),
                 ADD COLUMN anchor_at timestamptz,
                 ADD CONSTRAINT jobs_interval_text
                     CHECK ((every_s IS NULL) = (anchor_at IS NULL)
                            AND (every_s IS NULL OR starts_with(cron, '@every ')));

-- stored_jobs gains them last (migration 0023 made it).
CREATE OR REPLACE VIEW stored_jobs WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since,
       at, start_at, end_at, max_runs, fire_count, ended_at, ended_reason, labels,
       alert_after_failures, retry_base_s, retry_cap_s, pause_note, paused_at, paused_by,
       pause_after_failures, crons, every_s, anchor_at
FROM jobs;

-- job_writes_4: job_writes_3 (migration 0023) and the three, creation instant last. The
-- previous release goes on inserting through job_writes_3 (single crons only).
CREATE VIEW job_writes_4 WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority,
       active, target, payload, misfire_policy, misfire_seconds, misfire_until, catchup,
       max_catchup, spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit,
       at, start_at, end_at, max_runs, labels, alert_after_failures, retry_base_s,
       retry_cap_s, pause_after_failures, crons, every_s, anchor_at, created_at
FROM jobs;
