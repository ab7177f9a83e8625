-- The audit log: every job and dead-letter action taken through the API or the CLI — who,
-- which tenant, what, when, the row before and after. Written by triggers, so no code path
-- can forget it; only sessions that name an actor (crondepot.actor, set by the API per
-- request and by the CLI per command) are audited, so the scheduler's own bookkeeping
-- (advancing next_run_at) is not. Append-only: updates, deletes and truncation are refused.

CREATE TABLE audit_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    tenant_id  bigint NOT NULL,
    actor      text NOT NULL,
    action     text NOT NULL,
    subject    text NOT NULL,
    before     jsonb,
    after      jsonb
);
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at DESC);

CREATE FUNCTION crondepot_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP;
END $$;

CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION crondepot_audit_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION crondepot_audit_append_only();

-- Schedule bookkeeping columns are left out of before/after: they change on every run.
CREATE FUNCTION crondepot_audit_job_row(j jobs) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT to_jsonb(j) - 'next_run_at' - 'next_nominal_at' - 'updated_at'
$$;

CREATE FUNCTION crondepot_audit_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    action text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        action := 'job.create';
    ELSIF OLD.active AND NOT NEW.active THEN
        action := 'job.cancel';
    ELSIF NEW.paused AND NOT OLD.paused THEN
        action := 'job.pause';
    ELSIF OLD.paused AND NOT NEW.paused THEN
        action := 'job.resume';
    ELSIF NEW.version <> OLD.version THEN
        action := 'job.update';
    ELSE
        RETURN NULL;
    END IF;
    INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
    VALUES (NEW.tenant_id, current_setting('crondepot.actor'), action, NEW.id::text,
            CASE WHEN TG_OP = 'UPDATE' THEN crondepot_audit_job_row(OLD) END,
            crondepot_audit_job_row(NEW));
    RETURN NULL;
END $$;

CREATE FUNCTION crondepot_audit_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    action text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        action := 'job.trigger';
    ELSIF OLD.status = 'dead' AND NEW.status = 'queued' THEN
        action := 'run.replay';
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

-- The WHEN clause is checked without entering PL/pgSQL, so unaudited sessions (schedulers
-- writing thousands of rows a second) pay next to nothing. crondepot.audit_rows = 'off'
-- lets a bulk import write one summary entry instead of one per job.
CREATE TRIGGER jobs_audit AFTER INSERT OR UPDATE ON jobs FOR EACH ROW
    WHEN (coalesce(current_setting('crondepot.actor', true), '') <> ''
          AND coalesce(current_setting('crondepot.audit_rows', true), '') <> 'off')
    EXECUTE FUNCTION crondepot_audit_jobs();
CREATE TRIGGER runs_audit AFTER INSERT OR UPDATE OF status ON runs FOR EACH ROW
    WHEN (coalesce(current_setting('crondepot.actor', true), '') <> ''
          AND coalesce(current_setting('crondepot.audit_rows', true), '') <> 'off')
    EXECUTE FUNCTION crondepot_audit_runs();
