-- Schedules as code (job/apply.py): an apply is audited as one summary entry, job.apply,
-- with its counts, next to the row entries the jobs trigger writes. The summary function
-- (migration 0020) writes only the actions it names: job.apply joins them. Nothing else
-- changes.
CREATE OR REPLACE FUNCTION crondepot_audit_summary(p_tenant_id bigint, p_action text,
                                                   p_subject text, p_after jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF p_action !~ '^(job\.bulk_(pause|resume|cancel)|job\.backfill|job\.apply|(rate_limit|host)\.(pause|resume))$'
    THEN
        RAISE EXCEPTION 'crondepot_audit_summary: % is not a summary action', p_action
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO audit_log (tenant_id, actor, action, subject, after)
    VALUES (p_tenant_id, crondepot_audit_actor(), p_action, p_subject, p_after);
END $$;
