-- The fence. A worker's write to a run it holds finds the run by its id and lease token
-- and checks that it is still running: `status = 'running' COLLATE "C"`. Under the C
-- collation text equality is the same test, but the planner proves a partial index's
-- predicate only in the collation it was written in, so the partial index runs_running
-- (status = 'running', the reaper's) is never a path for these statements, and the primary
-- key is the only one, whatever the statistics were when the plan was made. Each write
-- reads its own run, however many run (tests/integration/claim/test_claim_plans.py).

-- name: claim_runs
-- A worker's claim, in one call: its runs, the lending between queues, the lease, the
-- deadline check. The steps are the function crondepot_claim_runs (functions/claim_runs.sql),
-- whose small statements keep their plans for the session; this call is cheap to plan and
-- safe to prepare. The counts travel
-- as six integers, not two lists: psycopg dumps a list element by element in Python.
SELECT * FROM crondepot_claim_runs(
    %(owner)s::text,
    ARRAY[%(urgent)s::integer, %(normal)s::integer, %(bulk)s::integer],
    ARRAY[%(lend_urgent)s::integer, %(lend_normal)s::integer, %(lend_bulk)s::integer],
    %(now)s::timestamptz);

-- name: extend_acquired_leases
-- Heartbeat: extend the leases this worker still holds. Fenced by token: a run that was
-- reaped and claimed by another worker has a new token and is not touched; an expired lease
-- is not revived. Capped so that the run's lease time over all its attempts (lease_used
-- holds the ended ones') stays within max_lease seconds (default 12 h). `replace` says a
-- newer run of the job (overlap `replace`) asked for this one to give way
-- (runs.replace_requested_at, written by the claim): the worker cancels the call where it
-- can and records the run with record_replaced. Still one statement.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
UPDATE runs AS r
SET lease_expires_at = least(clock.now + make_interval(secs => h.lease_seconds),
                             r.started_at + make_interval(secs => %(max_lease)s)
                             - r.lease_used),
    updated_at = clock.now
FROM clock, unnest(%(run_ids)s::text[], %(tokens)s::uuid[], %(lease_seconds)s::integer[])
     AS h(run_id, token, lease_seconds)
WHERE r.run_id = h.run_id AND r.lease_token = h.token AND r.status = 'running' COLLATE "C"
  AND r.lease_expires_at > clock.now
RETURNING r.run_id, r.lease_expires_at, clock.now AS db_now,
          r.replace_requested_at IS NOT NULL AS replace;

-- name: record_successes
-- Successes, many runs in one statement and one commit: the function
-- crondepot_record_successes
-- (functions/record_successes.sql) says what is written and why.
SELECT run_id FROM crondepot_record_successes(%(successes)s::jsonb);

-- name: record_retry
-- A temporary failure: back to the queue, available after the backoff delay. The delay is
-- computed here from the job's retry curve (jobs.retry_base_s, retry_cap_s), so every worker
-- waits by the curve the job has now: the worker's jitter (u, drawn from [0, 1)) times
-- min(cap, base * 2^(attempt - 1)), or at_least (the target's Retry-After, capped by the
-- worker; 0 without one) if that is longer: queue/retry.py retry_wait, the same formula
-- (the doubling stops at 2^60; a run without its job row takes the default curve, passed
-- in). The attempt's lease time counts against the run's total (see extend_acquired_leases); a run that has
-- used it all goes to the dead letter instead (LeaseCapReached), as the reaper would send
-- it, so a queued run always has lease time left. A retry that would come after the run's
-- misfire deadline is not queued: the run is recorded skipped, reason 'deadline_passed'
-- ("never after noon" holds for retries too). The attempt row is read first (same
-- token: same attempt, and neither lease_used nor started_at changes within one), so the
-- total is computed once. A queued-again run's ended attempt is kept in run_attempts (the
-- next claim overwrites the run row's); a run that ends here (dead, skipped) keeps it in its
-- row, with the worker's name, and counts as a failed fire of its job (jobs.failing_fires).
-- Returns the status written and the delay.
WITH found AS (
    SELECT r.run_id, r.job_id, r.attempt, r.started_at, r.lease_owner, r.deadline_at,
           r.lease_used + (now() - r.started_at) AS used,
           greatest(%(jitter)s::float8
                    * least(coalesce(j.retry_cap_s, %(cap_s)s::float8),
                            coalesce(j.retry_base_s, %(base_s)s::float8)
                            * power(2::float8, least(greatest(r.attempt - 1, 0), 60))),
                    %(at_least)s::float8) AS delay
    FROM runs AS r LEFT JOIN jobs AS j ON j.id = r.job_id
    WHERE r.run_id = %(run_id)s AND r.lease_token = %(token)s
      AND r.status = 'running' COLLATE "C"
), attempt AS (
    SELECT run_id, job_id, attempt, started_at, lease_owner, used, delay,
           used >= make_interval(secs => %(max_lease)s) AS capped,
           coalesce(deadline_at < now() + make_interval(secs => delay), false) AS late
    FROM found
), done AS (
    UPDATE runs AS r
    SET status = CASE WHEN a.capped THEN 'dead' WHEN a.late THEN 'skipped' ELSE 'queued' END,
        skip_reason = CASE WHEN a.late AND NOT a.capped THEN 'deadline_passed' END,
        available_at = now() + make_interval(secs => a.delay),
        finished_at = CASE WHEN a.capped OR a.late THEN now() END,
        lease_used = a.used,
        updated_at = now(),
        last_error = CASE
            WHEN a.capped
            THEN 'lease time cap reached: leased ' || date_trunc('second', a.used)::text
                 || ' in all; last error: ' || %(error)s::text
            ELSE %(error)s::text END,
        error_class = CASE WHEN a.capped THEN 'LeaseCapReached' ELSE %(error_class)s::text END,
        worker = r.lease_owner,
        lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
    FROM attempt AS a
    WHERE r.run_id = a.run_id AND r.lease_token = %(token)s
      AND r.status = 'running' COLLATE "C"
    RETURNING r.run_id, r.job_id, r.status, a.delay
), kept AS (
    INSERT INTO run_attempts (run_id, attempt, started_at, ended_at, outcome, error,
                              error_class, worker)
    SELECT a.run_id, a.attempt, a.started_at, now(), 'retried', %(error)s::text,
           %(error_class)s::text, a.lease_owner
    FROM attempt AS a JOIN done AS d ON d.run_id = a.run_id
    WHERE d.status = 'queued'
), failing AS (
    UPDATE jobs AS j SET failing_fires = j.failing_fires + 1
    FROM done AS d WHERE j.id = d.job_id AND d.status <> 'queued'
)
SELECT status, delay FROM done;

-- name: record_final_failure
-- 'failed' (permanent error) or 'dead' (out of attempts, outcome unknown): no automatic
-- retry. The run row keeps the worker's name; the fire counts as failed for its job's health.
WITH done AS (
    UPDATE runs
    SET status = %(status)s::text, finished_at = now(), updated_at = now(),
        last_error = %(error)s, error_class = %(error_class)s, worker = lease_owner,
        lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
    WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'running' COLLATE "C"
    RETURNING job_id
), failing AS (
    UPDATE jobs AS j SET failing_fires = j.failing_fires + 1
    FROM done WHERE j.id = done.job_id
)
SELECT job_id FROM done;

-- name: record_replaced
-- overlap `replace`: a newer run of the job asked this one to give way and its call was
-- cancelled (an async handler), abandoned (an HTTP call) or ended meanwhile. Recorded
-- skipped, reason 'replaced', with what happened to the call in last_error: one row for
-- its fire (the ledger), never retried, not the dead letter, and not a failed fire for the
-- job's health (replacing is what the job asked for). Its lease ends here, so the run that
-- waits is claimed next. Fenced by the lease token.
UPDATE runs
SET status = 'skipped', skip_reason = 'replaced', finished_at = now(), updated_at = now(),
    last_error = %(error)s, error_class = 'Replaced', worker = lease_owner,
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'running' COLLATE "C"
RETURNING run_id;

-- name: release_run
-- Shutdown: give back a run that was claimed but not started; the attempt does not count,
-- nor does its lease time (no call was made).
UPDATE runs
SET status = 'queued', attempt = attempt - 1, available_at = now(), updated_at = now(),
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'running' COLLATE "C";

-- name: claimed_delivery_windows
-- The delivery windows in force for the jobs of a claim (the job's own, else its tenant's;
-- "none": no window), only for the jobs that have one: the worker checks each claimed run
-- against its window before the call (worker/execute.py). Primary-key probes of jobs and
-- tenants; a claim of runs without windows gets no rows back.
SELECT j.id, w.window, j.tz
FROM jobs AS j
JOIN tenants AS t ON t.id = j.tenant_id,
     LATERAL (SELECT coalesce(j.delivery_window, t.delivery_window) AS window) AS w
WHERE j.id = ANY(%(job_ids)s::bigint[])
  AND w.window IS NOT NULL AND w.window <> '"none"'::jsonb;

-- name: windowed_tenants
-- Which of these tenants have a delivery window anywhere: a default, or a job with its own
-- (the partial index jobs_windowed). The worker keeps the answer a few seconds per tenant.
SELECT t.id
FROM tenants AS t
WHERE t.id = ANY(%(tenant_ids)s::bigint[])
  AND (t.delivery_window IS NOT NULL
       OR EXISTS (SELECT FROM jobs AS j
                  WHERE j.tenant_id = t.id AND j.delivery_window IS NOT NULL
                    AND j.delivery_window <> '"none"'::jsonb));

-- name: defer_run
-- A claimed run found outside its delivery window before the call: given back to the queue,
-- due at the window's next opening, as release_run gives one back at shutdown: the attempt
-- does not count, nor does its lease time (no call was made). Fenced by the lease token.
-- The claim passes it over until then (available_at); a misfire deadline before the opening
-- still ends it (skip_runs_past_deadline).
UPDATE runs
SET status = 'queued', attempt = attempt - 1, available_at = %(opening)s::timestamptz,
    due_at = greatest(due_at, %(opening)s::timestamptz), updated_at = now(),
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'running' COLLATE "C";

-- name: defer_queued_run
-- A retry queued for a time outside its delivery window: moved to the window's next opening
-- (only later, and only while still queued and unleased).
UPDATE runs
SET available_at = %(opening)s::timestamptz, updated_at = now()
WHERE run_id = %(run_id)s AND status = 'queued' AND lease_token IS NULL
  AND available_at < %(opening)s::timestamptz;

-- name: skip_past_deadline
-- A claimed run whose call has not started, checked again against its misfire deadline (it
-- waited long for a rate-limit token): past it, the run is recorded skipped and its lease
-- let go; the attempt does not count (no call was made). Fenced by the lease token. The fire
-- counts as failed for its job's health (jobs.failing_fires).
WITH done AS (
UPDATE runs
SET status = 'skipped', skip_reason = 'deadline_passed', attempt = attempt - 1,
    finished_at = now(), updated_at = now(),
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'running' COLLATE "C"
  AND deadline_at < now()
RETURNING run_id, job_id
), failing AS (
    UPDATE jobs AS j SET failing_fires = j.failing_fires + 1
    FROM done WHERE j.id = done.job_id
)
SELECT run_id FROM done;

-- name: skip_runs_past_deadline
-- Queued runs past their misfire deadline (never sent late): the claim passes
-- over them; this sweep records them skipped, 'deadline_passed', in bounded passes run with
-- the reaper, found on the partial index runs_queued_deadline (only runs with a deadline).
-- SKIP LOCKED: a run a claim holds this instant is its business. Each counts as a failed
-- fire of its job (jobs.failing_fires). Held runs too (holds.py): a hold keeps a run from
-- being sent, never past its deadline.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
late AS MATERIALIZED (
    SELECT r.run_id
    FROM runs AS r, clock
    WHERE r.status = 'queued' AND r.deadline_at IS NOT NULL AND r.deadline_at < clock.now
    ORDER BY r.deadline_at
    LIMIT 1000
    FOR UPDATE OF r SKIP LOCKED
), done AS (
    UPDATE runs AS r
    SET status = 'skipped', skip_reason = 'deadline_passed', finished_at = clock.now,
        updated_at = clock.now,
        -- a held run (holds.py) gets its own ready time back: a run not queued is never
        -- left at 'infinity'
        available_at = coalesce(r.held_available_at, r.available_at), held_available_at = NULL
    FROM late, clock
    WHERE r.run_id = late.run_id
    RETURNING r.run_id, r.job_id, r.tenant_id
), counted AS (
    -- the jobs' rows locked in id order: two passes counting the same jobs cannot deadlock
    SELECT j.id, c.fires FROM jobs AS j
    JOIN (SELECT job_id, count(*) AS fires FROM done WHERE true GROUP BY job_id) AS c
      ON c.job_id = j.id
    ORDER BY j.id
    FOR UPDATE OF j
), failing AS (
    UPDATE jobs AS j SET failing_fires = j.failing_fires + counted.fires
    FROM counted WHERE j.id = counted.id
)
SELECT run_id, job_id, tenant_id FROM done;

-- name: reap_abandoned_runs
-- Runs whose lease expired (their worker died, hung or lost the database) go back to the
-- queue, or to the dead letter when that was their last attempt or their lease time in all
-- reached max_lease seconds (a run whose calls keep hanging). SKIP LOCKED so that many
-- workers reaping at once split the work instead of waiting on each other. Returns what the
-- WARNING line of a run sent to the dead letter names (its job's key, from the join).
-- A run queued again keeps its lost attempt in run_attempts ('lease_expired', ended when
-- its lease did, with the lost worker's name); a dead one keeps it in its row (worker) and
-- counts as a failed fire of its job (jobs.failing_fires).
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
expired AS MATERIALIZED (
    SELECT r.run_id, j.key AS job_key, r.attempt >= j.max_attempts AS last,
           r.attempt, r.started_at, r.lease_owner, r.lease_expires_at,
           r.lease_used + (r.lease_expires_at - r.started_at) AS used,
           r.lease_used + (r.lease_expires_at - r.started_at)
               >= make_interval(secs => %(max_lease)s) AS capped
    FROM runs r JOIN jobs j ON j.id = r.job_id, clock
    WHERE r.status = 'running' AND r.lease_expires_at < clock.now
    ORDER BY r.lease_expires_at
    LIMIT 1000
    FOR UPDATE OF r SKIP LOCKED
), done AS (
    UPDATE runs AS r
    SET status = CASE WHEN e.last OR e.capped THEN 'dead' ELSE 'queued' END,
        available_at = clock.now, updated_at = clock.now,
        finished_at = CASE WHEN e.last OR e.capped THEN clock.now END,
        lease_used = e.used,
        last_error = CASE
            WHEN e.capped AND NOT e.last
            THEN 'lease time cap reached: leased ' || date_trunc('second', e.used)::text
                 || ' in all; last worker ' || coalesce(r.lease_owner, '?')
            ELSE 'lease expired: worker ' || coalesce(r.lease_owner, '?') || ' was lost' END,
        error_class = CASE WHEN e.capped AND NOT e.last THEN 'LeaseCapReached'
                           ELSE 'LeaseExpired' END,
        worker = r.lease_owner,
        lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
    FROM expired e, clock
    WHERE r.run_id = e.run_id
    RETURNING r.run_id, r.status, r.job_id, e.job_key, r.last_error, r.error_class
), kept AS (
    INSERT INTO run_attempts (run_id, attempt, started_at, ended_at, outcome, error,
                              error_class, worker)
    SELECT e.run_id, e.attempt, e.started_at, e.lease_expires_at, 'lease_expired',
           d.last_error, d.error_class, e.lease_owner
    FROM expired AS e JOIN done AS d ON d.run_id = e.run_id
    WHERE d.status = 'queued'
), counted AS (
    -- the jobs' rows locked in id order: two passes counting the same jobs cannot deadlock
    SELECT j.id, c.fires FROM jobs AS j
    JOIN (SELECT job_id, count(*) AS fires FROM done WHERE status = 'dead' GROUP BY job_id) AS c
      ON c.job_id = j.id
    ORDER BY j.id
    FOR UPDATE OF j
), failing AS (
    UPDATE jobs AS j SET failing_fires = j.failing_fires + counted.fires
    FROM counted WHERE j.id = counted.id
)
SELECT run_id, status, job_id, job_key, last_error FROM done;

-- name: run_status
SELECT status FROM runs WHERE run_id = %(run_id)s;

-- name: listen_runs_queued
-- The scheduler (and retries, replays, triggers) NOTIFY crondepot_runs on commit.
LISTEN crondepot_runs;

-- name: notify_runs_queued_now
SELECT pg_notify('crondepot_runs', %(priorities)s);
