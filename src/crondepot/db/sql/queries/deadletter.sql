-- name: list_dead_runs
-- The dead letter, newest first, filtered, a page at a time (after_at/after_run: the
-- cursor). Every filter is optional (NULL = any); the
-- runs_dead index serves the common (tenant, time) case.
SELECT r.run_id, r.job_id, j.key AS job_key, tn.name AS tenant, r.priority, r.nominal_at,
       r.due_at, r.attempt, r.finished_at, r.error_class, r.last_error, r.deadline_at,
       coalesce(r.deadline_at < now(), false) AS past_deadline
FROM runs r
JOIN jobs j ON j.id = r.job_id
JOIN tenants tn ON tn.id = r.tenant_id
WHERE r.status = 'dead'
  AND (%(tenant)s::text IS NULL OR tn.name = %(tenant)s::text)
  AND (%(job_id)s::bigint IS NULL OR r.job_id = %(job_id)s::bigint)
  AND (%(run_ids)s::text[] IS NULL OR r.run_id = ANY(%(run_ids)s::text[]))
  AND (%(error)s::text IS NULL OR r.error_class = %(error)s::text
       OR r.last_error ILIKE '%%' || %(error)s::text || '%%')
  AND (%(since)s::timestamptz IS NULL OR r.finished_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR r.finished_at < %(until)s::timestamptz)
  -- the page after a cursor: (finished_at, run_id) of the last row shown, in this order
  AND (%(after_at)s::timestamptz IS NULL OR r.finished_at < %(after_at)s::timestamptz
       OR (r.finished_at = %(after_at)s::timestamptz AND r.run_id > %(after_run)s::text))
ORDER BY r.finished_at DESC, r.run_id
LIMIT %(limit)s::integer;

-- name: replay_dead_runs
-- Replay: the same run id goes back to the queue with a fresh attempt budget (and lease
-- time). Conditional on the status the caller read (%(from_statuses)s: 'dead' for the dead
-- letter, 'failed' or 'dead' for `runs retry`), so a run replayed twice at once is queued
-- once. A
-- run past its misfire deadline goes only when the caller says so (%(ignore_deadline)s),
-- and then without its deadline, or the claim would skip it at once.
-- The run's ended attempt (its row is about to be the next attempt's) is kept in
-- run_attempts, as 'failed' or 'dead'. The rows are locked first (FOR UPDATE re-checks the
-- status after a wait, so the second of two replays at once finds nothing).
WITH ended AS (
    SELECT run_id, attempt, started_at, finished_at, status, last_error, error_class, worker
    FROM runs
    WHERE status = ANY(%(from_statuses)s::text[]) AND run_id = ANY(%(run_ids)s::text[])
      AND (%(ignore_deadline)s OR deadline_at IS NULL OR deadline_at >= now())
    FOR UPDATE
), done AS (
    UPDATE runs AS r
    SET status = 'queued', attempt = 0, lease_used = interval '0', available_at = now(),
        updated_at = now(), finished_at = NULL, last_error = NULL, error_class = NULL,
        deadline_at = CASE WHEN %(ignore_deadline)s THEN NULL ELSE r.deadline_at END
    FROM ended WHERE r.run_id = ended.run_id
    RETURNING r.run_id, r.priority
), kept AS (
    INSERT INTO run_attempts (run_id, attempt, started_at, ended_at, outcome, error,
                              error_class, worker)
    SELECT e.run_id, e.attempt, e.started_at, coalesce(e.finished_at, now()), e.status,
           e.last_error, e.error_class, e.worker
    FROM ended AS e JOIN done AS d ON d.run_id = e.run_id
    WHERE e.attempt > 0
)
SELECT run_id, priority FROM done;

-- name: run_for_retry
-- `runs retry`: one run of one tenant, locked, with what the retry rule needs: its state
-- and whether its misfire deadline has passed (the dead letter's rule). Nothing for another
-- tenant's run.
SELECT r.run_id, r.job_id, j.key AS job_key, tn.name AS tenant, r.priority, r.nominal_at,
       r.due_at, r.attempt, r.finished_at, r.error_class, r.last_error, r.deadline_at,
       coalesce(r.deadline_at < now(), false) AS past_deadline, r.status
FROM runs r
JOIN jobs j ON j.id = r.job_id
JOIN tenants tn ON tn.id = r.tenant_id
WHERE r.run_id = %(run_id)s::text AND r.tenant_id = %(tenant_id)s::bigint
FOR UPDATE OF r;
