"""Workers: claim runs, call targets, record outcomes."""
