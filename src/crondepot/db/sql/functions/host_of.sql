-- revision: 1
-- crondepot_host_of: the host an http target calls, lowercased (an IPv6 address keeps
-- its brackets); NULL for a python target. One home for the rule: the bulk filters
-- (queries/bulk.sql) and the claim's holds (functions/claim_runs.sql) both read it. The URL
-- was checked when the job was written (job/url.py): a scheme, no credentials, then the host.
CREATE OR REPLACE FUNCTION crondepot_host_of(p_target jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lower(substring(p_target ->> 'url'
                           FROM '^[A-Za-z][A-Za-z0-9+.-]*://(\[[^]]*\]|[^:/?#]+)'))
$$;
