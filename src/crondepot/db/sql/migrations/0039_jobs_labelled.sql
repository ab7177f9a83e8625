-- jobs_labels held an entry for every job, labelled or not: a GIN index stores an "empty
-- item" for '{}'. The scheduler's advance of a job is not a HOT update (next_run_at is
-- indexed), so every fire of every unlabelled job paid a GIN insert: one WAL record of
-- six and about 170 of 1,900 bytes a run in bench/scheduler.py (issue 34). Only labelled
-- jobs are in the new index; a selector is never '{}' there (functions/labelled_jobs.sql
-- answers an empty one without it). Built without CONCURRENTLY, as 0038: it reads the
-- labelled jobs once and blocks writes to jobs meanwhile.
CREATE INDEX jobs_labelled ON jobs USING gin (labels jsonb_path_ops)
    WHERE labels <> '{}'::jsonb;
DROP INDEX jobs_labels;
