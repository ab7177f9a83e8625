-- name: insert_hold
-- A new hold (holds.py); an existing one is left as it was (no row returned). created_by is
-- the session's actor (audit.py: the API's token, the CLI's user).
INSERT INTO holds (tenant_id, kind, name, created_by)
VALUES (%(tenant_id)s::bigint, %(kind)s::text, %(name)s::text,
        coalesce(current_setting('crondepot.actor', true), ''))
ON CONFLICT (tenant_id, kind, name) DO NOTHING
RETURNING name;

-- name: delete_hold
-- The end of a hold; no row returned if there was none.
DELETE FROM holds
WHERE tenant_id = %(tenant_id)s::bigint AND kind = %(kind)s::text AND name = %(name)s::text
RETURNING name;

-- name: list_holds
-- Active holds (one tenant's, or all for NULL) with the queued runs each holds now: the
-- tenant's queued runs (runs_queued_fair) joined to their jobs. Holds are few and short.
SELECT t.name AS tenant, h.kind, h.name, h.created_at, h.created_by,
       (SELECT count(*) FROM runs AS r JOIN jobs AS j ON j.id = r.job_id
        WHERE r.status = 'queued' AND r.tenant_id = h.tenant_id
          AND CASE h.kind WHEN 'rate_limit' THEN j.rate_limit = h.name
                          ELSE crondepot_host_of(j.target) = h.name END) AS queued
FROM holds AS h
JOIN tenants AS t ON t.id = h.tenant_id
WHERE %(tenant_id)s::bigint IS NULL OR h.tenant_id = %(tenant_id)s::bigint
ORDER BY h.tenant_id, h.kind, h.name;
