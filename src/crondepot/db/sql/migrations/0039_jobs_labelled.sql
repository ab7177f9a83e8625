-- jobs_labels held an entry for every job, labelled or not: a GIN index stores an "empty
-- item" for '{}'. The scheduler's advance of a job is not a HOT update (next_run_at is
-- indexed), so every fire of every unlabelled job paid a GIN insert and its WAL record.
-- Only labelled jobs are in the new index; a selector is never '{}' there
-- (functions/labelled_jobs.sql answers an empty one without it). Built without CONCURRENTLY, as 0038: it reads the
-- labelled jobs once and blocks writes to jobs meanwhile.
CREATE INDEX jobs_labelled ON jobs USING gin (labels jsonb_path_ops)
    WHERE labels <> '{}'::jsonb;
DROP INDEX jobs_labels;
