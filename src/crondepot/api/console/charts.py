"""Charts as inline SVG geometry, computed here and drawn by the templates (no JavaScript).

A chart is a list of shapes in a fixed ``WIDTH`` x ``HEIGHT`` view box: stacked bars per
bucket, or lines through the buckets that have a sample. Labels are plain strings the
template escapes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

WIDTH = 640
HEIGHT = 180
LEFT = 48
RIGHT = 8
TOP = 10
BOTTOM = 22


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    css: str
    title: str


@dataclass(frozen=True, slots=True)
class Line:
    points: str
    css: str


@dataclass(frozen=True, slots=True)
class Tick:
    at: float
    label: str


@dataclass(slots=True)
class Chart:
    title: str
    unit: str
    legend: list[tuple[str, str]]
    bars: list[Bar] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    dots: list[tuple[float, float, str, str]] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    empty: bool = True
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom_y: int = HEIGHT - BOTTOM
    right_x: int = WIDTH - RIGHT


def _nice_max(value: float) -> float:
    """The smallest 1/2/5 x 10^n at or above ``value`` (1 for nothing)."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        candidate = step * 10.0**exponent
        if candidate >= value:
            return candidate
    return 10.0 ** (exponent + 1)


def _fmt(value: float) -> str:
    return f"{value:g}" if value < 1000 else f"{value / 1000:g}k"


def _axes(chart: Chart, top: float, labels: Sequence[str]) -> float:
    """Fill the ticks; return the width of one bucket."""
    plot_h = HEIGHT - TOP - BOTTOM
    chart.y_ticks = [Tick(HEIGHT - BOTTOM - plot_h * i / 4, _fmt(top * i / 4)) for i in range(5)]
    slot = (WIDTH - LEFT - RIGHT) / max(len(labels), 1)
    chart.x_ticks = [Tick(LEFT + slot * i + slot / 2, label)
                     for i, label in enumerate(labels) if i % 10 == 0 or i == len(labels) - 1]
    return slot


def _y(value: float, top: float) -> float:
    plot_h = HEIGHT - TOP - BOTTOM
    return HEIGHT - BOTTOM - plot_h * min(value, top) / top


def stacked_bars(title: str, unit: str, labels: Sequence[str],
                 series: Sequence[tuple[str, str, Sequence[int]]]) -> Chart:
    """One bar per label, the series stacked bottom-up: (name, css class, values)."""
    chart = Chart(title=title, unit=unit, legend=[(name, css) for name, css, _ in series])
    totals = [sum(values[i] for _, _, values in series) for i in range(len(labels))]
    top = _nice_max(max(totals, default=0))
    slot = _axes(chart, top, labels)
    chart.empty = not any(totals)
    for i, label in enumerate(labels):
        base = 0
        for name, css, values in series:
            value = values[i]
            if value:
                y_top, y_base = _y(base + value, top), _y(base, top)
                chart.bars.append(Bar(x=LEFT + slot * i + slot * 0.1, y=y_top, w=slot * 0.8,
                                      h=max(y_base - y_top, 0.5), css=css,
                                      title=f"{label}: {value} {name}"))
            base += value
    return chart


def lines(title: str, unit: str, labels: Sequence[str],
          series: Sequence[tuple[str, str, Sequence[float | None]]]) -> Chart:
    """One line per series through the buckets that have a value (a dot on each)."""
    chart = Chart(title=title, unit=unit, legend=[(name, css) for name, css, _ in series])
    seen = [v for _, _, values in series for v in values if v is not None]
    top = _nice_max(max(seen, default=0))
    slot = _axes(chart, top, labels)
    chart.empty = not seen
    for name, css, values in series:
        points: list[str] = []
        for i, value in enumerate(values):
            if value is None:
                continue
            x, y = LEFT + slot * i + slot / 2, _y(max(value, 0.0), top)
            points.append(f"{x:.1f},{y:.1f}")
            chart.dots.append((x, y, css, f"{labels[i]}: {name} {value:.2f} {unit}"))
        if len(points) > 1:
            chart.lines.append(Line(" ".join(points), css))
    return chart
