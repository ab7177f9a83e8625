-- Issue 17 item 3: labels on jobs (filters, bulk actions) and holds on a rate limit or a
-- target host.

-- Labels: a flat object of string -> string, validated by job/spec.py (fields.LABELS). The
-- GIN index (jsonb_path_ops: containment only, smaller and faster than the default opclass)
-- serves `labels @> '{"bank": "42"}'`, the one operator the filters use.
ALTER TABLE jobs ADD COLUMN labels jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT jobs_labels_check CHECK (jsonb_typeof(labels) = 'object');
CREATE INDEX jobs_labels ON jobs USING gin (labels jsonb_path_ops);

-- stored_jobs (migrations 0013, 0015) gains the column; the inserts' view with it is
-- job_writes (migration 0017). A later migration that changes stored_jobs must list it too.
DROP VIEW stored_jobs;
CREATE VIEW stored_jobs AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since,
       at, start_at, end_at, max_runs, fire_count, ended_at, ended_reason, labels
FROM jobs;

-- Holds: a tenant's queued runs of one rate limit (kind 'rate_limit') or one target host
-- (kind 'host') are not claimed while a row names them; jobs are not touched, so the
-- scheduler keeps writing their fires and nothing is owed when the hold ends. The claim
-- (functions/claim_runs.sql) reads this table once per call: while it is empty it costs
-- one index probe of an empty index.
CREATE TABLE holds (
    tenant_id  bigint NOT NULL REFERENCES tenants (id),
    kind       text NOT NULL CHECK (kind IN ('rate_limit', 'host')),
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 253),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_id, kind, name)
);
