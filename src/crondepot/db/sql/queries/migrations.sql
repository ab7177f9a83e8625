-- name: create_schema_migrations
-- The record of applied migrations; created by the runner itself before anything else.
CREATE TABLE IF NOT EXISTS crondepot_schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- name: lock_migrations
-- One migrator at a time, across every process and host: a session advisory lock that
-- waits, so a second `crondepot migrate` finds the work done when it gets its turn.
SELECT pg_advisory_lock(7301847220451893277);

-- name: unlock_migrations
SELECT pg_advisory_unlock(7301847220451893277);

-- name: safe_search_path
-- First in every migration's and definition's transaction: the schema, then pg_catalog,
-- then pg_temp. A SECURITY DEFINER function written SET search_path FROM CURRENT keeps
-- this, so a temporary table of the runtime role (named audit_log, runs) can never stand in
-- for the real one inside it; with the default path pg_temp is searched first.
SELECT set_config('search_path', format('%I, pg_catalog, pg_temp', current_schema()), true);

-- name: applied_migrations
SELECT version, name, checksum FROM crondepot_schema_migrations ORDER BY version;

-- name: record_migration
INSERT INTO crondepot_schema_migrations (version, name, checksum)
VALUES (%(version)s, %(name)s, %(checksum)s);

-- name: schema_migrations_exists
SELECT to_regclass('crondepot_schema_migrations') IS NOT NULL;

-- name: create_schema_definitions
-- The record of applied definitions (db/sql/functions/*.sql): each is applied when its file's
-- revision is higher than the one recorded here (db/migrations.py says why).
CREATE TABLE IF NOT EXISTS crondepot_schema_definitions (
    name        text PRIMARY KEY,
    revision    integer NOT NULL,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- name: applied_definitions
SELECT name, revision, checksum FROM crondepot_schema_definitions;

-- name: record_definition
INSERT INTO crondepot_schema_definitions (name, revision, checksum)
VALUES (%(name)s, %(revision)s, %(checksum)s)
ON CONFLICT (name) DO UPDATE
SET revision = excluded.revision, checksum = excluded.checksum, applied_at = now();

-- name: schema_definitions_exists
SELECT to_regclass('crondepot_schema_definitions') IS NOT NULL;
