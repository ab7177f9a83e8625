-- Tokens and the signing secret (design §6 "Tenants"): a token's last use, console sessions
-- kept by the server, and the rotation of a tenant's webhook signing secret with an overlap
-- in which the old secret still signs next to the new one.

-- When the token last authenticated a request, to the minute: the lookup writes it at most
-- once a minute per token (queries/api.sql), so a busy token costs no write per request.
ALTER TABLE api_tokens ADD COLUMN last_used_at timestamptz;

-- The console's sessions. The cookie holds a random id; only its sha256 is kept, as for
-- tokens, so a leaked table opens no session. A session belongs to the token it logged in
-- with: revoking the token deletes its sessions, and the lookup refuses a revoked token's
-- session anyway. Logout deletes the row, so a replayed cookie finds nothing.
CREATE TABLE console_sessions (
    id_hash     bytea PRIMARY KEY CHECK (octet_length(id_hash) = 32),
    token_id    bigint NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);
-- Revoking a token ends its sessions; a login sweeps the expired ones.
CREATE INDEX console_sessions_token ON console_sessions (token_id);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

-- tenants.signing_secret stays the current secret (the claim returns it). A rotation moves
-- it here with the instant until which it still signs, next to the new one; both columns are
-- set together. A second rotation replaces them: only the last two secrets ever sign.
ALTER TABLE tenants
    ADD COLUMN previous_signing_secret text,
    ADD COLUMN previous_secret_until timestamptz,
    ADD CONSTRAINT tenants_previous_secret_pair
        CHECK ((previous_signing_secret IS NULL) = (previous_secret_until IS NULL));
-- Workers read the tenants in (or lately out of) an overlap every few seconds: a range scan
-- of this index, a handful of rows however many tenants there are.
CREATE INDEX tenants_secret_overlap ON tenants (previous_secret_until)
    WHERE previous_secret_until IS NOT NULL;

-- Token and secret changes are audited like job changes (migration 0003): by triggers, for
-- sessions that name an actor. Neither a token nor a secret is ever written to the log.
CREATE FUNCTION crondepot_audit_tokens() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_log (tenant_id, actor, action, subject, after)
    VALUES (NEW.tenant_id, current_setting('crondepot.actor'),
            CASE WHEN TG_OP = 'INSERT' THEN 'token.create' ELSE 'token.revoke' END,
            'token:' || NEW.id,
            jsonb_build_object('role', NEW.role, 'label', NEW.label,
                               'revoked_at', NEW.revoked_at));
    RETURN NULL;
END $$;

CREATE FUNCTION crondepot_audit_secret() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_log (tenant_id, actor, action, subject, after)
    VALUES (NEW.id, current_setting('crondepot.actor'), 'secret.rotate', 'signing-secret',
            jsonb_build_object('previous_valid_until', NEW.previous_secret_until));
    RETURN NULL;
END $$;

CREATE TRIGGER api_tokens_audit_create AFTER INSERT ON api_tokens FOR EACH ROW
    WHEN (coalesce(current_setting('crondepot.actor', true), '') <> '')
    EXECUTE FUNCTION crondepot_audit_tokens();
CREATE TRIGGER api_tokens_audit_revoke AFTER UPDATE OF revoked_at ON api_tokens FOR EACH ROW
    WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL
          AND coalesce(current_setting('crondepot.actor', true), '') <> '')
    EXECUTE FUNCTION crondepot_audit_tokens();
CREATE TRIGGER tenants_audit_secret AFTER UPDATE OF signing_secret ON tenants FOR EACH ROW
    WHEN (OLD.signing_secret IS DISTINCT FROM NEW.signing_secret
          AND coalesce(current_setting('crondepot.actor', true), '') <> '')
    EXECUTE FUNCTION crondepot_audit_secret();
