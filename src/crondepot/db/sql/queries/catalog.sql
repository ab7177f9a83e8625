-- The catalog of the public schema, in a form two databases can be compared by: what a fresh
-- `crondepot migrate` builds against what db/sql/schema.sql builds (tests/integration/
-- test_schema_file.py). Privileges and rows are left out: schema.sql is for reading.

-- name: schema_columns
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       coalesce(pg_get_expr(d.adbin, d.adrelid), ''), a.attidentity, a.attgenerated
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm') AND a.attnum > 0
  AND NOT a.attisdropped
ORDER BY 1, 2;

-- name: schema_constraints
SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
WHERE n.nspname = 'public'
ORDER BY 1, 2;

-- name: schema_indexes
SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'
ORDER BY 1, 2;

-- name: schema_functions
SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid),
       md5(p.prosrc), p.provolatile, p.prosecdef, coalesce(p.proconfig::text, '')
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'public'
ORDER BY 1, 2;

-- name: schema_triggers
SELECT t.tgrelid::regclass::text, t.tgname, pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND NOT t.tgisinternal
ORDER BY 1, 2;

-- name: schema_views
SELECT viewname, md5(definition) FROM pg_views WHERE schemaname = 'public' ORDER BY 1;

-- name: schema_sequences
SELECT sequencename, data_type::text, increment_by, min_value, max_value
FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1;

-- name: schema_relation_options
SELECT c.relname, c.relkind::text, coalesce(c.reloptions::text, '')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'i', 'S')
ORDER BY 1;
