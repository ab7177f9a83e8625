"""What the command modules share: database and output options, the ``--tenant`` option,
how a JOB argument is resolved, how results are printed, and the command reference.
"""
