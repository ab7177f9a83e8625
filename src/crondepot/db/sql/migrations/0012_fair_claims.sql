-- Fair claims (design §6 "Tenants", issue 15): within a priority, the claim shares its turns
-- across the tenants that have runs ready, in proportion to an operator-set weight, instead
-- of taking the oldest ready runs of any tenant (one tenant's 480 k runs due at 9:00 held
-- every other tenant's runs back until they had drained). functions/claim_runs.sql says how.

-- A tenant's share of each priority's claim turns, against the other tenants with runs
-- ready in that priority (`crondepot tenants set-weight NAME N`). 1 for every tenant unless
-- the operator says otherwise. A constant default: no table rewrite.
ALTER TABLE tenants ADD COLUMN claim_weight integer NOT NULL DEFAULT 1
    CHECK (claim_weight BETWEEN 1 AND 1000);

-- The queue index gains tenant_id between priority and available_at, so the claim can
-- (1) list the (priority, tenant) pairs with queued runs by hopping from one pair to the
-- next (a loose index scan: one index descent per pair, however many runs a pair has) and
-- (2) take a tenant's oldest ready runs with a range scan of its own.
-- It replaces (priority, available_at), whose only reader in the hot path was the claim;
-- the queue statistics (depth and oldest ready age per priority, whole or per tenant) read
-- the new one as well. Built under a new name, then renamed: the name stays.
-- It holds queued runs only (a few at rest), so the build is quick on any runs table.
CREATE INDEX runs_queued_fair ON runs (priority, tenant_id, available_at)
    WHERE status = 'queued';
DROP INDEX runs_queued;
ALTER INDEX runs_queued_fair RENAME TO runs_queued;

-- A weight change is an operator's decision about who gets the workers: audited like the
-- other changes made through the CLI (sessions that name an actor; migration 0003).
CREATE FUNCTION crondepot_audit_claim_weight() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
    VALUES (NEW.id, current_setting('crondepot.actor'), 'tenant.claim_weight', 'claim-weight',
            jsonb_build_object('claim_weight', OLD.claim_weight),
            jsonb_build_object('claim_weight', NEW.claim_weight));
    RETURN NULL;
END $$;

CREATE TRIGGER tenants_audit_claim_weight AFTER UPDATE OF claim_weight ON tenants
    FOR EACH ROW
    WHEN (OLD.claim_weight IS DISTINCT FROM NEW.claim_weight
          AND coalesce(current_setting('crondepot.actor', true), '') <> '')
    EXECUTE FUNCTION crondepot_audit_claim_weight();
