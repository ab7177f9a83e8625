-- revision: 1
-- crondepot_audit_jobs and crondepot_audit_job_row: the jobs table's audit trigger (created
-- in migration 0003). A create, cancel, pause, resume or edit is one entry each; a job that
-- ends by its schedule inside an audited change (a pause that settles its last fire) is
-- 'job.end', not 'job.cancel'. The scheduler's bookkeeping columns (next_run_at,
-- next_nominal_at, fire_count) change with every fire and are left out of before/after.
CREATE OR REPLACE FUNCTION crondepot_audit_job_row(j jobs) RETURNS jsonb LANGUAGE sql
IMMUTABLE AS $$
    SELECT to_jsonb(j) - 'next_run_at' - 'next_nominal_at' - 'updated_at' - 'fire_count'
$$;

CREATE OR REPLACE FUNCTION crondepot_audit_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    action text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        action := 'job.create';
    ELSIF OLD.active AND NOT NEW.active THEN
        action := CASE WHEN NEW.ended_reason IS NOT NULL THEN 'job.end' ELSE 'job.cancel' END;
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
