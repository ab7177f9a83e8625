-- What a tenant may use and how much of it (design §6 "Tenants"): the Python handlers and
-- the rate-limit buckets granted to it, the buckets it owns, and the operator's caps on its
-- jobs. A job naming a handler or a limit its tenant may not use is refused when it is
-- written (crondepot.grants), and a worker refuses a run whose grant went away since.

-- A grant declares a handler name to the API, which cannot see the workers' code. The name
-- rule is the job document's (job/spec.py, _HANDLER).
CREATE TABLE handler_grants (
    tenant_id   bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    handler     text NOT NULL CHECK (handler ~ '^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$'),
    granted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, handler)
);

-- A shared bucket granted to a tenant. Only existing buckets can be granted (the foreign
-- key), so "granted" implies "exists".
CREATE TABLE limit_grants (
    tenant_id   bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    limit_name  text NOT NULL REFERENCES rate_limits (name) ON DELETE CASCADE,
    granted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, limit_name)
);

-- The tenant that made the bucket with PUT /v1/limits/{name}, which alone may use and change
-- it (no grant needed); NULL for a shared bucket, made by the operator (`crondepot limits
-- set`) and used by the tenants it is granted to.
ALTER TABLE rate_limits ADD COLUMN tenant_id bigint REFERENCES tenants (id) ON DELETE CASCADE;

-- The operator's caps (NULL: no cap) and the counts they are checked against. The counts
-- are kept by triggers (functions/job_counts.sql) on every insert, cancel and priority
-- change, so a quota check reads one row instead of counting a tenant's jobs (millions, for
-- a bulk importer): admission locks this row, reads the counts, and the insert's trigger
-- moves them in the same transaction, so two concurrent creates cannot both take the last
-- slot. They start at 0; the definition recounts them when it is applied.
ALTER TABLE tenants
    ADD COLUMN max_jobs         integer CHECK (max_jobs >= 0),
    ADD COLUMN max_urgent_jobs  integer CHECK (max_urgent_jobs >= 0),
    ADD COLUMN urgent_allowed   boolean NOT NULL DEFAULT true,
    ADD COLUMN active_jobs      bigint NOT NULL DEFAULT 0,
    ADD COLUMN urgent_jobs      bigint NOT NULL DEFAULT 0;
