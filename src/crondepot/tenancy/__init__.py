"""Tenants and what belongs to them: API tokens, grants of handlers and rate limits,
quotas, the webhook signing secret, and the audit log of who changed what.
"""
