-- The claim function's statements were planned again on every call. PL/pgSQL keeps a plan
-- per statement, but PostgreSQL's plan cache chooses, call by call, between a generic plan
-- and a custom one made for the parameter values; with LIMIT taken from a parameter the
-- custom plan always looked cheaper, so every claim re-planned its four or five statements.
-- perf over a two-worker drain: planning was about 30 % of the server's CPU per run, and the
-- drain went from 5,507 to 6,969 runs/s with this setting. The statements have one right
-- plan whatever the values (an index range scan per priority, primary-key lookups after),
-- and enable_seqscan = off (migration 0004) keeps a generic plan made while runs was small
-- on those indexes.
ALTER FUNCTION crondepot_claim_runs(text, integer[], integer[], timestamptz)
    SET plan_cache_mode = force_generic_plan;
