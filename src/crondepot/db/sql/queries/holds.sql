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

-- name: lock_holds
-- Holds, their runs moved out (move_out_held_runs) and put back (put_back_released_runs)
-- change one at a time, across every process: a transaction-scoped advisory lock taken in
-- a statement of its own, so the statements after it read the holds as the previous holder
-- committed them. Without it a sweep that still saw a hold being released could move out a
-- run after the release put its runs back, and that run would wait at 'infinity' forever.
SELECT pg_advisory_xact_lock(7301847220451893519);

-- name: move_out_held_runs
-- Take the held queued runs out of the claim's ready range (migration 0018): available_at
-- becomes 'infinity', the run's own ready time is kept in held_available_at. For one tenant
-- (a new hold: all its matching runs, one statement) or every tenant with a hold (the
-- maintenance leader's rescuer, each turn: the fires the schedulers wrote, retries and
-- replays queued since). %(horizon)s: only runs ready within that many seconds (NULL: all);
-- the claim meets no others, and a run waiting longer is moved when it comes that close.
-- A nested loop over the held tenants: per tenant, one range scan of runs_queued per
-- priority up to the horizon, never the runs already moved out. SKIP LOCKED: a run a claim
-- holds this instant is its business (the claim's own check passes over held runs).
WITH clock AS (SELECT now() AS now),
held AS MATERIALIZED (
    SELECT r.run_id
    FROM runs AS r, clock
    WHERE r.status = 'queued' AND r.priority IN ('urgent', 'normal', 'bulk')
      AND r.tenant_id IN (SELECT h.tenant_id FROM holds AS h
                          WHERE %(tenant_id)s::bigint IS NULL
                             OR h.tenant_id = %(tenant_id)s::bigint)
      AND r.available_at < CASE WHEN %(horizon)s::float8 IS NULL THEN 'infinity'
                                ELSE clock.now + make_interval(secs => %(horizon)s::float8)
                           END
      AND crondepot_run_held(r.tenant_id, r.job_id)
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE runs AS r
SET held_available_at = r.available_at, available_at = 'infinity'
FROM held
WHERE r.run_id = held.run_id;

-- name: put_back_released_runs
-- A hold ended (its row deleted before, in the same transaction): the tenant's moved-out
-- runs that no other hold names get their own ready time back (one range scan of
-- runs_queued per priority, at 'infinity'). A run past its misfire deadline is put back
-- too: the claim never leases it and the rescuer records it skipped (a misfire deadline is never passed).
UPDATE runs AS r
SET available_at = r.held_available_at, held_available_at = NULL
WHERE r.status = 'queued' AND r.priority IN ('urgent', 'normal', 'bulk')
  AND r.tenant_id = %(tenant_id)s::bigint AND r.available_at = 'infinity'
  AND r.held_available_at IS NOT NULL
  AND NOT crondepot_run_held(r.tenant_id, r.job_id);

-- name: list_holds
-- Active holds (one tenant's, or all for NULL) with the queued runs each holds now, moved
-- out or not yet (a fire written since the rescuer's last turn): the tenant's queued runs
-- joined to their jobs. Holds are few and short.
SELECT t.name AS tenant, h.kind, h.name, h.created_at, h.created_by,
       (SELECT count(*) FROM runs AS r JOIN jobs AS j ON j.id = r.job_id
        WHERE r.status = 'queued' AND r.tenant_id = h.tenant_id
          AND CASE h.kind WHEN 'rate_limit' THEN j.rate_limit = h.name
                          ELSE crondepot_host_of(j.target) = h.name END) AS queued
FROM holds AS h
JOIN tenants AS t ON t.id = h.tenant_id
WHERE %(tenant_id)s::bigint IS NULL OR h.tenant_id = %(tenant_id)s::bigint
ORDER BY h.tenant_id, h.kind, h.name;

-- name: any_hold
-- Whether any tenant holds anything (the rescuer's sweep does nothing otherwise).
SELECT 1 FROM holds LIMIT 1;

-- name: tenant_hosts
-- The hosts the tenant's jobs (not cancelled) call, as the claim reads them: what `hosts
-- pause` may name, and its "did you mean". An operator's command, not a hot path.
SELECT DISTINCT crondepot_host_of(target) AS host
FROM jobs
WHERE tenant_id = %(tenant_id)s::bigint AND active AND target ->> 'type' = 'http'
ORDER BY 1
LIMIT 10000;
