-- name: claim_runs
-- A worker's claim, in one statement: its runs, the lending between queues, the lease.
--
-- own:   for each priority p in %(priorities)s, up to %(limits)s of its queued runs, oldest
--        first. For urgent the limit includes the urgent-only slots' turns.
-- short: each priority's spare turns: its lendable turns (%(lendable)s: the weighted
--        share, without the urgent-only turns, which are never lent; 0 when the claim does
--        not lend) that found no run. Urgent runs fill the urgent-only turns first.
-- loans: spare turns go to the next priority that is not dry (urgent -> normal -> bulk ->
--        urgent), so an empty normal queue under an urgent flood gives its turns to bulk,
--        not to urgent. Every priority is in %(priorities)s, with a limit of 0 if it has
--        no turns, so a queue nobody asked for is checked before it is lent to.
-- lent:  the borrowers' extra runs, skipping the ones this statement already took in own
--        (our own row locks are not skipped by SKIP LOCKED).
-- Each priority's scan reads runs_queued with its own LIMIT and SKIP LOCKED, and the CTEs are
-- MATERIALIZED fences, so a claim never locks or touches more rows than it returns. Every
-- claimed run gets a fresh lease token and attempt+1. The lease is measured on the database
-- clock; db_now is returned so the worker can translate the deadline to its own monotonic
-- clock without trusting its wall clock.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
wanted AS (
    SELECT * FROM unnest(%(priorities)s::text[], %(limits)s::integer[],
                         %(lendable)s::integer[]) AS w(priority, n, lendable)
),
own AS MATERIALIZED (
    SELECT w.priority, p.run_id
    FROM clock, wanted AS w,
         LATERAL (SELECT run_id FROM runs
                  WHERE status = 'queued' AND priority = w.priority
                    AND available_at <= clock.now
                  ORDER BY available_at
                  LIMIT w.n
                  FOR UPDATE OF runs SKIP LOCKED) AS p
),
short AS (
    SELECT w.priority,
           w.lendable - greatest(0, count(o.run_id) - (w.n - w.lendable)) AS spare,
           count(o.run_id) < w.n AS came_up_short
    FROM wanted AS w LEFT JOIN own AS o USING (priority)
    GROUP BY w.priority, w.n, w.lendable
),
dry AS (
    -- Queues with nothing more to give: asked and came up short, or not asked and empty.
    SELECT s.priority FROM short AS s, wanted AS w, clock
    WHERE w.priority = s.priority
      AND (s.came_up_short
           OR (w.n = 0 AND NOT EXISTS (SELECT 1 FROM runs
                                       WHERE status = 'queued' AND priority = s.priority
                                         AND available_at <= clock.now)))
),
loans AS (
    SELECT b.borrower, sum(s.spare)::integer AS n
    FROM short AS s,
         LATERAL (SELECT x.borrower
                  FROM unnest(CASE s.priority WHEN 'urgent' THEN ARRAY['normal', 'bulk']
                                              WHEN 'normal' THEN ARRAY['bulk', 'urgent']
                                              ELSE ARRAY['urgent', 'normal'] END)
                       WITH ORDINALITY AS x(borrower, ord)
                  WHERE x.borrower NOT IN (SELECT priority FROM dry)
                  ORDER BY x.ord
                  LIMIT 1) AS b
    WHERE s.spare > 0
    GROUP BY b.borrower
),
lent AS MATERIALIZED (
    SELECT p.run_id
    FROM clock, loans AS l,
         LATERAL (SELECT run_id FROM runs
                  WHERE status = 'queued' AND priority = l.borrower
                    AND available_at <= clock.now
                    AND run_id NOT IN (SELECT run_id FROM own)
                  ORDER BY available_at
                  LIMIT l.n
                  FOR UPDATE OF runs SKIP LOCKED) AS p
),
picked AS (
    SELECT run_id FROM own UNION ALL SELECT run_id FROM lent
    -- At most the claim's size; this also tells the planner how many rows to expect (it
    -- cannot see through the LIMITs above, and would hash-join the whole runs table).
    LIMIT %(total)s::integer
)
UPDATE runs AS r
SET status = 'running', attempt = r.attempt + 1, lease_owner = %(owner)s::text,
    lease_token = gen_random_uuid(),
    lease_expires_at = clock.now + make_interval(secs => j.lease_seconds),
    first_claimed_at = coalesce(r.first_claimed_at, clock.now),
    started_at = clock.now, updated_at = clock.now
