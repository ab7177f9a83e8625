"""What every long-running process shares: signal handling and back-off (``lifecycle``),
logging (``logs``), Prometheus metrics (``metrics``), OpenTelemetry traces (``tracing``; the
SDK behind it, ``otel``, only when on), and the demo tenant ``up --demo`` makes.
"""
