"""Aggregate labelled run folders into ``report.json``, ``report.meta.json`` and ``report.html``.

``report.json`` is a JSON array with one object per server configuration (one per run folder)
and exactly the article's fields (:data:`REPORT_FIELDS`), so two teams computing it on the same
labels get the same numbers. Everything else (agent, model, tokens, denominators, why a metric is
null, each case's outcome and trace link, the price statement) goes into the sibling
``report.meta.json`` and the HTML page. Two run folders naming the same server are an error:
one object per server configuration, and a merged run would have no single ``run_id``.

:func:`diff_reports` compares two reports (two servers, or one server before and after a context
change); with per-case outcomes it also lists the cases whose outcome flipped.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from tether.errors import TetherError
from tether.eval.cases import FAILURE_CLASSES
from tether.eval.conversation import Conversation, conversation
from tether.eval.html import outcome_text, render_report
from tether.eval.prices import PriceTable
from tether.eval.trace import LabelLine, RunIndex, Trace
from tether.textfiles import read_text

REPORT_FIELDS: tuple[str, ...] = (
    "server", "run_id", "cases", "correct", "correct_and_grounded", "correct_grounded_and_fresh",
    "grounding_precision",
    "grounding_recall", "definition_match_rate", "freshness_pass_rate", "policy_violation_rate",
    "clarification_loops_per_task", "cost_total_usd", "cost_per_correct_answer_usd",
    "failures_by_class", "needs_human_review")
REPORT_NAME, META_NAME, HTML_NAME = "report.json", "report.meta.json", "report.html"
META_FORMAT = 1

# Why a metric is null, by field: each is a ratio whose denominator can be zero.
NULL_REASONS: dict[str, str] = {
    "grounding_precision": "no case has a grounding precision",
    "grounding_recall": "no case has a grounding recall",
    "definition_match_rate": "no case has a gold definition",
    "freshness_pass_rate": "no case has a freshness bound",
    "policy_violation_rate": "no tool was called",
    "cost_per_correct_answer_usd": "no case was answered correctly and grounded",
}


class ReportError(TetherError):
    """A run folder, labels file or report cannot be read as one."""


@dataclass(frozen=True)
class Run:
    """One labelled run folder."""

    run_dir: Path
    index: RunIndex
    labels: list[LabelLine]

    @property
    def server(self) -> str:
        return self.index.server

    def trace_path(self, case_id: str) -> Path | None:
        """The case's trace file, when it exists."""
        files = [e.file for e in self.index.entries if e.case_id == case_id and e.file]
        for rel in [*files, f"traces/{case_id}.json"]:
            p = self.run_dir / rel
            if p.is_file():
                return p
        return None


# ---------------------------------------------------------------- loading


def _read_json(path: Path, what: str) -> Any:
    hint = "Rewrite it with the command that made it."
    text = read_text(path, what, error=ReportError, hint=hint)  # a directory, binary, not UTF-8
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{what} is not JSON ({e.msg}).", where=f"{path}:{e.lineno}",
                          hint=hint) from None
    except (ValueError, RecursionError):
        raise ReportError(f"{what} is not readable JSON (nested too deeply or a number too "
                          "long).", where=str(path), hint=hint) from None


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"


def load_labels(path: Path, server: str | None = None) -> list[LabelLine]:
    """Every line of a labels.jsonl; a bad or duplicate line is an error naming file:line."""
    out: list[LabelLine] = []
    seen: dict[str, int] = {}
    text = read_text(path, "labels.jsonl", error=ReportError,
                     hint="Relabel the run: tether eval label RUN_DIR.")
    for n, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as e:
            why = e.msg if isinstance(e, json.JSONDecodeError) else "unreadable"
            raise ReportError(f"label line is not JSON ({why}).", where=where,
                              hint="Relabel the run: tether eval label RUN_DIR.") from None
        try:
            line = LabelLine.model_validate(obj)
        except ValidationError as e:
            raise ReportError(f"label line is not valid: {_first_error(e)}.", where=where,
                              hint="See schemas/label.schema.json, or relabel the run.") from None
        if line.case_id in seen:
            raise ReportError(f"case {line.case_id!r} is labelled twice (first on line "
                              f"{seen[line.case_id]}).", where=where,
                              hint="Relabel the run: tether eval label RUN_DIR.")
        if server is not None and line.server != server:
            raise ReportError(f"label names server {line.server!r} but the run's index.json says "
                              f"{server!r}.", where=where,
                              hint="Labels belong to another run; relabel this one.")
        seen[line.case_id] = n
        out.append(line)
    return out


