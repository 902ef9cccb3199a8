"""Inline SVG charts for the report and the console: horizontal bars whose labels cannot collide.

Each bar has a row of its own and its value is written just past its end, inside a right margin
wide enough for the longest value; a group's label sits in its own column on the left, wrapped
to a few lines, and its block is as tall as its bars or its lines, whichever is taller. Nothing
is placed where anything else can be, so "100.0%100.0%" cannot happen. A chart with nothing to
draw says so in words instead of drawing an empty frame.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

from markupsafe import Markup

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

ROW, ROW_GAP, BLOCK_GAP, LINE = 14, 3, 12, 15
LABEL_W, PLOT_W, TOP, BOTTOM = 170, 340, 8, 26
VALUE_FONT, LABEL_FONT = 10, 11
CHAR_W = 0.62
"""Upper bound of a character's width in ems for the fonts used (digits, letters, %, $)."""


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def fmt_number(v: float | None) -> str:
    if v is None:
        return "n/a"
    return str(v) if isinstance(v, int) else f"{v:.2f}"


def nice_ceiling(x: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``x`` (1 for x <= 0)."""
    if x <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(x))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= x * (1 - 1e-12))


def wrap(text: str, width: int = 22) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def text_width(text: str, font: float) -> float:
    return len(text) * font * CHAR_W


def hbars(title: str, groups: Sequence[str], series: Sequence[str],
          values: Sequence[Sequence[float | None]], *, x_max: float | None = None,
          fmt: Callable[[float | None], str] = fmt_number) -> Markup:
    """One block per group, one bar per series (``values[group][series]``), the value written
    past each bar's end; a missing value is written "n/a" where its bar would start."""
    known = [v for row in values for v in row if v is not None]
    top_value = x_max if x_max is not None else nice_ceiling(max(known, default=0.0))
    labels = [[fmt(v) for v in row] for row in values]
    value_w = max([text_width(t, VALUE_FONT) for row in labels for t in row] + [24.0]) + 8
    width = LABEL_W + PLOT_W + value_w
    out: list[str] = []
    y = TOP
    for g, group in enumerate(groups):
        lines = wrap(group)[:4]
        bars_h = len(series) * (ROW + ROW_GAP) - ROW_GAP
        block = max(bars_h, len(lines) * LINE)
        first = y + (block - len(lines) * LINE) / 2 + LINE - 3
        for i, line in enumerate(lines):
            out.append(f'<text x="{LABEL_W - 8}" y="{first + i * LINE:.1f}" text-anchor="end" '
                       f'font-size="{LABEL_FONT}">{esc(line)}</text>')
        by = y + (block - bars_h) / 2
        for s, name in enumerate(series):
            v, label = values[g][s], labels[g][s]
            row_y = by + s * (ROW + ROW_GAP)
            w = 0.0 if v is None or not top_value else PLOT_W * min(max(v / top_value, 0.0), 1.0)
            if v is not None:
                out.append(f'<rect x="{LABEL_W}" y="{row_y:.1f}" width="{w:.1f}" height="{ROW}" '
                           f'fill="{colour(s)}"><title>{esc(name)}: {esc(label)}</title></rect>')
            out.append(f'<text x="{LABEL_W + w + 4:.1f}" y="{row_y + ROW - 3:.1f}" '
                       f'font-size="{VALUE_FONT}" fill="{"#888" if v is None else "#222"}">'
                       f'{esc(label)}<title>{esc(name)}: {esc(label)}</title></text>')
        y += block + BLOCK_GAP
    base = y - BLOCK_GAP + 6
    for k in range(5):
        x = LABEL_W + PLOT_W * k / 4
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{base:.1f}" '
                   f'stroke="#e4e4e4"/><text x="{x:.1f}" y="{base + 14:.1f}" text-anchor="middle"'
                   f' font-size="{VALUE_FONT}" fill="#555">{esc(fmt(top_value * k / 4))}</text>')
    height = base + BOTTOM
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{esc(title)}" '
            f'font-family="system-ui,sans-serif" class="chart"><title>{esc(title)}</title>')
    # gridlines first, so bars and labels are drawn over them
    grid = [p for p in out if p.startswith("<line")]
    rest = [p for p in out if not p.startswith("<line")]
    return Markup(head + "".join(grid + rest) + "</svg>")


def legend(series: Sequence[str]) -> Markup:
    items = "".join(f'<span class="swatch" style="background:{colour(i)}"></span>{esc(s)} '
                    for i, s in enumerate(series))
    return Markup(f'<p class="key">{items}</p>')


class NoData(Markup):
    """A chart that had nothing to draw, in words."""


def no_data(message: str) -> NoData:
    """What a chart says when there is nothing to draw."""
    return NoData(f'<p class="empty">{esc(message)}</p>')
