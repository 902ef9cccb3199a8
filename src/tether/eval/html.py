"""The evaluation report as HTML: one self-contained page for `tether eval report`, and the same
body and trace templates for the console's evaluation pages.

The numbers and words are prepared here (:func:`report_context`); the templates in
``tether/eval/templates`` only lay them out, with autoescaping on, so every piece of text from a
run (server names, case ids, review reasons, tool results) is shown as text. Charts are inline
SVG (:mod:`tether.eval.charts`); the page has no script and loads nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from tether.eval.cases import FAILURE_CLASSES
from tether.eval.charts import NoData, fmt_number, hbars, legend, nice_ceiling, no_data
from tether.eval.conversation import Conversation

__all__ = ["environment", "fmt_number", "fmt_rate", "fmt_usd", "nice_ceiling", "outcome_text",
           "render_report", "report_context"]

TEMPLATES = Path(__file__).parent / "templates"

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
NO_COST = ("No cost recorded: every case was priced at $0 (no tokens were counted, or the price "
           "table gives this model no price), so there is no cost per answer to draw.")


def fmt_rate(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.1f}%"


def fmt_usd(v: float | None) -> str:
    if v is None:
        return "n/a"
    # Three significant digits below a dollar (local models cost fractions of a cent), cents above.
    decimals = 2 if v == 0 or abs(v) >= 1 else max(2, 2 - math.floor(math.log10(abs(v))))
    return f"${v:,.{decimals}f}"


def _fmt_field(key: str, v: Any) -> str:
    if key.endswith("_usd"):
        return fmt_usd(v)
    if key.endswith("_rate") or key.startswith("grounding_"):
        return fmt_rate(v)
    return fmt_number(v)


def outcome_text(case: Mapping[str, Any] | Any) -> str:
    """'correct, not grounded (semantic)': a case's outcome in words; '?' where unknown."""
    get = case.get if isinstance(case, Mapping) else lambda k: getattr(case, k, None)
    word = {True: "{}", False: "not {}", None: "{}?"}
    text = f"{word[get('correct')].format('correct')}, {word[get('grounded')].format('grounded')}"
    return text + (f" ({get('failure_class')})" if get("failure_class") else "")


@cache
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(outcome_text=outcome_text, fmt_rate=fmt_rate, fmt_usd=fmt_usd)
    return env


# ---------------------------------------------------------------- what the body shows


def _metric_rows(report: Sequence[Mapping[str, Any]], meta: Sequence[Mapping[str, Any]]
                 ) -> list[dict[str, Any]]:
    rows = [{"label": label, "how": how,
             "cells": [{"text": _fmt_field(key, o[key]), "n": m.get("denominators", {}).get(key)}
                       for o, m in zip(report, meta, strict=True)]}
            for key, label, how in METRIC_ROWS]
    extra: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
        ("run_id", "run", str), ("agent", "agent", str), ("model", "model", str),
        ("correct_rate", "correct rate", fmt_rate), ("tool_calls", "tool calls", fmt_number),
        ("turns", "turns", fmt_number), ("input_tokens", "input tokens", fmt_number),
        ("output_tokens", "output tokens", fmt_number))
    for key, label, f in extra:
        rows.append({"label": label, "how": "", "cells": [
            {"text": f(m.get(key)) if m.get(key) is not None else "n/a", "n": None}
            for m in meta]})
    return rows