FROM picked, clock, jobs AS j, tenants AS t
WHERE r.run_id = picked.run_id AND j.id = r.job_id AND t.id = r.tenant_id
RETURNING r.run_id, r.job_id, j.key AS job_key, r.tenant_id, r.priority, r.nominal_at,
          r.due_at, r.attempt, r.lease_token, r.lease_expires_at, clock.now AS db_now,
          j.target, j.payload, j.max_attempts, j.lease_seconds, j.rate_limit, t.signing_secret;

-- name: extend_acquired_leases
-- Heartbeat: extend the leases this worker still holds. Fenced by token: a run that was
-- reaped and claimed by another worker has a new token and is not touched; an expired lease
-- is not revived. Capped at max_lease seconds from the attempt's start (default 12 h).
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
UPDATE runs AS r
SET lease_expires_at = least(clock.now + make_interval(secs => h.lease_seconds),
                             r.started_at + make_interval(secs => %(max_lease)s)),
    updated_at = clock.now
FROM clock, unnest(%(run_ids)s::text[], %(tokens)s::uuid[], %(lease_seconds)s::integer[])
     AS h(run_id, token, lease_seconds)
WHERE r.run_id = h.run_id AND r.lease_token = h.token AND r.status = 'running'
  AND r.lease_expires_at > clock.now
RETURNING r.run_id, r.lease_expires_at, clock.now AS db_now;

-- name: record_successes
-- Successes, many runs in one statement (and one commit): the worker's outcome writer
-- batches what its slots report. Each row is fenced by its lease token. Two cases are
-- accepted: the holder still holds the run; or its lease expired and the run was reaped back
-- to the queue but nobody has claimed it since (same attempt number, no token). The call
-- happened; recording it then prevents a second call. Once another worker has claimed the
-- run (attempt moved on), nothing is written. The run ids returned are the ones recorded; a
-- run missing from the result lost its lease. Arrays travel in binary, as in insert_runs.
UPDATE runs AS r
SET status = 'succeeded', finished_at = now(), updated_at = now(), result = s.result,
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
    last_error = NULL, error_class = NULL
FROM unnest(%(run_ids)b::text[], %(tokens)b::uuid[], %(attempts)b::integer[],
            %(results)b::jsonb[]) AS s(run_id, token, attempt, result)
WHERE r.run_id = s.run_id
  AND ((r.status = 'running' AND r.lease_token = s.token)
       OR (r.status = 'queued' AND r.lease_token IS NULL AND r.attempt = s.attempt))
RETURNING r.run_id;

-- name: record_retry
-- A temporary failure: back to the queue, available after the backoff delay.
UPDATE runs
SET status = 'queued', available_at = now() + make_interval(secs => %(delay)s),
    updated_at = now(), last_error = %(error)s, error_class = %(error_class)s,
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'running';

-- name: record_final_failure
-- 'failed' (permanent error) or 'dead' (out of attempts, outcome unknown): no automatic retry.
UPDATE runs
SET status = %(status)s::text, finished_at = now(), updated_at = now(), last_error = %(error)s,
    error_class = %(error_class)s, lease_owner = NULL, lease_token = NULL,
    lease_expires_at = NULL
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'running';

-- name: release_run
-- Shutdown: give back a run that was claimed but not started; the attempt does not count.
UPDATE runs
SET status = 'queued', attempt = attempt - 1, available_at = now(), updated_at = now(),
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
WHERE run_id = %(run_id)s AND lease_token = %(token)s AND status = 'running';

-- name: reap_abandoned_runs
-- Runs whose lease expired (their worker died, hung or lost the database) go back to the
-- queue, or to the dead letter when that was their last attempt. SKIP LOCKED so that many
-- workers reaping at once split the work instead of waiting on each other.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
expired AS MATERIALIZED (
    SELECT r.run_id, r.attempt >= j.max_attempts AS last
    FROM runs r JOIN jobs j ON j.id = r.job_id, clock
    WHERE r.status = 'running' AND r.lease_expires_at < clock.now
    ORDER BY r.lease_expires_at
    LIMIT 1000
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE runs AS r
SET status = CASE WHEN e.last THEN 'dead' ELSE 'queued' END,
    available_at = clock.now, updated_at = clock.now,
    finished_at = CASE WHEN e.last THEN clock.now END,
    last_error = 'lease expired: worker ' || coalesce(r.lease_owner, '?') || ' was lost',
    error_class = 'LeaseExpired',
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL
FROM expired e, clock
WHERE r.run_id = e.run_id
RETURNING r.run_id, r.status;

-- name: run_status
SELECT status FROM runs WHERE run_id = %(run_id)s;

-- name: listen_runs_queued
-- The scheduler (and retries, replays, triggers) NOTIFY crondepot_runs on commit.
LISTEN crondepot_runs;

-- name: notify_runs_queued_now
SELECT pg_notify('crondepot_runs', %(priorities)s);
