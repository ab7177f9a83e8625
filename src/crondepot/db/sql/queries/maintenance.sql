-- The maintenance leader's lock (crondepot/maintenance/leader.py).

-- name: maintenance_session
-- The maintenance leader's session: ended by the server when the leader stops talking to
-- it (a stalled or partitioned leader), which releases the lock for another process.
SELECT set_config('idle_session_timeout', %(idle_ms)s::text, false);

-- name: maintenance_try_lead
SELECT pg_try_advisory_lock(7301847220451893402);

-- name: maintenance_still_lead
-- The leader's touch: proves the session (and so the lock) alive and resets its idle clock.
SELECT 1;

-- name: maintenance_turn_session
-- A service's session on the leader: a leader stalled inside a turn's transaction releases
-- that transaction's locks when it loses its lock, not 60 s later (maintenance/leader.py).
SELECT set_config('idle_in_transaction_session_timeout', %(idle_ms)s::text, false);