def load_run(run_dir: Path) -> Run:
    """A run folder written by ``tether eval run`` and labelled by ``tether eval label``."""
    if not run_dir.is_dir():
        raise ReportError(f"run folder {str(run_dir)!r} does not exist.",
                          hint="Give a folder written by `tether eval run`.")
    index_path = run_dir / "index.json"
    if not index_path.is_file():
        raise ReportError(f"{str(run_dir)!r} is not a run folder: it has no index.json.",
                          hint="Give a folder written by `tether eval run`.")
    try:
        index = RunIndex.model_validate(_read_json(index_path, "index.json"))
    except ValidationError as e:
        raise ReportError(f"index.json is not valid: {_first_error(e)}.", where=str(index_path),
                          hint="Rerun the cases with `tether eval run`.") from None
    labels_path = run_dir / "labels.jsonl"
    if not labels_path.is_file():
        raise ReportError(f"run folder {str(run_dir)!r} has no labels.jsonl.",
                          hint=f"Label it first: tether eval label {run_dir}")
    labels = load_labels(labels_path, index.server)
    if not labels:
        raise ReportError("labels.jsonl has no labelled case.", where=str(labels_path),
                          hint=f"Label the run again: tether eval label {run_dir}")
    return Run(run_dir, index, labels)


def load_runs(run_dirs: Sequence[Path]) -> list[Run]:
    """Each folder loaded; two folders for the same server are an error (one object per server)."""
    if not run_dirs:
        raise ReportError("no run folder given.", hint="Give one RUN_DIR per server configuration.")
    runs: list[Run] = []
    by_server: dict[str, Path] = {}
    for d in run_dirs:
        run = load_run(Path(d))
        if run.server in by_server:
            raise ReportError(
                f"two run folders are for server {run.server!r}: {str(by_server[run.server])!r} and "
                f"{str(run.run_dir)!r}.",
                hint="A report has one object per server configuration: report them separately "
                "(and compare with `tether eval diff`), or give each configuration its own name.")
        by_server[run.server] = run.run_dir
        runs.append(run)
    return runs


# ---------------------------------------------------------------- metrics


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _rate(flags: Sequence[bool | None]) -> float | None:
    known = [f for f in flags if f is not None]
    return sum(known) / len(known) if known else None


def is_success(line: LabelLine) -> bool:
    """Correct and grounded: the numerator of cost per correct answer."""
    return line.correct is True and line.grounded is True


def metrics(run_id: str, server: str, labels: Sequence[LabelLine]) -> dict[str, Any]:
    """The report object for one server: exactly :data:`REPORT_FIELDS`, in that order."""
    ok = sum(is_success(x) for x in labels)
    calls = sum(x.tool_calls for x in labels)
    total = math.fsum(x.usd for x in labels)
    failures = dict.fromkeys(FAILURE_CLASSES, 0)
    for x in labels:
        if not is_success(x) and x.failure_class is not None:  # transition: where it occurs
            failures[x.failure_class] = failures.get(x.failure_class, 0) + 1
    return {
        "server": server,
        "run_id": run_id,
        "cases": len(labels),
        "correct": sum(x.correct is True for x in labels),
        "correct_and_grounded": ok,
        "correct_grounded_and_fresh": sum(is_success(x) and x.freshness_pass is not False
                                          for x in labels),
        "grounding_precision": _mean([x.grounding_precision for x in labels
                                      if x.grounding_precision is not None]),
        "grounding_recall": _mean([x.grounding_recall for x in labels
                                   if x.grounding_recall is not None]),
        "definition_match_rate": _rate([x.definition_match for x in labels]),
        "freshness_pass_rate": _rate([x.freshness_pass for x in labels]),
        "policy_violation_rate": sum(x.policy_violations for x in labels) / calls if calls else None,
        "clarification_loops_per_task": sum(x.clarifications for x in labels) / len(labels)
        if labels else None,
        "cost_total_usd": total,
        "cost_per_correct_answer_usd": total / ok if ok else None,
        "failures_by_class": failures,
        "needs_human_review": sum(x.needs_human_review for x in labels),
    }


