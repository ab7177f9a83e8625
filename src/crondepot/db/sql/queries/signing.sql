-- name: rotate_signing_secret
-- A new current secret; the old one still signs until the overlap ends. A rotation during
-- an overlap drops the secret before the old one: only the last two ever sign.
UPDATE tenants
SET previous_signing_secret = signing_secret,
    previous_secret_until = now() + make_interval(secs => %(overlap_seconds)s),
    signing_secret = %(signing_secret)s
WHERE id = %(tenant_id)s
RETURNING previous_secret_until, now() AS rotated_at;

-- name: signing_overlaps
-- What workers sign with besides the secret a claim returns: every tenant in an overlap, or
-- out of one for less than an hour (so a run claimed before an --overlap 0 rotation is not
-- sent with the retired secret), and the database clock (a snapshot newer than a claim has
-- seen every rotation that claim saw). A range scan of tenants_secret_overlap.
-- Always one row at least (the clock; NULL tenant columns when no tenant is in an overlap).
SELECT clock.db_now, t.id, t.signing_secret, t.previous_signing_secret,
       t.previous_secret_until
FROM (SELECT now() AS db_now) clock
LEFT JOIN tenants t ON t.previous_secret_until > clock.db_now - interval '1 hour';
