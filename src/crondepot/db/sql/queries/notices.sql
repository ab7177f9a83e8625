-- name: add_notice_channel
-- A tenant's channel; the same kind and address again is the channel already there
-- (nothing inserted: the caller reads it with find_notice_channel).
INSERT INTO notice_channels (tenant_id, kind, address)
VALUES (%(tenant_id)s::bigint, %(kind)s::text, %(address)s::text)
ON CONFLICT (tenant_id, kind, address) DO NOTHING
RETURNING id, tenant_id, kind, address, created_at;

-- name: find_notice_channel
-- The tenant's channel of this kind and address (the unique index).
SELECT id, tenant_id, kind, address, created_at FROM notice_channels
WHERE tenant_id = %(tenant_id)s::bigint AND kind = %(kind)s::text
  AND address = %(address)s::text;

-- name: count_notice_channels
-- How many channels the tenant has, its rows locked: two adds at once count in turn.
SELECT count(*) FROM (SELECT FROM tenants WHERE id = %(tenant_id)s::bigint FOR UPDATE) AS t,
     notice_channels AS c
WHERE c.tenant_id = %(tenant_id)s::bigint;

-- name: get_notice_channel
-- One channel of one tenant; another tenant's finds nothing, like an unknown id.
SELECT id, tenant_id, kind, address, created_at FROM notice_channels
WHERE id = %(id)s::bigint AND tenant_id = %(tenant_id)s::bigint;

-- name: list_notice_channels
-- A tenant's channels (a handful, capped by notices/channels.py: no pagination).
SELECT id, tenant_id, kind, address, created_at FROM notice_channels
WHERE tenant_id = %(tenant_id)s::bigint
ORDER BY id;

-- name: delete_notice_channel
-- A channel and, by cascade, its waiting events and its messages.
DELETE FROM notice_channels
WHERE id = %(id)s::bigint AND tenant_id = %(tenant_id)s::bigint
RETURNING id;

-- name: lock_notice_composer
-- One composer at a time (two leaders for a moment would otherwise both find a channel
-- and job with no message in the window, and both make one). Held to the transaction's end.
SELECT pg_try_advisory_xact_lock(hashtext('crondepot_notice_composer'));

-- name: compose_notices
-- The outbox's waiting events made into messages, one per channel and job, except where
-- that channel and job had a message within the window (window_s, an hour by default):
-- those events wait, and go out together once the window has passed. A message is a digest
-- when it tells more than one event or events the window held back (a message of the same
-- channel and job came less than a window before its first event). SKIP LOCKED: an event
-- a trigger's transaction holds is the next turn's. Returns the messages made.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
waiting AS MATERIALIZED (
    SELECT e.id, e.tenant_id, e.channel_id, e.job_id, e.kind, e.run_id, e.detail,
           e.occurred_at
    FROM notice_events AS e
    WHERE e.message_id IS NULL
    ORDER BY e.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), grouped AS (
    SELECT w.tenant_id, w.channel_id, w.job_id, count(*) AS events,
           min(w.occurred_at) AS first_at,
           jsonb_agg(jsonb_build_object('kind', w.kind, 'run_id', w.run_id,
                                        'detail', w.detail, 'occurred_at', w.occurred_at)
                     ORDER BY w.id) AS told
    FROM waiting AS w
    GROUP BY w.tenant_id, w.channel_id, w.job_id
), ready AS (
    SELECT g.tenant_id, g.channel_id, g.job_id, g.told,
           g.events > 1 OR EXISTS (
               SELECT FROM notice_messages AS m
               WHERE m.channel_id = g.channel_id AND m.job_id = g.job_id
                 AND m.created_at > g.first_at - make_interval(secs => %(window_s)s)
           ) AS digest
    FROM grouped AS g, clock
    WHERE NOT EXISTS (
        SELECT FROM notice_messages AS m
        WHERE m.channel_id = g.channel_id AND m.job_id = g.job_id
          AND m.created_at > clock.now - make_interval(secs => %(window_s)s))
), made AS (
    INSERT INTO notice_messages (tenant_id, channel_id, job_id, digest, events,
                                 next_attempt_at, created_at)
    SELECT r.tenant_id, r.channel_id, r.job_id, r.digest, r.told, clock.now, clock.now
    FROM ready AS r, clock
    RETURNING id, channel_id, job_id
), told AS (
    UPDATE notice_events AS e SET message_id = made.id
    FROM waiting AS w JOIN made ON made.channel_id = w.channel_id AND made.job_id = w.job_id
    WHERE e.id = w.id
)
SELECT id FROM made;