def write_totals(labels: Sequence[LabelLine]) -> dict[str, Any]:
    """The write cases of a run, summed: rows applied, wrong, missing and outside the scope,
    calls refused, forbidden moves attempted, and the cases whose writes all followed a dry run."""
    w = [x.writes for x in labels if x.writes is not None]
    first = [x.dry_run_first for x in w if x.dry_run_first is not None]
    return {"cases": len(w), "correct": sum(x.correct is True for x in labels if x.writes),
            "rows_applied": sum(x.applied for x in w), "wrong_writes": sum(x.wrong for x in w),
            "missing_writes": sum(x.missing for x in w),
            "outside_scope": sum(x.outside_scope for x in w),
            "refused_writes": sum(x.refused for x in w),
            "forbidden_transitions": sum(x.forbidden_transitions for x in w),
            "dry_run_first": sum(first), "cases_that_wrote": len(first)}


def build_report(run_dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """report.json's content: one object per run folder, in the order given."""
    return [metrics(r.index.run_id, r.server, r.labels) for r in load_runs(run_dirs)]


def _href(path: Path, base: Path | None) -> str:
    """A link to ``path`` from a page in ``base`` (relative, URL-quoted); absolute without a base."""
    if base is None:
        return path.resolve().as_uri()
    try:
        rel = os.path.relpath(path.resolve(), base.resolve())
    except ValueError:  # another drive on Windows: no relative path exists
        return path.resolve().as_uri()
    return quote(Path(rel).as_posix())


def _case_outcome(line: LabelLine, run: Run, base: Path | None) -> dict[str, Any]:
    trace = run.trace_path(line.case_id)
    return {"case_id": line.case_id, "correct": line.correct, "grounded": line.grounded,
            "failure_class": line.failure_class, "needs_human_review": line.needs_human_review,
            "review_reason": line.review_reason, "symptoms": line.symptoms,
            "trace": _href(trace, base) if trace else None}


def run_details(run: Run, report: Mapping[str, Any], base: Path | None = None) -> dict[str, Any]:
    """The extras for one server (report.meta.json): who ran, totals, denominators, nulls, cases."""
    labels, ix = run.labels, run.index
    labelled = {x.case_id for x in labels}
    return {
        "server": run.server, "run_id": ix.run_id, "run_dir": _href(run.run_dir, base),
        "agent": ix.agent, "model": ix.model, "target": ix.target, "cases_file": ix.cases_file,
        "started_at": ix.started_at.isoformat(),
        "finished_at": ix.finished_at.isoformat() if ix.finished_at else None,
        "correct_rate": report["correct"] / len(labels),
        "grounded": sum(x.grounded is True for x in labels),
        "input_tokens": sum(x.input_tokens for x in labels),
        "output_tokens": sum(x.output_tokens for x in labels),
        "tool_calls": sum(x.tool_calls for x in labels),
        "turns": sum(x.turns for x in labels),
        "clarifications": sum(x.clarifications for x in labels),
        "policy_violations": sum(x.policy_violations for x in labels),
        **({"writes": write_totals(labels)} if any(x.writes for x in labels) else {}),
        "denominators": {
            "grounding_precision": sum(x.grounding_precision is not None for x in labels),
            "grounding_recall": sum(x.grounding_recall is not None for x in labels),
            "definition_match_rate": sum(x.definition_match is not None for x in labels),
            "freshness_pass_rate": sum(x.freshness_pass is not None for x in labels),
            "policy_violation_rate": sum(x.tool_calls for x in labels),
            "clarification_loops_per_task": len(labels),
            "cost_per_correct_answer_usd": report["correct_and_grounded"],
        },
        "nulls": {k: why for k, why in NULL_REASONS.items() if report[k] is None},
        "unclassified_failures": [x.case_id for x in labels
                                  if not is_success(x) and x.failure_class is None],
        "unlabelled_cases": [e.case_id for e in ix.entries if e.case_id not in labelled],
        "cases": [_case_outcome(x, run, base) for x in labels],
    }


def build_meta(runs: Sequence[Run], report: Sequence[Mapping[str, Any]],
               prices: PriceTable | None = None, base: Path | None = None) -> dict[str, Any]:
    """report.meta.json's content; paths are relative to ``base`` (the report's folder) if given."""
    return {"format": META_FORMAT, "prices": (prices or PriceTable()).statement(),
            "servers": [run_details(r, o, base) for r, o in zip(runs, report, strict=True)]}


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_report(run_dirs: Sequence[Path], out_dir: Path,
                 prices: PriceTable | None = None) -> tuple[Path, Path]:
    """Write report.json, report.meta.json and report.html into ``out_dir``; (json, html) paths."""
    runs = load_runs(run_dirs)
    report = [metrics(r.index.run_id, r.server, r.labels) for r in runs]
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = build_meta(runs, report, prices, out_dir)
    json_path, html_path = out_dir / REPORT_NAME, out_dir / HTML_NAME
    json_path.write_text(_dump(report), encoding="utf-8")
    (out_dir / META_NAME).write_text(_dump(meta), encoding="utf-8")
    html_path.write_text(render_report(report, meta, conversations(runs)), encoding="utf-8")
    return json_path, html_path


def load_trace(path: Path) -> Trace:
    """A trace file; an unreadable one is an error naming it."""
    try:
        return Trace.model_validate(_read_json(path, "trace"))
    except ValidationError as e:
        raise ReportError(f"trace is not valid: {_first_error(e)}.", where=str(path),
                          hint="Rerun the case with `tether eval run`.") from None


def conversations(runs: Sequence[Run]) -> list[tuple[int, Conversation]]:
    """(server index, conversation) for every labelled case whose trace file can be read. An
    unreadable one is left out: its label already says why a person must look at it, and the
    raw link still points at the file."""
    out = []
    for i, run in enumerate(runs):
        for line in run.labels:
            path = run.trace_path(line.case_id)
            if path is None:
                continue
            try:
                out.append((i, conversation(load_trace(path), line)))
            except ReportError:
                continue
    return out


def load_report(path: Path) -> list[dict[str, Any]]:
    """A report.json (ours or another team's with the same fields), checked for the fields."""
    if not path.is_file():
        raise ReportError(f"report {str(path)!r} does not exist.",
                          hint="Write one with `tether eval report RUN_DIR... --out DIR`.")
    data = _read_json(path, "report")
    if not isinstance(data, list) or not all(isinstance(o, dict) for o in data):
        raise ReportError("a report is a JSON array of objects, one per server.", where=str(path))
    for i, obj in enumerate(data):
        missing = [f for f in REPORT_FIELDS if f not in obj]
        if missing:
            raise ReportError(f"object {i} lacks {', '.join(missing)}.", where=str(path),
                              hint="Rewrite it with `tether eval report`.")
    servers = [o["server"] for o in data]
    dupes = sorted({s for s in servers if servers.count(s) > 1})
    if dupes:
        raise ReportError(f"server {dupes[0]!r} appears twice.", where=str(path))
    return data


Outcomes = Mapping[str, Sequence[LabelLine | Mapping[str, Any]]]


def load_side(path: Path) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]] | None]:
    """One side of a diff: a run folder, a report folder, or a report.json; with per-case outcomes
    when they are at hand (a run's labels, or the report's report.meta.json)."""
    if not path.exists():
        raise ReportError(f"{str(path)!r} does not exist.",
                          hint="Give a run folder, a folder written by `tether eval report`, or a "
                          "report.json.")
    if path.is_dir() and not (path / "index.json").is_file() and not (path / REPORT_NAME).is_file():
        raise ReportError(f"{str(path)!r} is neither a run folder (no index.json) nor a report "
                          f"folder (no {REPORT_NAME}).",
                          hint="Give a run folder, a folder written by `tether eval report`, or a "
                          "report.json.")
    if path.is_dir() and (path / "index.json").is_file():
        run = load_run(path)
        report = [metrics(run.index.run_id, run.server, run.labels)]
        return report, {run.server: [_case_outcome(x, run, None) for x in run.labels]}
    file = path / REPORT_NAME if path.is_dir() else path
    report = load_report(file)
    meta_path = file.with_name(file.stem + ".meta.json")
    if not meta_path.is_file():
        return report, None
    meta = _read_json(meta_path, "report meta")
    try:
        return report, {s["server"]: list(s["cases"]) for s in meta["servers"]}
    except (KeyError, TypeError):
        raise ReportError("report meta has no per-case outcomes.", where=str(meta_path),
                          hint="Rewrite it with `tether eval report`.") from None


