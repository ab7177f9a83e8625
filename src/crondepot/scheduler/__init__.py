"""The scheduler: the tick that turns due fires into runs (``tick``, ``plan``), the loop a
scheduler copy runs (``loop``), and the ledger rule checked (``ledger``).
"""
