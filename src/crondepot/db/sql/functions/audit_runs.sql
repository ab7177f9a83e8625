-- revision: 2
-- crondepot_audit_runs and crondepot_audit_runs_inserted: the runs table's audit triggers,
-- which this file creates (migration 0003 made the first). Runs are audited only for
-- sessions that name an actor (crondepot.actor: the API per request, the CLI per command):
-- schedulers and workers write runs by the thousand a second and name none, so their
-- claims, outcomes and ticks are not audited, and a session of the runtime role that names
-- no actor may insert or update runs without an entry (migration 0020 and docs/operations.md,
-- "Audit", say so). For a session that does:
-- * a replay of a dead run, a retry of a failed one (`runs retry`) and a cancel are each
--   one entry;
-- * an insert statement is, per tenant, 'job.trigger' with the run when it wrote one run (a
--   manual trigger), else one 'run.bulk_create' with the count and the jobs (a backfill, the
--   owed fires a bulk pause settles), instead of one entry per run.
-- SECURITY DEFINER, owned by the owner, with a fixed search_path: see audit_jobs.sql.
SELECT set_config('search_path', format('%I, pg_catalog, pg_temp', current_schema()), true);

CREATE OR REPLACE FUNCTION crondepot_audit_runs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    action text;
BEGIN
    IF OLD.status = 'dead' AND NEW.status = 'queued' THEN
        action := 'run.replay';
    ELSIF OLD.status = 'failed' AND NEW.status = 'queued' THEN
        action := 'run.retry';
    ELSIF NEW.status = 'cancelled' AND OLD.status <> 'cancelled' THEN
        action := 'run.cancel';
    ELSE
        RETURN NULL;
    END IF;
    INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
    VALUES (NEW.tenant_id, crondepot_audit_actor(), action, NEW.run_id,
            jsonb_build_object('status', OLD.status, 'attempt', OLD.attempt,
                               'last_error', OLD.last_error),
            jsonb_build_object('status', NEW.status, 'attempt', NEW.attempt));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION crondepot_audit_runs_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO audit_log (tenant_id, actor, action, subject, after)
    SELECT n.tenant_id, crondepot_audit_actor(),
           CASE WHEN n.runs = 1 THEN 'job.trigger' ELSE 'run.bulk_create' END,
           CASE WHEN n.runs = 1 THEN n.first_run
                WHEN n.first_job = n.last_job THEN n.first_job::text
                ELSE 'jobs ' || n.first_job || '..' || n.last_job END,
           CASE WHEN n.runs = 1
                THEN jsonb_build_object('status', n.first_status, 'attempt', 0)
                ELSE jsonb_build_object('count', n.runs, 'jobs', n.jobs) END
    FROM (SELECT tenant_id, count(*) AS runs, min(run_id) AS first_run,
                 min(status) AS first_status, min(job_id) AS first_job,
                 max(job_id) AS last_job,
                 jsonb_agg(DISTINCT job_id) AS jobs
          FROM audited_new_runs GROUP BY tenant_id) AS n
    ORDER BY n.tenant_id;
    RETURN NULL;
END $$;

-- The row-level trigger of 0003 took inserts too; now they are the statement's. The
-- statement-level WHEN is checked before the function is entered, so a tick pays for the
-- transition table's rows only.
CREATE OR REPLACE TRIGGER runs_audit AFTER UPDATE OF status ON runs FOR EACH ROW
    WHEN (coalesce(current_setting('crondepot.actor', true), '') <> '')
    EXECUTE FUNCTION crondepot_audit_runs();
CREATE OR REPLACE TRIGGER runs_audit_inserted AFTER INSERT ON runs
    REFERENCING NEW TABLE AS audited_new_runs
    FOR EACH STATEMENT
    WHEN (coalesce(current_setting('crondepot.actor', true), '') <> '')
    EXECUTE FUNCTION crondepot_audit_runs_inserted();