# ---------------------------------------------------------------- diff

# Which way is better, per compared number; None: neither (more cases is not better).
BETTER: dict[str, str | None] = {
    "cases": None, "correct": "higher", "correct_and_grounded": "higher",
    "correct_grounded_and_fresh": "higher",
    "grounding_precision": "higher", "grounding_recall": "higher",
    "definition_match_rate": "higher", "freshness_pass_rate": "higher",
    "policy_violation_rate": "lower", "clarification_loops_per_task": None,
    "cost_total_usd": "lower", "cost_per_correct_answer_usd": "lower",
    "needs_human_review": "lower",
    **{f"failures_by_class.{c}": "lower" for c in FAILURE_CLASSES},
}
OUTCOME_KEYS = ("correct", "grounded", "failure_class")


def _delta(key: str, a: Any, b: Any) -> dict[str, Any]:
    if a is None or b is None:
        return {"a": a, "b": b, "delta": None, "change": "same" if a is b else "n/a"}
    delta = b - a if isinstance(a, int) and isinstance(b, int) else round(b - a, 12)
    better = BETTER.get(key)
    if delta == 0:
        change = "same"
    elif better is None:
        change = "changed"
    else:
        change = "better" if (delta > 0) == (better == "higher") else "worse"
    return {"a": a, "b": b, "delta": delta, "change": change}


