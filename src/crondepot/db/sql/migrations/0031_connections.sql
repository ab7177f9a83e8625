-- Broker connections (issue 35, item 1): a broker URL, with its secret, is named by the
-- operator (`crondepot connections add rabbit amqp://…`) and granted to tenants (`crondepot
-- tenants grant bank42 --connection rabbit`); a job's broker target names the connection,
-- never a URL, as a python target names a granted handler. So a tenant cannot point a
-- worker at a broker the operator did not choose (the broker analogue of the address guard).

-- The operator's: no tenant_id, hence no row security, like a shared rate limit. The API
-- never reads the url (a tenant sees the names granted to it, through connection_grants);
-- `connections list` shows its scheme and host only.
CREATE TABLE connections (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$'),
    url         text NOT NULL CHECK (url ~ '^(amqps?|nats|tls|rediss?)://'),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- A connection granted to a tenant. Only an existing connection can be granted (the
-- foreign key); removing a connection removes its grants, and the runs of jobs naming it
-- then fail as a revoked handler's do.
CREATE TABLE connection_grants (
    tenant_id        bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    connection_name  text NOT NULL REFERENCES connections (name) ON DELETE CASCADE,
    granted_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, connection_name)
);

-- The same policy as the other grants (migration 0021).
ALTER TABLE connection_grants ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON connection_grants
USING ((SELECT current_setting('crondepot.tenant_id', true) = 'all')
       OR tenant_id = (SELECT nullif(nullif(
              current_setting('crondepot.tenant_id', true), 'all'), '')::bigint));

-- Each connection granted or revoked is one entry of the tenant's audit log, in the shape of
-- the other grants' (migration 0020: 'tenant.grant' / 'tenant.revoke', subject 'grants').
CREATE FUNCTION crondepot_audit_connection_grants() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    actor constant text := crondepot_audit_actor();
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, after)
        VALUES (OLD.tenant_id, actor, 'tenant.revoke', 'grants', jsonb_build_object(
            'handlers', '[]'::jsonb, 'limits', '[]'::jsonb,
            'connections', jsonb_build_array(OLD.connection_name)));
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, after)
        VALUES (NEW.tenant_id, actor, 'tenant.grant', 'grants', jsonb_build_object(
            'handlers', '[]'::jsonb, 'limits', '[]'::jsonb,
            'connections', jsonb_build_array(NEW.connection_name)));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER connection_grants_audit AFTER INSERT OR UPDATE OR DELETE ON connection_grants
    FOR EACH ROW EXECUTE FUNCTION crondepot_audit_connection_grants();
