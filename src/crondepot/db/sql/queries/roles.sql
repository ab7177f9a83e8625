-- name: runtime_role_exists
-- Does the runtime role exist yet (roles are the server's, not one database's)?
SELECT 1 FROM pg_roles WHERE rolname = %(role)s;

-- name: create_runtime_role
-- A role that may log in and nothing more: no superuser, no CREATEDB, no CREATEROLE. What
-- it may do in crondepot's database is granted by grant_runtime. The password clause, when
-- there is one, carries a SCRAM verifier computed by libpq on this host, so the password
-- itself never reaches the server or its logs.
CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE {password};

-- name: set_runtime_password
-- --runtime-password on a role that exists: its password becomes this one (a verifier, as
-- create_runtime_role).
ALTER ROLE {role} {password};

-- name: runtime_role_powers
-- What would let the runtime role change the schema or the audit log despite its grants:
-- being a superuser; CREATEROLE (it could make itself a member of the owner); being, or being
-- a member of, the owner of the database, of the schema (a schema's owner may drop what is
-- in it), or of any table or function in it (an owner may ALTER it, disable its triggers,
-- replace the audit trigger functions); membership of pg_write_all_data (UPDATE and DELETE
-- on every table, audit_log included); and CREATE in the schema. MEMBER, not USAGE: a
-- member may SET ROLE to the owner even without inheriting its rights.
SELECT r.rolname = current_user AS is_migrator,
       r.rolsuper AS superuser,
       r.rolcreaterole AS createrole,
       pg_has_role(r.oid, 'pg_write_all_data', 'MEMBER') AS writes_all_data,
       pg_has_role(r.oid, d.datdba, 'MEMBER') AS owns_database,
       pg_has_role(r.oid, n.nspowner, 'MEMBER') AS owns_schema,
       array(SELECT c.relname::text FROM pg_class c
             WHERE c.relnamespace = n.oid AND pg_has_role(r.oid, c.relowner, 'MEMBER')
             UNION ALL
             SELECT p.proname::text || '()' FROM pg_proc p
             WHERE p.pronamespace = n.oid AND pg_has_role(r.oid, p.proowner, 'MEMBER')
             ORDER BY 1) AS owns,
       has_schema_privilege(r.oid, n.oid, 'CREATE') AS creates_in_schema
FROM pg_roles r, pg_database d, pg_namespace n
WHERE r.rolname = %(role)s AND d.datname = current_database() AND n.nspname = current_schema();

-- name: where_objects_live
-- The database and schema migrate put crondepot's tables in (its connection's first schema).
SELECT current_database(), current_schema();

-- name: grant_runtime
-- Everything the API, schedulers, workers and operator commands need, and nothing more,
-- granted on every table, sequence and function of the schema as it is after this migrate
-- (so the tables later migrations add are covered without naming them here). Revoked first,
-- so a role taken with --runtime-role loses what it was given beyond this.
-- * Tables: SELECT, INSERT, UPDATE, DELETE (never TRUNCATE, REFERENCES or TRIGGER).
-- * audit_log: SELECT only. Its triggers and crondepot_audit_summary write it as the owner
--   (SECURITY DEFINER, migration 0020), so the runtime role neither needs INSERT nor may
--   add an entry of its own making; UPDATE and DELETE are refused by the privilege system
--   before the append-only trigger is even reached.
-- * The migration records: SELECT only (processes check that the schema is current).
-- * Sequences: USAGE, SELECT (nextval for job ids), not UPDATE (setval).
-- * Functions: EXECUTE (the claim, record and audit functions; PUBLIC has it by default).
-- * Database: CONNECT, and TEMPORARY for the import's staging table (PUBLIC has both by
--   default; an operator may have revoked them).
-- * Schema: USAGE; CREATE is revoked from the role and from PUBLIC (PostgreSQL 15's own
--   default; a cluster upgraded from an older version may still grant it to PUBLIC).
-- Default privileges make a table created by this role later (a migration applied by hand)
-- usable by the runtime role the moment it is committed; the next migrate re-grants as above.
-- Nothing is owned by the runtime role: ownership is what allows ALTER TABLE.
GRANT CONNECT, TEMPORARY ON DATABASE {database} TO {role};
GRANT USAGE ON SCHEMA {schema} TO {role};
REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC, {role};
REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role};
REVOKE INSERT, UPDATE, DELETE ON {schema}.audit_log FROM {role};
REVOKE INSERT, UPDATE, DELETE ON {schema}.crondepot_schema_migrations,
                                 {schema}.crondepot_schema_definitions FROM {role};
REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {role};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {schema} TO {role};
ALTER DEFAULT PRIVILEGES IN SCHEMA {schema}
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role};
ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT USAGE, SELECT ON SEQUENCES TO {role};
