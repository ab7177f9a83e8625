-- An audit trail the runtime role cannot bypass (issue 30, item 2a). Until now the audit
-- triggers wrote only for sessions that named an actor (crondepot.actor) and had not set
-- crondepot.audit_rows = 'off', and the runtime role sets both: as that role a token could be
-- minted for another tenant, or a job's payload rewritten, with the log unchanged; and since
-- the triggers ran as the session's role, that role held INSERT on audit_log and could add
-- entries under any actor name.
--
-- From this migration on:
-- * Every write to jobs, api_tokens, handler_grants, limit_grants and tenants (the signing
--   secrets are tenants' columns) is recorded, whatever the session's settings. A session
--   that names no actor is recorded as 'role:<session_user>'. crondepot.audit_rows is
--   gone: no setting turns auditing off.
-- * Only bookkeeping is left out, column by column: a job's next_run_at, next_nominal_at,
--   fire_count and updated_at (the tick moves them) and failing_fires (the workers' outcomes),
--   a token's last_used_at (the lookup),
--   a tenant's active_jobs and urgent_jobs (the quota counts, functions/job_counts.sql).
--   An update that changes nothing else writes no entry; one that changes anything else
--   does, whatever else it changes.
-- * The trigger functions are SECURITY DEFINER, owned by the owner, with a fixed
--   search_path that ends in pg_temp (the runtime role may create temporary tables; one
--   named audit_log must not catch the entries). The runtime role loses INSERT on audit_log
--   (queries/roles.sql): it reads the log, and adds to it only through the triggers and
--   crondepot_audit_summary, which writes the few summary actions the code writes itself.
-- * The jobs and runs triggers, whose functions live in functions/audit_jobs.sql and
--   functions/audit_runs.sql (revision 2), are replaced there. Runs stay audited only for
--   sessions that name an actor (a manual trigger, a replay, a retry, a cancel): the
--   schedulers and workers write runs by the thousand a second and name none. A bulk insert
--   of jobs (an import, a batch of create_jobs) is one 'job.bulk_create' entry per tenant
--   and statement, with the count and the ids, instead of an entry per job.
--
-- The search_path the functions below keep: this transaction's, made safe first.
SELECT set_config('search_path', format('%I, pg_catalog, pg_temp', current_schema()), true);

-- Who an entry is by: the session's named actor, or the database role it logged in as.
-- session_user, not current_user: inside a SECURITY DEFINER function current_user is the
-- owner, and SET ROLE does not change session_user. (This and the *_row helpers below have
-- no SET clause, which would keep PostgreSQL from inlining them into the WHEN clauses; they
-- read no table.)
CREATE FUNCTION crondepot_audit_actor() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('crondepot.actor', true), ''),
                    'role:' || session_user)
$$;

