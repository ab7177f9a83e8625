-- revision: 1
-- crondepot_audit_runs: the runs table's audit trigger (created in migration 0003): a
-- manual trigger, a replay of a dead run, a retry of a failed one (`runs retry`) and a
-- cancel are each one audit entry; claims and outcomes are not audited.
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
