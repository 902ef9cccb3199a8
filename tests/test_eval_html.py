"""The report's charts and traces: labels that never collide, "no cost recorded" instead of an
empty chart, and each case's trace as a conversation with every tool call, all text escaped."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from test_eval_report import GROUNDED, label, make_run
from tether.eval.cases import Case, Gold
from tether.eval.charts import CHAR_W, hbars
from tether.eval.html import NO_COST, fmt_rate
from tether.eval.report import write_report
from tether.eval.trace import ModelTurn, RequestedCall, ToolCall, Trace

SVG = "{http://www.w3.org/2000/svg}"


def _boxes(svg: str) -> list[tuple[str, float, float, float, float]]:
    """(kind, x0, y0, x1, y1) of every text and bar, texts at the widest the fonts allow."""
    root = ET.fromstring(svg)
    out = []
    for el in root.iter():
        if el.tag == f"{SVG}text":
            text = el.text or ""  # the label itself, not its <title> tooltip
            size = float(el.get("font-size", 11))
            w = len(text) * size * CHAR_W
            x = float(el.get("x", 0))
            anchor = el.get("text-anchor", "start")
            x0 = x - w if anchor == "end" else x - w / 2 if anchor == "middle" else x
            y = float(el.get("y", 0))
            out.append(("text", x0, y - size, x0 + w, y + 0.25 * size))
        elif el.tag == f"{SVG}rect":
            x, y = float(el.get("x", 0)), float(el.get("y", 0))
            out.append(("rect", x, y, x + float(el.get("width", 0)),
                        y + float(el.get("height", 0))))
    return out


def _overlaps(svg: str) -> list[tuple[object, object]]:
    boxes = _boxes(svg)
    hits = []
    for a, b in itertools.combinations(boxes, 2):
        if a[0] == b[0] == "rect":
            continue  # bars of one chart never share a row; what matters is text
        if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]:
            hits.append((a, b))
    return hits


def test_bar_labels_never_collide() -> None:
    """The worst case for the old chart: five servers all at 100.0% on every rate."""
    servers = [f"server {i}" for i in range(5)]
    groups = ["grounding precision", "grounding recall", "definition match rate",
              "freshness pass rate", "policy violation rate"]
    for values in ([[1.0] * 5] * 5, [[0.0, 1.0, None, 0.5, 0.999]] * 5):
        svg = str(hbars("Rates", groups, servers, values, x_max=1.0, fmt=fmt_rate))
        assert not _overlaps(svg), _overlaps(svg)[:3]
        assert svg.count("100.0%") >= 1
        assert all(b[1] >= 0 for b in _boxes(svg))  # nothing runs off the left edge
    # long group labels wrap instead of running into the bars
    long = ["a label of many words that would run into the bars if it were not wrapped"]
    svg = str(hbars("Long", long, servers[:2], [[3, 7]], fmt=lambda v: f"{v:g}"))
    assert not _overlaps(svg) and all(b[1] >= 0 for b in _boxes(svg))


def _conversation_run(d: Path, usd: float) -> Path:
    run = make_run(d, GROUNDED, [label("c1", GROUNDED, usd=usd, tool_calls=2,
                                       review_reason="<b>unsure</b>")], traces=())
    t0 = dt.datetime(2026, 8, 20, 9, tzinfo=dt.UTC)
    case = Case(case_id="c1", user_role="analyst", as_user="ana", question="How many <open>?",
                gold=Gold(answer=3))
    evidence = {"tether/evidence": {"tool": "t_one", "version": "1.0.0",
                                    "sql": "SELECT count(*) FROM x WHERE s = $1",
                                    "params": {"p1": "<A>"}, "tables": ["x"],
                                    "policy_predicates": ["x.region = $2"], "as_of_sql": None}}
    trace = Trace(
        case_id="c1", server=GROUNDED, target="stdio:x", agent="scripted", as_user="ana",
        user_role="analyst", question=case.question, case=case, started_at=t0,
        turns=[ModelTurn(index=0, content="I will look <first>.", tool_calls=[
                   RequestedCall(id="a", name="t_one", arguments={"s": "<A>"}),
                   RequestedCall(id="b", name="t_two", arguments={})]),
               ModelTurn(index=1, content="There are 3.", kind="answer")],
        tool_calls=[ToolCall(index=0, turn=0, id="a", name="t_one", arguments={"s": "<A>"},
                             text="3 rows <script>alert(1)</script>", meta=evidence,
                             tool_version="1.0.0"),
                    ToolCall(index=1, turn=0, id="b", name="t_two", text="x" * 2000,
                             is_error=True)],
        final_answer="There are 3 <open> ones.", answer=3)
    (run / "traces" / "c1.json").write_text(trace.model_dump_json())
    return run


def test_a_trace_is_a_conversation_in_the_page(tmp_path: Path) -> None:
    run = _conversation_run(tmp_path / "r", usd=0.01)
    _, html = write_report([run], tmp_path / "out")
    page = html.read_text()
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "How many &lt;open&gt;?" in page and "I will look &lt;first&gt;." in page
    assert page.count('<div class="call') == 2  # each tool call, in order, with its arguments
    assert page.index("tool call 1: t_one@1.0.0") < page.index("tool call 2: t_two (error)")
    assert "&#34;s&#34;: &#34;&lt;A&gt;&#34;" in page  # the arguments, escaped
    assert "SELECT count(*) FROM x WHERE s = $1" in page and "x.region = $2" in page
    assert "1400 more left out" in page  # a long result is an excerpt, not 5,600 pixels
    assert "There are 3 &lt;open&gt; ones." in page
    assert "needs a person: &lt;b&gt;unsure&lt;/b&gt;" in page
    assert NO_COST not in page and page.count("<svg") == 3


def test_no_cost_recorded_instead_of_an_empty_chart(tmp_path: Path) -> None:
    run = _conversation_run(tmp_path / "r", usd=0.0)
    _, html = write_report([run], tmp_path / "out")
    page = html.read_text()
    assert NO_COST in page and "no cost recorded" in page.lower()
    assert page.count("<svg") == 2  # rates and failures; the cost chart is words
    assert json.loads((tmp_path / "out" / "report.json").read_text())[0]["cost_total_usd"] == 0
