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

-- `runs retry` queues a *failed* run again (a dead one is a replay, as before): audited as
-- run.retry, like every other change an operator makes to a run.
CREATE OR REPLACE FUNCTION crondepot_audit_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    action text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        action := 'job.trigger';
    ELSIF OLD.status = 'dead' AND NEW.status = 'queued' THEN
        action := 'run.replay';
    ELSIF OLD.status = 'failed' AND NEW.status = 'queued' THEN
        action := 'run.retry';
    ELSIF NEW.status = 'cancelled' AND OLD.status <> 'cancelled' THEN
        action := 'run.cancel';
    ELSE
        RETURN NULL;
    END IF;
    INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
    VALUES (NEW.tenant_id, current_setting('crondepot.actor'), action, NEW.run_id,
            CASE WHEN TG_OP = 'UPDATE' THEN jsonb_build_object(
                'status', OLD.status, 'attempt', OLD.attempt, 'last_error', OLD.last_error) END,
            jsonb_build_object('status', NEW.status, 'attempt', NEW.attempt));
    RETURN NULL;
END $$;
