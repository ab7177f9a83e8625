"""The forecast: a tenant's runs over the next hours set against its rate limits.

    fires.py   the runs one group of identical jobs writes, by the scheduler's own plan (pure)
    drain.py   how a token bucket sends a stream of runs, in the claim's order (pure)
    report.py  the tenant's groups, queued runs, buckets and holds read in one snapshot
    text.py    the forecast in lines for people (the CLI and the console)
"""
