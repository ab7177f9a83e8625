-- name: take_tokens
-- Take up to %(want)s tokens from a named bucket, refilled at rate_per_second up to burst.
-- The row lock serialises takers across every worker on every host; workers take a few
-- tokens at a time so this row is touched a few dozen times a second, not once per call.
-- A worker may spend a token up to %(hold)s seconds after taking it, so the bucket holds
-- that much less than its burst: then calls in any window of T seconds stay within
-- burst + rate * T, however the holding falls.
-- The refill clock only moves forward: a taker that waited for the row lock has an older
-- clock reading than the one before it, and moving refilled_at back would grant the same
-- interval twice.
-- shared: the operator's bucket (no owning tenant), whose name may label a metric.
-- ceiling: the most the bucket holds, so a taker that waits for tokens to gather never
-- waits for more than it can hold (those past the ceiling would be lost).
-- The take commits without waiting for its WAL flush (synchronous_commit off for this
-- statement's transaction only, set by the "durable" subquery; run it on its own, never
-- inside a transaction that writes what must survive): the row lock lasts until the
-- commit, and no taker of the bucket may queue behind a disk write. A crash can lose only
-- the last takes: the bucket comes back older, never above its burst, and at most the takes
-- of the last 3 × wal_writer_delay are granted again (docs/worker.md, "Rate limits").
WITH c AS (
    SELECT name, rate_per_second, greatest(refilled_at, clock_timestamp()) AS at,
           tokens + rate_per_second
           * greatest(0, extract(epoch FROM clock_timestamp() - refilled_at)) AS refilled,
           greatest(1, burst - rate_per_second * %(hold)s::float8) AS ceiling
    FROM rate_limits,
         (SELECT set_config('synchronous_commit', 'off', true) OFFSET 0) AS durable
    WHERE name = %(name)s
    FOR UPDATE OF rate_limits
), b AS (
    SELECT name, rate_per_second, at, ceiling, least(ceiling, refilled) AS available FROM c
), g AS (
    SELECT name, rate_per_second, available, at, ceiling,
           greatest(0, least(%(want)s::float8, floor(available)))::integer AS granted
    FROM b
)
UPDATE rate_limits AS r
SET tokens = g.available - g.granted, refilled_at = g.at
FROM g
WHERE r.name = g.name
RETURNING g.granted, g.available - g.granted AS remaining, g.rate_per_second,
          r.tenant_id IS NULL AS shared, g.ceiling;

-- name: upsert_rate_limit
INSERT INTO rate_limits (name, rate_per_second, burst, tokens)
VALUES (%(name)s, %(rate)s, %(burst)s, %(burst)s)
ON CONFLICT (name) DO UPDATE
SET rate_per_second = excluded.rate_per_second, burst = excluded.burst,
    tokens = least(rate_limits.tokens, excluded.burst)
RETURNING name, rate_per_second, burst;

-- name: list_rate_limits
-- Every bucket, with the tenant owning it (NULL: shared, granted by the operator).
SELECT r.name, r.rate_per_second, r.burst, t.name
FROM rate_limits AS r LEFT JOIN tenants AS t ON t.id = r.tenant_id
ORDER BY r.name;

-- name: rate_limit_burst
-- A bucket's burst, so `limits set NAME RATE` without --burst keeps it (nothing: new bucket).
SELECT burst FROM rate_limits WHERE name = %(name)s;
