"""Reading what a crondepot process serves on its Prometheus port."""

from __future__ import annotations

from urllib.request import urlopen


def served_metric(port: int, name: str) -> float:
    """The value of an unlabelled sample (e.g. a counter's ``…_total``) the process on
    ``port`` serves."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values = [s.value for family in text_string_to_metric_families(text)
              for s in family.samples if s.name == name]
    assert len(values) == 1, f"{name}: {values}"
    return float(values[0])
