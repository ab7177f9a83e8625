-- name: admin_stats_queue
-- api_stats_queue across every tenant: what ``crondepot status`` shows without --tenant.
-- Reads the partial index runs_queued only.
SELECT priority,
       count(*) FILTER (WHERE available_at <= now()) AS ready,
       count(*) FILTER (WHERE available_at > now()) AS waiting,
       extract(epoch FROM now() - min(available_at) FILTER (WHERE available_at <= now()))
           ::float8 AS oldest_ready_seconds
FROM runs
WHERE status = 'queued'
GROUP BY priority;

-- name: admin_stats_lag
-- api_stats_lag across every tenant: start lag (first_claimed_at - due_at) of first attempts
-- claimed in the last 5 minutes; the created_at bound lets the BRIN index skip old runs.
SELECT count(*) AS samples,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) AS p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) AS p99
FROM (
    SELECT extract(epoch FROM first_claimed_at - due_at)::float8 AS lag
    FROM runs
    WHERE created_at >= now() - interval '1 day'
      AND first_claimed_at >= now() - interval '5 minutes'
) AS recent;

-- name: admin_stats_dead
-- Dead-letter size across every tenant; served by the partial index runs_dead.
SELECT count(*) FROM runs WHERE status = 'dead';
