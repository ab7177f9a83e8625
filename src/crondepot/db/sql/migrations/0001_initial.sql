-- crondepot schema, version 1: tenants and their tokens, jobs, runs, rate limits.
-- Column names used in docs/design (jobs.next_run_at, jobs.active, runs.run_id, runs.job_id,
-- runs.status, runs.nominal_at, runs.due_at, runs.attempt) are a contract: tools outside
-- crondepot read them. Change them only with a new migration and a release note.

CREATE TABLE tenants (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text NOT NULL UNIQUE
                    CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    -- Webhook signing secret (Standard Webhooks, "whsec_" + base64). It has to be readable
    -- to sign, so it is a secret at rest like the database password; tokens are not.
    signing_secret  text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- sha256 of the token. The token itself is shown once and never stored.
    token_hash  bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    role        text NOT NULL DEFAULT 'admin' CHECK (role IN ('admin', 'read')),
    label       text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE TABLE jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id        bigint NOT NULL REFERENCES tenants (id),
    -- Client key: creating the same key again returns the same job (idempotent create).
    -- NULLs are distinct, so jobs without a key never clash.
    key              text CHECK (length(key) BETWEEN 1 AND 200),
    cron             text NOT NULL,
    tz               text NOT NULL,
    -- Due time (nominal + spread offset) of the next run, and that run's nominal time,
    -- which its run id is made from. NULL when the timetable has no further fire.
    next_run_at      timestamptz,
    next_nominal_at  timestamptz,
    priority         text NOT NULL DEFAULT 'normal'
                     CHECK (priority IN ('urgent', 'normal', 'bulk')),
    active           boolean NOT NULL DEFAULT true,   -- false once cancelled
    paused           boolean NOT NULL DEFAULT false,
    target           jsonb NOT NULL,
    payload          jsonb NOT NULL DEFAULT '{}'::jsonb
                     CHECK (octet_length(payload::text) <= 16384),
    misfire_policy   text NOT NULL DEFAULT 'run_late'
                     CHECK (misfire_policy IN ('run_late', 'skip_after', 'skip_after_local_time')),
    misfire_seconds  integer CHECK (misfire_seconds > 0),
    misfire_until    time,
    catchup          text NOT NULL DEFAULT 'all' CHECK (catchup IN ('all', 'latest')),
    max_catchup      integer NOT NULL DEFAULT 1000 CHECK (max_catchup BETWEEN 1 AND 100000),
    spread_seconds   integer NOT NULL DEFAULT 0 CHECK (spread_seconds BETWEEN 0 AND 86400),
    spread_key       text,
    max_attempts     integer NOT NULL DEFAULT 6 CHECK (max_attempts BETWEEN 1 AND 100),
    lease_seconds    integer NOT NULL DEFAULT 60 CHECK (lease_seconds BETWEEN 5 AND 43200),
    rate_limit       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    cancelled_at     timestamptz,
    version          integer NOT NULL DEFAULT 1,
    UNIQUE (tenant_id, key),
    CHECK (misfire_policy <> 'skip_after' OR misfire_seconds IS NOT NULL),
    CHECK (misfire_policy <> 'skip_after_local_time' OR misfire_until IS NOT NULL),
    CHECK ((next_run_at IS NULL) = (next_nominal_at IS NULL))
);

-- The due query reads only this index. Cancelled and paused jobs are not in it, so
-- finished jobs cost the scheduler nothing however many there are.
CREATE INDEX jobs_due ON jobs (next_run_at) WHERE active AND NOT paused;

CREATE TABLE runs (
    -- "{job_id}:{unix seconds of nominal_at}": the same run always gets the same id.
    run_id            text PRIMARY KEY,
    -- No foreign key to jobs: jobs are never deleted (cancel keeps history), and the
    -- check would cost an index probe per run on the scheduler's hot path.
    job_id            bigint NOT NULL,
    tenant_id         bigint NOT NULL,
    priority          text NOT NULL CHECK (priority IN ('urgent', 'normal', 'bulk')),
    nominal_at        timestamptz NOT NULL,
    due_at            timestamptz NOT NULL,
    status            text NOT NULL DEFAULT 'queued'
                      CHECK (status IN ('queued', 'running', 'succeeded', 'failed',
                                        'dead', 'skipped', 'cancelled')),
    attempt           integer NOT NULL DEFAULT 0,
    -- When a queued run may be claimed: due_at at first, the retry time after a failure.
    available_at      timestamptz NOT NULL,
    lease_owner       text,
    lease_token       uuid,
    lease_expires_at  timestamptz,
    first_claimed_at  timestamptz,
    started_at        timestamptz,
    finished_at       timestamptz,
    skip_reason       text,
    last_error        text,
    error_class       text,
    result            jsonb,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CHECK (status <> 'running' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- Workers claim queued runs of one priority, oldest first: an index range scan per priority.
CREATE INDEX runs_queued ON runs (priority, available_at) WHERE status = 'queued';
-- Expired leases are found without scanning finished runs.
CREATE INDEX runs_running ON runs (lease_expires_at) WHERE status = 'running';
-- A job's history, newest first.
CREATE INDEX runs_job ON runs (job_id, nominal_at DESC);
-- The dead letter, by when runs died.
CREATE INDEX runs_dead ON runs (tenant_id, finished_at) WHERE status = 'dead';
-- Retention prunes by age: a BRIN index stays a few pages whatever the table's size.
CREATE INDEX runs_created_brin ON runs USING brin (created_at);

CREATE TABLE rate_limits (
    name            text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    rate_per_second double precision NOT NULL CHECK (rate_per_second > 0),
    burst           integer NOT NULL CHECK (burst >= 1),
    tokens          double precision NOT NULL,
    refilled_at     timestamptz NOT NULL DEFAULT now()
);