def _warnings(meta: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Each banner says what is wrong, why it matters and what to do."""
    out = []
    for m in meta:
        if m.get("unlabelled_cases"):
            ids = ", ".join(m["unlabelled_cases"])
            out.append({"server": m["server"],
                        "what": f"{len(m['unlabelled_cases'])} case(s) in the run have no label "
                                f"({ids}).",
                        "why": "the run's index.json lists them but labels.jsonl does not (the "
                               "case errored before answering, or was labelled before it "
                               "finished), so no number on this page counts them.",
                        "todo": "run `tether eval label RUN_DIR` again; a case that errored "
                                "needs `tether eval run` first."})
        if m.get("unclassified_failures"):
            ids = ", ".join(m["unclassified_failures"])
            out.append({"server": m["server"],
                        "what": f"{len(m['unclassified_failures'])} case(s) not correct and "
                                f"grounded have no failure class ({ids}).",
                        "why": "the labeller could not tell whether they were correct or "
                               "grounded, so the failures chart leaves them out.",
                        "todo": "read their traces and settle them by hand (they are marked "
                                "review)."})
    return out


def _charts(report: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    servers = [o["server"] for o in report]
    rates = hbars("Rates by server", [label for _, label in RATES], servers,
                  [[o[k] for o in report] for k, _ in RATES], x_max=1.0, fmt=fmt_rate)
    most = max((n for o in report for n in o["failures_by_class"].values()), default=0)
    fails = hbars("Failures by class", list(FAILURE_CLASSES), servers,
                  [[o["failures_by_class"].get(c, 0) for o in report] for c in FAILURE_CLASSES],
                  x_max=4.0 * max(1, math.ceil(most / 4)),  # whole-number ticks
                  fmt=lambda v: "n/a" if v is None else f"{v:g}")
    cost: Markup
    if all(not o.get("cost_total_usd") for o in report):
        cost = no_data(NO_COST)
    else:
        costs = [o["cost_per_correct_answer_usd"] for o in report]
        cost = hbars("Cost per correct and grounded answer (USD)", ["cost per correct answer"],
                     servers, [costs], x_max=nice_ceiling(max([c for c in costs if c] or [0])),
                     fmt=fmt_usd)
    return {"legend": legend(servers), "rates_chart": rates, "failures_chart": fails,
            "cost_chart": cost, "cost_drawn": not isinstance(cost, NoData),
            "class_rows": [{"name": c, "counts": [o["failures_by_class"].get(c, 0)
                                                  for o in report]} for c in FAILURE_CLASSES]}


TraceHref = Callable[[int, Mapping[str, Any]], str | None]
"""(server index, the case's outcome in report.meta.json) -> the link to its trace, or None."""


def _cell(case: Mapping[str, Any], href: str | None, raw: bool) -> dict[str, Any]:
    c, g = case["correct"], case["grounded"]
    kind = "unknown" if c is None or g is None else "ok" if c and g else (
        "ungrounded" if c else "wrong")
    tip = "; ".join([*(case.get("symptoms") or []), case.get("review_reason") or ""]).strip("; ")
    return {"kind": kind, "text": outcome_text(case), "tip": tip,
            "review": case["needs_human_review"], "href": href,
            "raw": case.get("trace") if raw else None}


def _case_rows(meta: Sequence[Mapping[str, Any]], href: TraceHref, raw: bool
               ) -> list[dict[str, Any]]:
    by_server = [{c["case_id"]: c for c in m["cases"]} for m in meta]
    order: dict[str, None] = {}
    for m in meta:
        order.update((c["case_id"], None) for c in m["cases"])
    return [{"case_id": cid,
             "cells": [None if (case := s.get(cid)) is None else _cell(case, href(i, case), raw)
                       for i, s in enumerate(by_server)]}
            for cid in order]


def report_context(report: Sequence[Mapping[str, Any]], meta: Mapping[str, Any],
                   trace_href: TraceHref, raw_links: bool = False) -> dict[str, Any]:
    """Everything report_body.html shows, from report.json's and report.meta.json's content."""
    servers_meta = meta["servers"]
    nulls = [f"{m['server']}: {k} is n/a because {why}"
             for m in servers_meta for k, why in m.get("nulls", {}).items()]
    return {"servers": [o["server"] for o in report], "warnings": _warnings(servers_meta),
            "metric_rows": _metric_rows(report, servers_meta), "nulls": nulls,
            **_charts(report), "case_rows": _case_rows(servers_meta, trace_href, raw_links),
            "prices": meta.get("prices", "")}


def render_report(report: Sequence[Mapping[str, Any]], meta: Mapping[str, Any],
                  conversations: Sequence[tuple[int, Conversation]] = ()) -> str:
    """The whole self-contained page; ``conversations`` (server index, trace) are embedded,
    and each case's cell links to its own."""
    anchors = {(i, c.case_id): f"t{i}-{n}" for n, (i, c) in enumerate(conversations)}
    ctx = report_context(report, meta,
                         lambda i, case: f"#{a}" if (a := anchors.get((i, case["case_id"])))
                         else None, raw_links=True)
    ctx["conversations"] = [(anchors[(i, c.case_id)], c) for i, c in conversations]
    return environment().get_template("report_page.html").render(ctx) + "\n"
