"""The evaluation report as one self-contained HTML page: tables and inline SVG, no JavaScript.

Every piece of text from a run (server names, case ids, review reasons) is escaped here; the
charts are drawn by :func:`grouped_bars`, one colour per server throughout the page.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from tether.eval.cases import FAILURE_CLASSES

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

RATES: tuple[tuple[str, str], ...] = (
    ("grounding_precision", "grounding precision"),
    ("grounding_recall", "grounding recall"),
    ("definition_match_rate", "definition match rate"),
    ("freshness_pass_rate", "freshness pass rate"),
    ("policy_violation_rate", "policy violation rate"),
)
# (field, label, how it is computed) for the side-by-side table.
METRIC_ROWS: tuple[tuple[str, str, str], ...] = (
    ("cases", "cases", "labelled cases"),
    ("correct", "correct", "cases answered correctly"),
    ("correct_and_grounded", "correct and grounded", "correct for the right reason"),
    ("correct_grounded_and_fresh", "correct, grounded and fresh",
     "correct and grounded, with no failed freshness check"),
    ("grounding_precision", "grounding precision", "mean over cases with a value"),
    ("grounding_recall", "grounding recall", "mean over cases with a value"),
    ("definition_match_rate", "definition match rate", "over cases with a gold definition"),
    ("freshness_pass_rate", "freshness pass rate", "over cases with a freshness bound"),
    ("policy_violation_rate", "policy violation rate",
     "calls that returned a row or column the user may not see / all calls"),
    ("clarification_loops_per_task", "clarification loops per task",
     "questions asked instead of calling a tool / cases"),
    ("cost_total_usd", "total cost", "every case's tokens, priced"),
    ("cost_per_correct_answer_usd", "cost per correct answer",
     "total cost / cases correct and grounded"),
    ("needs_human_review", "needs human review", "cases the labeller was unsure about"),
)

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1100px;
 padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.25em .6em;
 text-align:left;vertical-align:top}td.num{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f4f4f4}.how{color:#666;font-size:.85em}.note{color:#555;font-size:.9em}
svg{max-width:100%;height:auto;display:block;margin:.5em 0}.key span{display:inline-block;
 width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:-.1em}
td.ok{background:#d9f2df}td.ungrounded{background:#fff0c2}td.wrong{background:#fbd9d9}
td.unknown{background:#eee}td.none{background:#fff;color:#999}.review{font-weight:bold;color:#8a4b00}
.warn{background:#fff6e0;border-left:4px solid #e69f00;padding:.4em .8em}
"""


def esc(value: object) -> str:
    """Text for HTML, quotes included."""
    return escape(str(value), quote=True)


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def fmt_rate(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.1f}%"


def fmt_usd(v: float | None) -> str:
    if v is None:
        return "n/a"
    # Three significant digits below a dollar (local models cost fractions of a cent), cents above.
    decimals = 2 if v == 0 or abs(v) >= 1 else max(2, 2 - math.floor(math.log10(abs(v))))
    return f"${v:,.{decimals}f}"


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


def _wrap(text: str, width: int = 18) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def grouped_bars(title: str, groups: Sequence[str], series: Sequence[str],
                 values: Sequence[Sequence[float | None]], *, y_max: float | None = None,
                 fmt: Callable[[float | None], str] = fmt_number) -> str:
    """An SVG bar chart: one cluster per group, one bar per series (``values[group][series]``);
    a missing value is drawn as "n/a" on the axis."""
    bar, gap, plot_h, left, top, bottom = 26, 28, 200, 56, 24, 56
    known = [v for row in values for v in row if v is not None]
    top_value = y_max if y_max is not None else nice_ceiling(max(known, default=0.0))
    cluster = max(len(series) * bar + gap, 120)
    width = left + cluster * len(groups) + 10
    height = top + plot_h + bottom
    base = top + plot_h
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="{esc(title)}" font-size="11" '
           f'font-family="system-ui,sans-serif"><title>{esc(title)}</title>']
    for k in range(5):
        t = top_value * k / 4
        y = base - plot_h * k / 4
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#555">{esc(fmt(t))}</text>')
    for g, group in enumerate(groups):
        x0 = left + g * cluster + (cluster - len(series) * bar) / 2
        for s, name in enumerate(series):
            v = values[g][s]
            x = x0 + s * bar
            cx = x + (bar - 4) / 2
            if v is None:
                out.append(f'<text x="{cx:.1f}" y="{base - 4}" text-anchor="middle" fill="#888" '
                           f'font-size="9">n/a<title>{esc(name)}: n/a</title></text>')
                continue
            h = plot_h * min(max(v / top_value, 0.0), 1.0) if top_value else 0.0
            out.append(f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{bar - 4}" height="{h:.1f}" '
                       f'fill="{colour(s)}"><title>{esc(name)}: {esc(fmt(v))}</title></rect>'
                       f'<text x="{cx:.1f}" y="{base - h - 3:.1f}" text-anchor="middle" '
                       f'font-size="9">{esc(fmt(v))}</text>')
        for i, line in enumerate(_wrap(group)):
            out.append(f'<text x="{left + g * cluster + cluster / 2:.1f}" y="{base + 16 + 13 * i}" '
                       f'text-anchor="middle">{esc(line)}</text>')
    out.append(f'<line x1="{left}" y1="{base}" x2="{width - 10}" y2="{base}" stroke="#333"/></svg>')
    return "".join(out)


