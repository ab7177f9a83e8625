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
