-- Failure notices to tenants (issue 35, item 3; docs/notices.md): a tenant's notification
-- channels, the outbox of what happened to its jobs, and the messages sent from it.
--
-- notice_events is the outbox: a row per event and channel, written by triggers
-- (functions/notice_jobs.sql, notice_runs.sql) in the transaction that changes the job or
-- the run, so an event is committed with its cause or not at all, whichever statement made
-- the change. The maintenance leader composes the events into notice_messages (at most one
-- message per channel and job an hour: the ones held meanwhile go out together as a digest)
-- and sends them, retrying with backoff. Expand only: new tables; the triggers come with
-- their functions.
CREATE TABLE notice_channels (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  bigint NOT NULL REFERENCES tenants (id),
    kind       text NOT NULL CONSTRAINT notice_channels_kind_check
                   CHECK (kind = ANY (ARRAY['webhook'::text, 'email'::text])),
    -- the webhook's URL or the e-mail address, checked by notices/channels.py
    address    text NOT NULL CHECK (length(address) <= 2048),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, kind, address)
);

CREATE TABLE notice_messages (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       bigint NOT NULL REFERENCES tenants (id),
    channel_id      bigint NOT NULL REFERENCES notice_channels (id) ON DELETE CASCADE,
    job_id          bigint NOT NULL,
    digest          boolean NOT NULL,
    -- what the message tells, fixed when it is composed: [{kind, run_id, detail, occurred_at}]
    events          jsonb NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CONSTRAINT notice_messages_status_check
                        CHECK (status = ANY (ARRAY['pending'::text, 'sent'::text,
                                                   'failed'::text])),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    created_at      timestamptz NOT NULL,
    sent_at         timestamptz
);
-- the sender's claim: pending messages by when they are due
CREATE INDEX notice_messages_due ON notice_messages (next_attempt_at) WHERE status = 'pending';
-- the window: the latest message of a channel and job
CREATE INDEX notice_messages_window ON notice_messages (channel_id, job_id, created_at);
-- the tenant's list, newest first
CREATE INDEX notice_messages_tenant ON notice_messages (tenant_id, id);
-- the pruner: finished messages by age
CREATE INDEX notice_messages_finished ON notice_messages (created_at) WHERE status <> 'pending';

CREATE TABLE notice_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   bigint NOT NULL REFERENCES tenants (id),
    channel_id  bigint NOT NULL REFERENCES notice_channels (id) ON DELETE CASCADE,
    job_id      bigint NOT NULL,
    kind        text NOT NULL CONSTRAINT notice_events_kind_check
                    CHECK (kind = ANY (ARRAY['job_unhealthy'::text, 'run_dead'::text,
                                             'job_ended'::text])),
    run_id      text,
    detail      text NOT NULL,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    -- the message that tells it; NULL while it waits (the composer, or the hour's window)
    message_id  bigint REFERENCES notice_messages (id) ON DELETE CASCADE
);
CREATE INDEX notice_events_waiting ON notice_events (channel_id, job_id)
    WHERE message_id IS NULL;
CREATE INDEX notice_events_message ON notice_events (message_id);

-- Row-level security as for every tenant table (migration 0021).
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['notice_channels', 'notice_messages', 'notice_events']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format($p$
            CREATE POLICY tenant_rows ON %I
            USING ((SELECT current_setting('crondepot.tenant_id', true) = 'all')
                   OR tenant_id = (SELECT nullif(nullif(
                          current_setting('crondepot.tenant_id', true), 'all'), '')::bigint))
        $p$, t);
    END LOOP;
END
$$;
