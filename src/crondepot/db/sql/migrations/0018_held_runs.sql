-- Holds take their runs out of the claim's ready range (issue 17 holds, holds.py). A queued
-- run whose job a hold names is moved to available_at = 'infinity', its own ready time kept
-- here; the release puts it back (for runs no other hold still names). So the claim's scans
-- of runs_queued, which stop at available_at <= now, never walk a held backlog: a hold over
-- 100,000 queued runs cost every claim about a second before this. NULL whenever the run
-- is not moved out (every path that ends a queued run puts the time back). Nullable, no
-- default: adding it rewrites nothing.
ALTER TABLE runs ADD COLUMN held_available_at timestamptz;
