-- name: cluster_identity
-- The cluster and WAL timeline this session runs on, and the database time. The timeline is
-- read from the current WAL file's name (its first 8 hex digits): pg_control_checkpoint()
-- would name the old one until the first checkpoint after a promotion.
SELECT s.system_identifier,
       ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::integer,
       now()
FROM pg_control_system() AS s;

-- name: lock_restore_check
-- One check at a time: processes starting together agree on one restore row.
SELECT pg_advisory_xact_lock(hashtext('crondepot.restore_check'));

-- name: newest_mark
SELECT system_identifier, timeline_id, last_seen_at
FROM crondepot_cluster_marks ORDER BY last_seen_at DESC LIMIT 1;

-- name: touch_mark
INSERT INTO crondepot_cluster_marks AS m (system_identifier, timeline_id)
VALUES (%(system_identifier)s, %(timeline_id)s)
ON CONFLICT (system_identifier, timeline_id) DO UPDATE SET last_seen_at = now()
RETURNING last_seen_at;

-- name: open_restore
SELECT id, detected_at, system_identifier, timeline_id, last_seen_at
FROM crondepot_restores WHERE resolved_at IS NULL ORDER BY id LIMIT 1;

-- name: record_restore
-- A cluster and timeline restored to again (its older decision no longer holds) is open
-- again.
INSERT INTO crondepot_restores (system_identifier, timeline_id, last_seen_at)
VALUES (%(system_identifier)s, %(timeline_id)s, %(last_seen_at)s)
ON CONFLICT (system_identifier, timeline_id) DO UPDATE
SET detected_at = now(), last_seen_at = EXCLUDED.last_seen_at, resolved_at = NULL,
    resolved_by = NULL, resolution = NULL, runs_skipped = NULL;

-- name: resolve_restore
UPDATE crondepot_restores
SET resolved_at = now(), resolved_by = %(actor)s, resolution = %(resolution)s,
    runs_skipped = %(runs_skipped)s
WHERE id = %(id)s AND resolved_at IS NULL;

-- name: jobs_without_repeat_guard
-- Jobs whose target may act twice on a repeated run id: an HTTP or python target without
-- "dedupes": true, and AMQP (at least once). NATS JetStream and Redis targets drop a
-- repeated id by construction (docs/targets.md). Every such job, ended, cancelled and
-- paused ones too: their queued or running runs are skipped like any other's; only the
-- active, unpaused ones have fires owed (``active``, ``paused`` say which).
SELECT id, tenant_id, active AND NOT paused FROM jobs
WHERE NOT (target->>'type' IN ('nats', 'redis')
           OR coalesce((target->>'dedupes')::boolean, false))
ORDER BY id;

-- name: skip_restored_runs
-- Runs of those jobs that the restored database holds as queued or running and that were
-- due before the check: the lost timeline most likely sent them after the restore point.
UPDATE runs
SET status = 'skipped', skip_reason = 'restored', finished_at = now(), updated_at = now(),
    lease_token = NULL, lease_expires_at = NULL, lease_owner = NULL
WHERE job_id = ANY(%(job_ids)s::bigint[]) AND status IN ('queued', 'running')
  AND due_at <= %(now)s::timestamptz
RETURNING run_id;

-- name: restart_job_from
-- A job moved on from now (its fires up to now were written by the caller).
UPDATE jobs
SET next_run_at = %(next_run_at)s, next_nominal_at = %(next_nominal_at)s,
    version = version + 1, updated_at = now()
WHERE id = %(id)s::bigint AND tenant_id = %(tenant_id)s::bigint AND active AND NOT paused;
