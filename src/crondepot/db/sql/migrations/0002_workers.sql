-- Worker processes announce themselves and beat here, so operators (metrics, status, the
-- console) can see which workers are alive and how long since each was heard from.
CREATE TABLE workers (
    name          text PRIMARY KEY,
    host          text NOT NULL,
    pid           integer NOT NULL,
    concurrency   integer NOT NULL,
    busy          integer NOT NULL DEFAULT 0,
    started_at    timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now(),
    stopped_at    timestamptz
);
