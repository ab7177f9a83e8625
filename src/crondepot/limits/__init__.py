"""Limits on how fast runs leave the queue: named token buckets shared by every worker
(``buckets``) and holds on a tenant's queued runs of one bucket or one target host (``holds``).
"""
