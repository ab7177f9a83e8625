"""What every long-running process shares: signal handling and back-off (``lifecycle``),
logging (``logs``), Prometheus metrics (``metrics``), and the demo tenant ``up --demo`` makes.
"""
