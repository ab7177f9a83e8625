-- revision: 1
-- crondepot_count_jobs: keeps tenants.active_jobs and tenants.urgent_jobs (jobs not
-- cancelled, and those of them that are urgent) equal to what the jobs table holds, for the
-- quota checks (crondepot.quotas). This file is the function's one home, with its triggers;
-- `crondepot migrate` re-applies it whenever its text changes, and then recounts.
--
-- Why triggers: every path that writes a job (the API, the importer, the library's
-- create_jobs, a cancel, a PATCH of the priority) moves the counts without having to
-- remember to. Inserts are counted once per statement from the transition table (an import
-- writes 5,000 jobs a statement: one UPDATE of the tenant row, not 5,000). Updates are
-- counted per row, and only for rows whose active or priority changed: the trigger is
-- declared on those columns and filtered by WHEN, so the scheduler's tick, which moves
-- next_run_at of thousands of jobs, never enters it.
CREATE OR REPLACE FUNCTION crondepot_count_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_LEVEL = 'ROW' THEN
        UPDATE tenants
        SET active_jobs = active_jobs + (NEW.active::int - OLD.active::int),
            urgent_jobs = urgent_jobs
                          + ((NEW.active AND NEW.priority = 'urgent')::int
                             - (OLD.active AND OLD.priority = 'urgent')::int)
        WHERE id = NEW.tenant_id;
    ELSIF TG_OP = 'INSERT' THEN
        UPDATE tenants AS t
        SET active_jobs = t.active_jobs + n.jobs, urgent_jobs = t.urgent_jobs + n.urgent
        FROM (SELECT tenant_id, count(*) AS jobs,
                     count(*) FILTER (WHERE priority = 'urgent') AS urgent
              FROM inserted_jobs WHERE active GROUP BY tenant_id) AS n
        WHERE t.id = n.tenant_id;
    ELSE    -- DELETE: jobs are never deleted by crondepot, but a count must not drift
        UPDATE tenants AS t
        SET active_jobs = t.active_jobs - n.jobs, urgent_jobs = t.urgent_jobs - n.urgent
        FROM (SELECT tenant_id, count(*) AS jobs,
                     count(*) FILTER (WHERE priority = 'urgent') AS urgent
              FROM deleted_jobs WHERE active GROUP BY tenant_id) AS n
        WHERE t.id = n.tenant_id;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_count_inserted AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS inserted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION crondepot_count_jobs();
CREATE OR REPLACE TRIGGER jobs_count_deleted AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS deleted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION crondepot_count_jobs();
CREATE OR REPLACE TRIGGER jobs_count_changed AFTER UPDATE OF active, priority ON jobs
    FOR EACH ROW
    WHEN (OLD.active IS DISTINCT FROM NEW.active OR OLD.priority IS DISTINCT FROM NEW.priority)
    EXECUTE FUNCTION crondepot_count_jobs();

-- The counts from scratch, with the triggers in place and writers of jobs held off (SHARE
-- ROW EXCLUSIVE lets reads through), so no job is counted twice or missed.
LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE;
UPDATE tenants AS t
SET active_jobs = coalesce(n.jobs, 0), urgent_jobs = coalesce(n.urgent, 0)
FROM tenants AS x
LEFT JOIN (SELECT tenant_id, count(*) AS jobs,
                  count(*) FILTER (WHERE priority = 'urgent') AS urgent
           FROM jobs WHERE active GROUP BY tenant_id) AS n ON n.tenant_id = x.id
WHERE t.id = x.id;