def legend(series: Sequence[str]) -> str:
    items = "".join(f'<span style="background:{colour(i)}"></span>{esc(s)}' for i, s in enumerate(series))
    return f'<p class="key">{items}</p>'


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table from escaped header text and cells that are already HTML (``<td>...</td>``)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt_field(key: str, v: Any) -> str:
    if key.endswith("_usd"):
        return fmt_usd(v)
    if key.endswith("_rate") or key.startswith("grounding_"):
        return fmt_rate(v)
    return fmt_number(v)


def _metrics_section(report: Sequence[Mapping[str, Any]], meta: Sequence[Mapping[str, Any]]) -> str:
    servers = [o["server"] for o in report]
    def cell(key: str, o: Mapping[str, Any], m: Mapping[str, Any]) -> str:
        n = m.get("denominators", {}).get(key)
        of = f"<div class='how'>n = {n}</div>" if n is not None else ""  # the denominator
        return f'<td class="num">{esc(_fmt_field(key, o[key]))}{of}</td>'

    rows = [[f"<th>{esc(label)}<div class='how'>{esc(how)}</div></th>",
             *(cell(key, o, m) for o, m in zip(report, meta, strict=True))]
            for key, label, how in METRIC_ROWS]
    extra: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
        ("run_id", "run", str), ("agent", "agent", str), ("model", "model", str),
        ("correct_rate", "correct rate", fmt_rate), ("tool_calls", "tool calls", fmt_number),
        ("turns", "turns", fmt_number), ("input_tokens", "input tokens", fmt_number),
        ("output_tokens", "output tokens", fmt_number))
    for key, label, f in extra:
        rows.append([f"<th>{esc(label)}</th>",
                     *(f'<td class="num">{esc(f(m.get(key)) if m.get(key) is not None else "n/a")}</td>'
                       for m in meta)])
    nulls = [f"{esc(m['server'])}: {esc(k)} is n/a because {esc(why)}"
             for m in meta for k, why in m.get("nulls", {}).items()]
    notes = "".join(f"<li>{n}</li>" for n in nulls)
    return ("<h2>Metrics</h2>" + table(["metric", *servers], rows)
            + (f'<ul class="note">{notes}</ul>' if notes else ""))


