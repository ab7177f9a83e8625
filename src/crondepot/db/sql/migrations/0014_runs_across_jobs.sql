-- Runs across jobs (issue 17, item 4): `crondepot runs list --status failed --since 1h`,
-- GET /v1/runs and the console's runs page list a tenant's runs of one state, newest
-- first by when they ended (a run that has not ended yet: by its due time), keyset-paged on
-- (that instant, run_id). This index serves exactly that order, and the finished-in-the-last-
-- hour counts of `crondepot status` (one range per tenant and outcome). It costs one more
-- index entry per run update (claims and outcomes are not HOT updates: status is indexed).
-- Built without CONCURRENTLY (migrations run in a transaction): it blocks writes to runs
-- while it is built, about a second per million runs.
CREATE INDEX runs_tenant_status_ended ON runs
    (tenant_id, status, (coalesce(finished_at, due_at)) DESC, run_id DESC);

-- The audit of `runs retry` (run.retry) lives in functions/audit_runs.sql.
