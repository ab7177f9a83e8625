-- name: database_exists
-- Bootstrap of the embedded server: is crondepot's own database there yet?
SELECT 1 FROM pg_database WHERE datname = 'crondepot';

-- name: create_database
CREATE DATABASE crondepot;
