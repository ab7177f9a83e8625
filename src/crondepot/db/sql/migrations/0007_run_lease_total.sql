-- A run's total lease time, over all its attempts, is capped (design §6: default 12 h). The
-- heartbeat used to cap each attempt at 12 h from its own start, so a run whose calls hung
-- could hold leases for max_attempts x 12 h. lease_used is the lease time of the run's ended
-- attempts: added when an attempt ends by a retry or by its lease expiring, reset by a
-- replay. The heartbeat caps the running attempt at what is left, and the reaper sends a
-- run that has used it all to the dead letter, for a person to look at.
-- A constant default: PostgreSQL 11+ adds the column without rewriting the table.
ALTER TABLE runs ADD COLUMN lease_used interval NOT NULL DEFAULT interval '0';