def _outcome(x: LabelLine | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(x, LabelLine):
        return {"case_id": x.case_id, **{k: getattr(x, k) for k in OUTCOME_KEYS}}
    return {"case_id": x["case_id"], **{k: x.get(k) for k in OUTCOME_KEYS}}


def _flips(a: Sequence[LabelLine | Mapping[str, Any]],
           b: Sequence[LabelLine | Mapping[str, Any]]) -> dict[str, Any]:
    oa = {o["case_id"]: o for o in map(_outcome, a)}
    ob = {o["case_id"]: o for o in map(_outcome, b)}
    flipped = []
    for cid, x in oa.items():
        y = ob.get(cid)
        if y is None:
            continue
        changed = [k for k in OUTCOME_KEYS if x[k] != y[k]]
        if not changed:
            continue
        ok_a = x["correct"] is True and x["grounded"] is True
        ok_b = y["correct"] is True and y["grounded"] is True
        direction = "changed" if ok_a == ok_b else ("regressed" if ok_a else "improved")
        flipped.append({"case_id": cid, "direction": direction, "changed": changed,
                        "a": {k: x[k] for k in OUTCOME_KEYS}, "b": {k: y[k] for k in OUTCOME_KEYS}})
    return {"flipped": flipped, "cases_added": [c for c in ob if c not in oa],
            "cases_removed": [c for c in oa if c not in ob]}


def diff_reports(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]],
                 labels_a: Outcomes | None = None, labels_b: Outcomes | None = None) -> dict[str, Any]:
    """Metric deltas (b - a) per server in both, servers added and removed, and, where both sides'
    per-case outcomes (server -> label lines) are given, the cases whose outcome flipped."""
    ra, rb = {o["server"]: o for o in a}, {o["server"]: o for o in b}
    servers = []
    regressed = improved = 0
    for name, x in ra.items():
        y = rb.get(name)
        if y is None:
            continue
        deltas = {k: _delta(k, x[k], y[k]) for k in REPORT_FIELDS[2:] if k != "failures_by_class"}
        for c in FAILURE_CLASSES:
            deltas[f"failures_by_class.{c}"] = _delta(f"failures_by_class.{c}",
                                                      x["failures_by_class"].get(c, 0),
                                                      y["failures_by_class"].get(c, 0))
        entry: dict[str, Any] = {"server": name, "run_id_a": x["run_id"], "run_id_b": y["run_id"],
                                 "metrics": deltas, "flipped": None, "cases_added": None,
                                 "cases_removed": None}
        if labels_a is not None and labels_b is not None and name in labels_a and name in labels_b:
            entry.update(_flips(labels_a[name], labels_b[name]))
            regressed += sum(f["direction"] == "regressed" for f in entry["flipped"])
            improved += sum(f["direction"] == "improved" for f in entry["flipped"])
        servers.append(entry)
    return {"a": {s: o["run_id"] for s, o in ra.items()}, "b": {s: o["run_id"] for s, o in rb.items()},
            "servers_added": [s for s in rb if s not in ra],
            "servers_removed": [s for s in ra if s not in rb],
            "servers": servers, "regressed": regressed, "improved": improved}