-- The one way the runtime role adds an entry itself: a summary the code writes next to the
-- rows it changed (a bulk action's batch, a backfill, a hold). Only those actions, so it
-- cannot write an entry that looks like a trigger's; the actor is crondepot_audit_actor().
CREATE FUNCTION crondepot_audit_summary(p_tenant_id bigint, p_action text, p_subject text,
                                        p_after jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF p_action !~ '^(job\.bulk_(pause|resume|cancel)|job\.backfill|(rate_limit|host)\.(pause|resume))$'
    THEN
        RAISE EXCEPTION 'crondepot_audit_summary: % is not a summary action', p_action
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO audit_log (tenant_id, actor, action, subject, after)
    VALUES (p_tenant_id, crondepot_audit_actor(), p_action, p_subject, p_after);
END $$;

-- Tokens: created, revoked, changed in any other way (its tenant, role, label, hash), or
-- deleted. Neither the token nor its hash is ever written to the log.
DROP TRIGGER api_tokens_audit_create ON api_tokens;
DROP TRIGGER api_tokens_audit_revoke ON api_tokens;
CREATE OR REPLACE FUNCTION crondepot_audit_tokens() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    row_ api_tokens := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    action text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        action := 'token.create';
    ELSIF TG_OP = 'DELETE' THEN
        action := 'token.delete';
    ELSIF OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL THEN
        action := 'token.revoke';
    ELSE
        action := 'token.update';
    END IF;
    INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
    VALUES (row_.tenant_id, crondepot_audit_actor(), action, 'token:' || row_.id,
            CASE WHEN TG_OP <> 'INSERT' THEN jsonb_build_object(
                'tenant_id', OLD.tenant_id, 'role', OLD.role, 'label', OLD.label,
                'revoked_at', OLD.revoked_at,
                'hash_changed', TG_OP = 'UPDATE' AND OLD.token_hash <> NEW.token_hash) END,
            CASE WHEN TG_OP <> 'DELETE' THEN jsonb_build_object(
                'tenant_id', NEW.tenant_id, 'role', NEW.role, 'label', NEW.label,
                'revoked_at', NEW.revoked_at) END);
    -- A token moved to another tenant is in both tenants' logs.
    IF TG_OP = 'UPDATE' AND OLD.tenant_id <> NEW.tenant_id THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
        VALUES (OLD.tenant_id, crondepot_audit_actor(), action, 'token:' || OLD.id,
                jsonb_build_object('tenant_id', OLD.tenant_id),
                jsonb_build_object('tenant_id', NEW.tenant_id));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER api_tokens_audit_insert AFTER INSERT OR DELETE ON api_tokens FOR EACH ROW
    EXECUTE FUNCTION crondepot_audit_tokens();
CREATE TRIGGER api_tokens_audit_update AFTER UPDATE ON api_tokens FOR EACH ROW
    WHEN ((to_jsonb(OLD) - 'last_used_at') IS DISTINCT FROM (to_jsonb(NEW) - 'last_used_at'))
    EXECUTE FUNCTION crondepot_audit_tokens();

-- Tenants: created, deleted, and every change but the quota counts. A rotation of the
-- signing secret ('secret.rotate'), a claim weight ('tenant.claim_weight') and the quota
-- ('tenant.quota', formerly written by the code) keep their entries; a change of the previous
-- secret or its overlap alone is 'secret.update'; anything else is 'tenant.update'. The
-- secrets themselves are never written to the log.
DROP TRIGGER tenants_audit_secret ON tenants;
DROP TRIGGER tenants_audit_claim_weight ON tenants;
DROP FUNCTION crondepot_audit_secret();
DROP FUNCTION crondepot_audit_claim_weight();

CREATE FUNCTION crondepot_audit_tenant_row(t tenants) RETURNS jsonb LANGUAGE sql IMMUTABLE
AS $$
    SELECT to_jsonb(t) - 'signing_secret' - 'previous_signing_secret' - 'active_jobs'
           - 'urgent_jobs'
$$;

CREATE FUNCTION crondepot_audit_tenants() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    actor constant text := crondepot_audit_actor();
    rest_before jsonb;
    rest_after jsonb;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, after)
        VALUES (NEW.id, actor, 'tenant.create', NEW.name, crondepot_audit_tenant_row(NEW));
        RETURN NULL;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, before)
        VALUES (OLD.id, actor, 'tenant.delete', OLD.name, crondepot_audit_tenant_row(OLD));
        RETURN NULL;
    END IF;
    IF OLD.signing_secret IS DISTINCT FROM NEW.signing_secret THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, after)
        VALUES (NEW.id, actor, 'secret.rotate', 'signing-secret',
                jsonb_build_object('previous_valid_until', NEW.previous_secret_until));
    ELSIF (OLD.previous_signing_secret, OLD.previous_secret_until)
          IS DISTINCT FROM (NEW.previous_signing_secret, NEW.previous_secret_until) THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
        VALUES (NEW.id, actor, 'secret.update', 'signing-secret',
                jsonb_build_object('previous_valid_until', OLD.previous_secret_until),
                jsonb_build_object('previous_valid_until', NEW.previous_secret_until,
                                   'previous_secret_changed',
                                   OLD.previous_signing_secret
                                   IS DISTINCT FROM NEW.previous_signing_secret));
    END IF;
    IF OLD.claim_weight IS DISTINCT FROM NEW.claim_weight THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
        VALUES (NEW.id, actor, 'tenant.claim_weight', 'claim-weight',
                jsonb_build_object('claim_weight', OLD.claim_weight),
                jsonb_build_object('claim_weight', NEW.claim_weight));
    END IF;
    IF (OLD.max_jobs, OLD.max_urgent_jobs, OLD.urgent_allowed)
       IS DISTINCT FROM (NEW.max_jobs, NEW.max_urgent_jobs, NEW.urgent_allowed) THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
        VALUES (NEW.id, actor, 'tenant.quota', 'quota',
                jsonb_build_object('max_jobs', OLD.max_jobs,
                                   'max_urgent_jobs', OLD.max_urgent_jobs,
                                   'urgent_allowed', OLD.urgent_allowed),
                jsonb_build_object('max_jobs', NEW.max_jobs,
                                   'max_urgent_jobs', NEW.max_urgent_jobs,
                                   'urgent_allowed', NEW.urgent_allowed));
    END IF;
    rest_before := crondepot_audit_tenant_row(OLD) - 'previous_secret_until' - 'claim_weight'
                   - 'max_jobs' - 'max_urgent_jobs' - 'urgent_allowed';
    rest_after := crondepot_audit_tenant_row(NEW) - 'previous_secret_until' - 'claim_weight'
                  - 'max_jobs' - 'max_urgent_jobs' - 'urgent_allowed';
    IF rest_before IS DISTINCT FROM rest_after THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
        VALUES (NEW.id, actor, 'tenant.update', NEW.name, rest_before, rest_after);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER tenants_audit_insert AFTER INSERT OR DELETE ON tenants FOR EACH ROW
    EXECUTE FUNCTION crondepot_audit_tenants();
