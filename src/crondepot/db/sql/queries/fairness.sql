-- name: set_tenant_claim_weight
-- The tenant's share of each priority's claim turns against the other tenants with runs
-- ready in it (functions/claim_fair.sql); the next claim uses it. Returns the weight it
-- replaced (the row is locked first, so two operators' changes are each reported right).
UPDATE tenants AS t
SET claim_weight = %(weight)s::integer
FROM (SELECT id, claim_weight FROM tenants WHERE id = %(tenant_id)s::bigint FOR UPDATE)
     AS previous
WHERE t.id = previous.id
RETURNING previous.claim_weight;