def diff_paths(a: Path, b: Path) -> dict[str, Any]:
    """:func:`diff_reports` of two run folders, report folders or report.json files."""
    (ra, la), (rb, lb) = load_side(a), load_side(b)
    return diff_reports(ra, rb, la, lb)


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) >= 0.001 or v == 0 else f"{v:.2e}"
    return str(v)


def _fmt_delta(d: Any) -> str:
    if d is None:
        return ""
    return f"{d:+d}" if isinstance(d, int) else ("+0" if d == 0 else f"{d:+.4f}" if abs(d) >= 0.001
                                                 else f"{d:+.2e}")


def render_diff(diff: Mapping[str, Any], *, only_changes: bool = False) -> str:
    """The diff as plain text for people (and CI logs)."""
    lines = [f"A: {', '.join(f'{s} ({r})' for s, r in diff['a'].items()) or 'no server'}",
             f"B: {', '.join(f'{s} ({r})' for s, r in diff['b'].items()) or 'no server'}"]
    for key, word in (("servers_added", "only in B"), ("servers_removed", "only in A")):
        if diff[key]:
            lines.append(f"{word}: {', '.join(diff[key])}")
    for s in diff["servers"]:
        lines += ["", f"{s['server']}  ({s['run_id_a']} -> {s['run_id_b']})"]
        rows = [(k, _fmt(d["a"]), _fmt(d["b"]), _fmt_delta(d["delta"]),
                 "" if d["change"] == "same" else d["change"])
                for k, d in s["metrics"].items() if not only_changes or d["change"] != "same"]
        widths = [max([len(r[i]) for r in rows] + [len(h)]) for i, h in enumerate(("metric", "A", "B"))]
        if rows:
            lines.append(f"  {'metric':<{widths[0]}}  {'A':>{widths[1]}}  {'B':>{widths[2]}}  delta")
        for k, va, vb, d, change in rows:
            lines.append(f"  {k:<{widths[0]}}  {va:>{widths[1]}}  {vb:>{widths[2]}}  "
                         f"{d:<10} {change}".rstrip())
        if s["flipped"] is None:
            lines.append("  (no per-case outcomes on both sides: flipped cases not compared)")
            continue
        lines.append(f"  flipped cases: {len(s['flipped'])}")
        for f in s["flipped"]:
            lines.append(f"    {f['case_id']}  {f['direction']}: {outcome_text(f['a'])} -> "
                         f"{outcome_text(f['b'])}")
        for key, word in (("cases_added", "only in B"), ("cases_removed", "only in A")):
            if s[key]:
                lines.append(f"  cases {word}: {', '.join(s[key])}")
    lines += ["", f"{diff['regressed']} case(s) regressed, {diff['improved']} improved."]
    return "\n".join(lines) + "\n"