-- name: claim_notice_messages
-- The sender's claim: pending messages due now, their next attempt put off by lease_s while
-- this sender calls (a sender that dies mid-call leaves them due again then; another
-- leader's claim meanwhile passes over them). attempts counts the claims, and fences the
-- outcome's write (record_notice_sent, record_notice_failure). With what the call needs: the
-- channel, the tenant's name and signing secret, the job's key.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
due AS MATERIALIZED (
    SELECT m.id, m.tenant_id, m.channel_id, m.job_id
    FROM notice_messages AS m, clock
    WHERE m.status = 'pending' AND m.next_attempt_at <= clock.now
    ORDER BY m.next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE OF m SKIP LOCKED
)
UPDATE notice_messages AS m
SET attempts = m.attempts + 1,
    next_attempt_at = clock.now + make_interval(secs => %(lease_s)s)
FROM clock, due
JOIN notice_channels AS c ON c.id = due.channel_id
JOIN tenants AS t ON t.id = due.tenant_id
LEFT JOIN jobs AS j ON j.id = due.job_id
WHERE m.id = due.id
RETURNING m.id, m.tenant_id, t.name AS tenant, t.signing_secret, c.kind, c.address,
          m.job_id, j.key AS job_key, m.digest, m.events, m.attempts, m.created_at,
          now() AS db_now;

-- name: record_notice_sent
-- Delivered. Fenced by the claim's attempt count: a message another sender claimed since
-- is its business.
UPDATE notice_messages
SET status = 'sent', sent_at = coalesce(%(now)s::timestamptz, now()), last_error = NULL
WHERE id = %(id)s::bigint AND attempts = %(attempts)s::integer AND status = 'pending'
RETURNING id;

-- name: record_notice_failure
-- Not delivered: tried again after delay_s, or, when final, 'failed' for good (the tenant
-- sees it, with its last error). Fenced as record_notice_sent.
UPDATE notice_messages
SET status = CASE WHEN %(final)s::boolean THEN 'failed' ELSE 'pending' END,
    last_error = %(error)s::text,
    next_attempt_at = coalesce(%(now)s::timestamptz, now())
                      + make_interval(secs => %(delay_s)s::float8)
WHERE id = %(id)s::bigint AND attempts = %(attempts)s::integer AND status = 'pending'
RETURNING id;

-- name: list_notice_messages
-- A page of a tenant's messages, newest first (index notice_messages_tenant), strictly
-- before id `before`, of one status or all.
SELECT m.id, m.channel_id, c.kind AS channel_kind, c.address AS channel_address, m.job_id,
       m.digest, m.events, m.status, m.attempts, m.last_error, m.created_at,
       m.next_attempt_at, m.sent_at
FROM notice_messages AS m JOIN notice_channels AS c ON c.id = m.channel_id
WHERE m.tenant_id = %(tenant_id)s::bigint AND m.id < %(before)s::bigint
  AND (%(status)s::text IS NULL OR m.status = %(status)s::text)
ORDER BY m.id DESC
LIMIT %(limit)s;

-- name: count_held_notice_events
-- A tenant's events not yet in a message (the composer's next turn, or the window's end),
-- through its channels (index notice_events_waiting).
SELECT count(*) FROM notice_channels AS c
JOIN notice_events AS e ON e.channel_id = c.id AND e.message_id IS NULL
WHERE c.tenant_id = %(tenant_id)s::bigint;

-- name: prune_notice_messages
-- Messages sent or failed before the retention period, a bounded pass (index
-- notice_messages_finished); their events go with them (cascade).
DELETE FROM notice_messages
WHERE id IN (SELECT id FROM notice_messages
             WHERE status <> 'pending'
               AND created_at < now() - make_interval(days => %(days)s::integer)
             LIMIT 1000);
