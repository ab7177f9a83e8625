-- revision: 1
-- crondepot_notice_runs: a run that enters the dead letter (status 'dead', from any
-- statement: the worker's last attempt or unknown outcome, the lease cap, the reaper) is an
-- event of the outbox (notice_events, migration 0032), one row per channel of its tenant,
-- written in the transaction that made it dead (docs/notices.md). A tenant without a
-- channel gets no row. The WHEN clause keeps every other update of runs (claims,
-- successes, retries, thousands a second) out of the function.
-- SECURITY DEFINER, owned by the owner: the outbox is written whatever tenant the session
-- names; the search_path is fixed and ends in pg_temp (as audit_jobs.sql).
SELECT set_config('search_path', format('%I, pg_catalog, pg_temp', current_schema()), true);

CREATE OR REPLACE FUNCTION crondepot_notice_runs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO notice_events (tenant_id, channel_id, job_id, kind, run_id, detail)
    SELECT NEW.tenant_id, c.id, NEW.job_id, 'run_dead', NEW.run_id,
           format('run %s dead-lettered after %s attempt(s): %s', NEW.run_id, NEW.attempt,
                  left(coalesce(NEW.last_error, 'no error recorded'), 500))
    FROM notice_channels AS c
    WHERE c.tenant_id = NEW.tenant_id;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER runs_notice_dead
    AFTER UPDATE OF status ON runs FOR EACH ROW
    WHEN (NEW.status = 'dead' AND OLD.status IS DISTINCT FROM 'dead')
    EXECUTE FUNCTION crondepot_notice_runs();