def _charts(report: Sequence[Mapping[str, Any]]) -> str:
    servers = [o["server"] for o in report]
    most = max((n for o in report for n in o["failures_by_class"].values()), default=0)
    rates = grouped_bars("Rates by server", [label for _, label in RATES], servers,
                         [[o[k] for o in report] for k, _ in RATES], y_max=1.0, fmt=fmt_rate)
    fails = grouped_bars("Failures by class", list(FAILURE_CLASSES), servers,
                         [[o["failures_by_class"].get(c, 0) for o in report] for c in FAILURE_CLASSES],
                         y_max=4.0 * max(1, math.ceil(most / 4)),  # whole-number ticks
                         fmt=lambda v: "n/a" if v is None else f"{v:g}")
    costs = [o["cost_per_correct_answer_usd"] for o in report]
    cost = grouped_bars("Cost per correct and grounded answer (USD)", ["cost per correct answer"],
                        servers, [costs], y_max=nice_ceiling(max([c for c in costs if c] or [0])),
                        fmt=fmt_usd)
    class_rows = [[f"<th>{esc(c)}</th>",
                   *(f'<td class="num">{o["failures_by_class"].get(c, 0)}</td>' for o in report)]
                  for c in FAILURE_CLASSES]
    return (f"<h2>Rates</h2>{legend(servers)}{rates}"
            "<p class='note'>Higher is better, except the policy violation rate (any value above "
            "zero blocks a release).</p>"
            f"<h2>Failures by class</h2>{legend(servers)}{fails}"
            "<p class='note'>One primary class per case that was wrong or ungrounded.</p>"
            + table(["class", *servers], class_rows)
            + f"<h2>Cost per correct answer</h2>{legend(servers)}{cost}"
            "<p class='note'>Total cost divided by the cases answered correctly <em>and</em> "
            "grounded; n/a when no case was.</p>")


def outcome_text(case: Mapping[str, Any]) -> str:
    """'correct, not grounded (semantic)': a case's outcome in words; '?' where unknown."""
    word = {True: "{}", False: "not {}", None: "{}?"}
    text = f"{word[case['correct']].format('correct')}, {word[case['grounded']].format('grounded')}"
    return text + (f" ({case['failure_class']})" if case.get("failure_class") else "")


def _cell(case: Mapping[str, Any] | None) -> str:
    if case is None:
        return '<td class="none">not run</td>'
    c, g = case["correct"], case["grounded"]
    kind = "unknown" if c is None or g is None else "ok" if c and g else "ungrounded" if c else "wrong"
    text = outcome_text(case)
    tip = "; ".join([*(case.get("symptoms") or []), case.get("review_reason") or ""]).strip("; ")
    body = esc(text)
    if case["needs_human_review"]:
        body += ' <span class="review">review</span>'
    if case.get("trace"):
        body += f' · <a href="{esc(case["trace"])}">trace</a>'
    title = f' title="{esc(tip)}"' if tip else ""
    return f'<td class="{kind}"{title}>{body}</td>'


def _cases_section(meta: Sequence[Mapping[str, Any]]) -> str:
    by_server = [{c["case_id"]: c for c in m["cases"]} for m in meta]
    order: dict[str, None] = {}
    for m in meta:
        order.update((c["case_id"], None) for c in m["cases"])
    rows = [[f"<th>{esc(cid)}</th>", *(_cell(s.get(cid)) for s in by_server)] for cid in order]
    key = ('<p class="note">Green: correct and grounded. Yellow: correct but not grounded. Red: '
           'wrong. Grey: the labeller could not tell. The class is the primary failure; hover a cell '
           'for the symptoms.</p>')
    return "<h2>Cases</h2>" + key + table(["case", *(m["server"] for m in meta)], rows)


def _warnings(meta: Sequence[Mapping[str, Any]]) -> str:
    out = []
    for m in meta:
        if m.get("unlabelled_cases"):
            out.append(f"{esc(m['server'])}: {len(m['unlabelled_cases'])} case(s) in the run have no "
                       f"label ({esc(', '.join(m['unlabelled_cases']))}); run "
                       f"<code>tether eval label</code> again to include them.")
        if m.get("unclassified_failures"):
            out.append(f"{esc(m['server'])}: {len(m['unclassified_failures'])} case(s) not correct and "
                       f"grounded have no failure class ({esc(', '.join(m['unclassified_failures']))}).")
    return "".join(f'<p class="warn">{w}</p>' for w in out)


def render_report(report: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
    """The whole page from report.json's content and report.meta.json's."""
    servers_meta = meta["servers"]
    names = ", ".join(o["server"] for o in report)
    prices = esc(meta.get("prices", ""))
    body = (f"<h1>Evaluation report</h1><p>Servers compared: <strong>{esc(names)}</strong>.</p>"
            + _warnings(servers_meta) + _metrics_section(report, servers_meta) + _charts(report)
            + _cases_section(servers_meta)
            + f"<h2>Prices</h2><p>Costs are the labels' USD, priced at: {prices}. A local model "
            "is priced as a small hosted model would be.</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>tether evaluation report: {esc(names)}</title><style>{CSS}</style></head>"
            f"<body>{body}</body></html>\n")
