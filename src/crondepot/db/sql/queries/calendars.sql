-- name: set_calendar
-- A tenant's calendar created or replaced whole; version counts the changes, so the ticks'
-- caches (keyed by tenant, name, version) never serve old dates.
INSERT INTO calendars AS c (tenant_id, name, dates)
VALUES (%(tenant_id)s::bigint, %(name)s::text, %(dates)s::date[])
ON CONFLICT (tenant_id, name) DO UPDATE
SET dates = excluded.dates, version = c.version + 1, updated_at = now()
WHERE c.dates IS DISTINCT FROM excluded.dates
RETURNING tenant_id, name, dates, version, created_at, updated_at;

-- name: get_calendar
-- One calendar of one tenant; another tenant's finds nothing, like an unknown name.
SELECT tenant_id, name, dates, version, created_at, updated_at
FROM calendars
WHERE tenant_id = %(tenant_id)s::bigint AND name = %(name)s::text;

-- name: list_calendars
-- A tenant's calendars by name (a tenant has a handful: no pagination).
SELECT tenant_id, name, dates, version, created_at, updated_at
FROM calendars
WHERE tenant_id = %(tenant_id)s::bigint
ORDER BY name;

-- name: lock_calendar
-- The calendar row locked for its delete: a job write naming it holds it FOR SHARE
-- (known_calendars) until it commits, so the delete's look for users, a statement after
-- this one, sees that job.
SELECT name FROM calendars
WHERE tenant_id = %(tenant_id)s::bigint AND name = %(name)s::text
FOR UPDATE;

-- name: delete_calendar
-- A locked calendar no live job names (calendar_users found none).
DELETE FROM calendars
WHERE tenant_id = %(tenant_id)s::bigint AND name = %(name)s::text;

-- name: calendar_users
-- The live jobs that name a calendar (at most a few, for a refusal's message).
SELECT id FROM jobs
WHERE tenant_id = %(tenant_id)s::bigint AND calendar ->> 'exclude' = %(name)s::text
  AND calendar IS NOT NULL AND active
ORDER BY id
LIMIT %(limit)s::integer;

-- name: known_calendars
-- Which of these names the tenant has calendars for (a job naming one is checked). FOR
-- SHARE until the job write commits: a delete of the calendar waits for it (lock_calendar).
SELECT name FROM calendars
WHERE tenant_id = %(tenant_id)s::bigint AND name = ANY (%(names)s::text[])
ORDER BY name
FOR SHARE;

-- name: nudge_calendar_jobs
-- A calendar changed: its live unpaused jobs are due now, so the next tick plans their next
-- fires with the new dates (a fire moved earlier by an added holiday must be written in
-- time; runs already written keep their due times).
UPDATE jobs
SET next_run_at = least(next_run_at, coalesce(%(now)s::timestamptz, now()))
WHERE tenant_id = %(tenant_id)s::bigint AND calendar ->> 'exclude' = %(name)s::text
  AND calendar IS NOT NULL AND active AND NOT paused AND next_run_at IS NOT NULL;

-- name: tick_calendars
-- The dates of the calendars a tick's claimed jobs name, in one statement (pairs of tenant
-- and name, by the primary key); the version lets the tick reuse the dates it has.
SELECT c.tenant_id, c.name, c.version, c.dates
FROM unnest(%(tenant_ids)s::bigint[], %(names)s::text[]) AS w(tenant_id, name)
JOIN calendars AS c ON c.tenant_id = w.tenant_id AND c.name = w.name;
