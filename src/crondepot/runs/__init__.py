"""Runs once they exist: the reads the API, CLI and console serve, attempt history, the dead
letter and its replay, retention, and the JSON renderings they share.
"""
