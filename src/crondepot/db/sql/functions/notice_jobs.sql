-- revision: 1
-- crondepot_notice_jobs: the job events of the outbox (notice_events, migration 0032), one
-- row per channel of the job's tenant, written in the transaction that changed the job
-- (docs/notices.md), whichever statement did:
-- * 'job_unhealthy': its failed fires in a row (jobs.failing_fires, kept by the outcome
--   statements) reach its alert threshold (the job's alert_after_failures, else its
--   tenant's: job/health.py's rule). Only the crossing counts: the fires after it, until a
--   success resets the count, are no new event.
-- * 'job_ended': the job ended by itself because of max_runs or end_at (ended_reason set;
--   an `at` job's 'completed' is its ordinary end and no event).
-- Each trigger is declared on its columns and filtered by WHEN: the tick, which moves
-- next_run_at of thousands of jobs, and a success, which only ever lowers failing_fires,
-- never enter the function. SECURITY DEFINER: see notice_runs.sql.
SELECT set_config('search_path', format('%I, pg_catalog, pg_temp', current_schema()), true);

CREATE OR REPLACE FUNCTION crondepot_notice_jobs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    threshold integer;
    event_kind text;
    event_detail text;
BEGIN
    IF TG_NAME = 'jobs_notice_unhealthy' THEN
        threshold := coalesce(NEW.alert_after_failures,
                              (SELECT t.alert_after_failures FROM tenants AS t
                               WHERE t.id = NEW.tenant_id));
        IF threshold IS NULL OR OLD.failing_fires >= threshold
           OR NEW.failing_fires < threshold THEN
            RETURN NULL;
        END IF;
        event_kind := 'job_unhealthy';
        event_detail := format('job %s is unhealthy: %s failed fires in a row (alert after %s)',
                         NEW.id, NEW.failing_fires, threshold);
    ELSE
        event_kind := 'job_ended';
        event_detail := CASE NEW.ended_reason
            WHEN 'max_runs' THEN format('job %s ended: its max_runs (%s) reached', NEW.id,
                                        coalesce(NEW.max_runs::text, 'unset'))
            ELSE format('job %s ended: its end_at (%s) passed', NEW.id,
                        coalesce(NEW.end_at::text, 'unset')) END;
    END IF;
    INSERT INTO notice_events (tenant_id, channel_id, job_id, kind, detail)
    SELECT NEW.tenant_id, c.id, NEW.id, event_kind, event_detail
    FROM notice_channels AS c
    WHERE c.tenant_id = NEW.tenant_id;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_notice_unhealthy
    AFTER UPDATE OF failing_fires ON jobs FOR EACH ROW
    WHEN (NEW.failing_fires > OLD.failing_fires)
    EXECUTE FUNCTION crondepot_notice_jobs();
CREATE OR REPLACE TRIGGER jobs_notice_ended
    AFTER UPDATE OF ended_reason ON jobs FOR EACH ROW
    WHEN (OLD.ended_reason IS NULL AND NEW.ended_reason IN ('max_runs', 'end_at'))
    EXECUTE FUNCTION crondepot_notice_jobs();
