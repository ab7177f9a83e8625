-- A restored database forgets the runs written after its restore point, while the targets
-- remember them: started as it is, crondepot would write those fires again with the same
-- run ids and send them late, a second time (docs/operations.md, "Restoring from a backup").
-- These two tables let crondepot notice a restore before it sends anything.

-- Where crondepot has run: the PostgreSQL cluster (pg_control_system's system identifier,
-- new for a cluster restored with pg_dump) and its WAL timeline (one more after every
-- point-in-time restore, and after every promotion of a standby), with the last time a
-- crondepot process said it was there. The maintenance leader refreshes its row every few
-- seconds, so the newest row a restored database holds dates its restore point.
CREATE TABLE crondepot_cluster_marks (
    system_identifier  bigint NOT NULL,
    timeline_id        integer NOT NULL,
    first_seen_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (system_identifier, timeline_id)
);

-- A restore crondepot noticed: it found itself on another cluster or timeline than its
-- newest mark, and that mark older than the gap a failover leaves. Until the operator
-- resolves it (`crondepot db restored --skip-repeats | --resend`), every scheduler, worker
-- and API process refuses to start. One row per cluster and timeline.
CREATE TABLE crondepot_restores (
    id                 bigserial PRIMARY KEY,
    detected_at        timestamptz NOT NULL DEFAULT now(),
    system_identifier  bigint NOT NULL,
    timeline_id        integer NOT NULL,
    last_seen_at       timestamptz NOT NULL,     -- the newest mark the restored data holds
    resolved_at        timestamptz,
    resolved_by        text,
    resolution         text CHECK (resolution IN ('skip_repeats', 'resend')),
    runs_skipped       integer,
    UNIQUE (system_identifier, timeline_id),
    CHECK ((resolved_at IS NULL) = (resolution IS NULL))
);