-- The counts move with every job insert and cancel: the trigger is declared on every other
-- column, so those updates skip it without evaluating the WHEN (a column a migration adds
-- must be added here; tests/integration/test_audit_bypass.py checks it).
CREATE TRIGGER tenants_audit_update
    AFTER UPDATE OF id, name, signing_secret, created_at, max_jobs, max_urgent_jobs,
        urgent_allowed, previous_signing_secret, previous_secret_until, claim_weight,
        alert_after_failures
    ON tenants FOR EACH ROW
    WHEN ((to_jsonb(OLD) - 'active_jobs' - 'urgent_jobs')
          IS DISTINCT FROM (to_jsonb(NEW) - 'active_jobs' - 'urgent_jobs'))
    EXECUTE FUNCTION crondepot_audit_tenants();

-- Grants: each handler or limit granted or revoked is one entry, in the shape the code wrote
-- per call before ('tenant.grant' / 'tenant.revoke', subject 'grants').
CREATE FUNCTION crondepot_audit_grants() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    actor constant text := crondepot_audit_actor();
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, after)
        VALUES (OLD.tenant_id, actor, 'tenant.revoke', 'grants', jsonb_build_object(
            'handlers', CASE WHEN TG_TABLE_NAME = 'handler_grants'
                             THEN jsonb_build_array(to_jsonb(OLD) -> 'handler')
                             ELSE '[]'::jsonb END,
            'limits', CASE WHEN TG_TABLE_NAME = 'limit_grants'
                           THEN jsonb_build_array(to_jsonb(OLD) -> 'limit_name')
                           ELSE '[]'::jsonb END));
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, after)
        VALUES (NEW.tenant_id, actor, 'tenant.grant', 'grants', jsonb_build_object(
            'handlers', CASE WHEN TG_TABLE_NAME = 'handler_grants'
                             THEN jsonb_build_array(to_jsonb(NEW) -> 'handler')
                             ELSE '[]'::jsonb END,
            'limits', CASE WHEN TG_TABLE_NAME = 'limit_grants'
                           THEN jsonb_build_array(to_jsonb(NEW) -> 'limit_name')
                           ELSE '[]'::jsonb END));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER handler_grants_audit AFTER INSERT OR UPDATE OR DELETE ON handler_grants
    FOR EACH ROW EXECUTE FUNCTION crondepot_audit_grants();
CREATE TRIGGER limit_grants_audit AFTER INSERT OR UPDATE OR DELETE ON limit_grants
    FOR EACH ROW EXECUTE FUNCTION crondepot_audit_grants();

-- The append-only guard, unchanged in what it does, now with the same fixed search_path.
ALTER FUNCTION crondepot_audit_append_only() SET search_path FROM CURRENT;
