"""Label one trace (a pipeline of rules) or a whole run folder (writes labels.jsonl)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from tether.config import Project
from tether.errors import TetherError
from tether.eval.label.answer import correctness
from tether.eval.label.context import LabelContext
from tether.eval.label.cost import cost
from tether.eval.label.definition import definition
from tether.eval.label.entity import entity
from tether.eval.label.fields import grounding
from tether.eval.label.freshness import freshness
from tether.eval.label.policy import policy
from tether.eval.label.structure import structure
from tether.eval.label.support import support
from tether.eval.label.timing import timing
from tether.eval.label.verdict import verdict
from tether.eval.label.work import Rule, Work, check_order
from tether.eval.label.writes import writes
from tether.eval.prices import PriceTable
from tether.eval.trace import IndexEntry, LabelLine, RunIndex, Trace
from tether.textfiles import read_text

SCORERS: tuple[Rule, ...] = (cost, correctness, support, grounding, definition, freshness,
                             policy, writes, entity, structure, timing, verdict)
"""The default pipeline. Each rule declares what it reads and writes (work.py), and a pipeline
is checked once: a rule after every rule that writes what it reads. Pass your own tuple (these
plus yours, registered with ``tether.eval.label.work.rule``) to label_trace / label_run."""

LABELS_FILE = "labels.jsonl"


def label_trace(trace: Trace, ctx: LabelContext | None = None,
                scorers: tuple[Rule, ...] = SCORERS) -> LabelLine:
    """The label line of one trace. Without a context: no project (SQL analysed without a
    schema; the source-dependent checks go to a human) and the default price table."""
    if ctx is None:
        ctx = LabelContext.build(None)
    with ctx.timed("calls"):
        work = Work.start(trace, ctx)
    check_order(scorers)
    for r in scorers:
        with ctx.timed(f"scorer:{r.name}"):
            found = r(work)
        work.merge(r, found)
    v = work.values
    return LabelLine(
        case_id=trace.case_id, server=trace.server,
        correct=v.get("correct"), grounded=v.get("grounded"),
        grounding_precision=v.get("grounding_precision"),
        grounding_recall=v.get("grounding_recall"),
        fields_used=v.get("fields_used", []), definition_match=v.get("definition_match"),
        freshness_pass=v.get("freshness_pass"), policy_violations=v.get("policy_violations", 0),
        clarifications=v.get("clarifications", 0), tool_calls=v.get("tool_calls", 0),
        turns=v.get("turns", 0), input_tokens=v.get("input_tokens", 0),
        output_tokens=v.get("output_tokens", 0), usd=v.get("usd", 0.0),
        failure_class=v.get("failure_class"),
        needs_human_review=bool(work.review), review_reason="; ".join(work.review) or None,
        symptoms=[f"{cls}: {text}" for cls, text in work.symptoms],
        writes=v.get("writes"),
    )


def read_index(run_dir: Path) -> RunIndex:
    path = run_dir / "index.json"
    if not path.exists():
        raise TetherError(f"{run_dir} is not a run folder: it has no index.json.",
                          hint="Label the folder `tether eval run` wrote (RUN_DIR).")
    hint = "Re-run the cases; index.json was written by another version or damaged."
    text = read_text(path, "the run index", error=TetherError, hint=hint)
    try:
        return RunIndex.model_validate_json(text)
    except ValidationError as e:
        raise TetherError(f"{path} is not a run index: {_invalid(e, 'run index')}.",
                          hint=hint) from None


def _invalid(e: ValidationError, what: str) -> str:
    """The first problem pydantic found, in words: 'not JSON (...)' or 'field: message'."""
    errors = e.errors()
    first = errors[0]
    if first["type"] == "json_invalid":
        return f"not JSON ({first['msg'].removeprefix('Invalid JSON: ')})"
    loc = ".".join(str(p) for p in first["loc"]) or "(top)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"not a valid {what}: {loc}: {first['msg']}{more}"


def read_trace(path: Path, name: str) -> Trace:
    """The trace at ``path``; a missing, directory, binary, non-JSON or invalid file is a
    TetherError whose message names ``name`` and what is wrong (the label's review reason)."""
    text = read_text(path, f"trace file {name}", error=TetherError)
    try:
        return Trace.model_validate_json(text)
    except ValidationError as e:
        raise TetherError(f"trace file {name} is {_invalid(e, 'trace')}.") from None


def _unreadable(index: RunIndex, entry: IndexEntry, why: str) -> LabelLine:
    return LabelLine(
        case_id=entry.case_id, server=index.server, correct=None, grounded=None,
        grounding_precision=None, grounding_recall=None, fields_used=[], definition_match=None,
        freshness_pass=None, policy_violations=0, clarifications=0, tool_calls=0, turns=0,
        input_tokens=0, output_tokens=0, usd=0.0, failure_class=None, needs_human_review=True,
        review_reason=why)


def _trace_path(run_dir: Path, entry: IndexEntry) -> Path:
    direct = run_dir / entry.file
    return direct if direct.exists() else run_dir / "traces" / Path(entry.file).name


def label_run(run_dir: Path, project: Project | None, prices: PriceTable | None = None,
              oracle_cmd: str | None = None, *, scorers: tuple[Rule, ...] = SCORERS,
              ctx: LabelContext | None = None) -> list[LabelLine]:
    """Label every trace of the run in index order and write RUN_DIR/labels.jsonl."""
    run_dir = Path(run_dir)
    index = read_index(run_dir)
    own = ctx is None
    ctx = ctx or LabelContext.build(project, prices, oracle_cmd)
    lines: list[LabelLine] = []
    try:
        for entry in index.entries:
            path = _trace_path(run_dir, entry)
            if not path.exists():
                lines.append(_unreadable(index, entry, f"trace file {entry.file} is missing"
                                         + (f" (run error: {entry.error})" if entry.error else "")))
                continue
            try:  # a bad trace gets a null label for a person; the others are still labelled
                trace = read_trace(path, entry.file)
            except TetherError as e:
                lines.append(_unreadable(index, entry, e.message.rstrip(".")))
                continue
            lines.append(label_trace(trace, ctx, scorers))
    finally:
        if own:
            ctx.close()
    write_labels(run_dir / LABELS_FILE, lines)
    return lines


def write_labels(path: Path, lines: list[LabelLine]) -> None:
    """One JSON object per line, written to a temporary file and renamed into place."""
    if path.is_dir():
        raise TetherError(f"{path} is a directory; the labels go in a file there.",
                          hint="Move the directory away and label the run again.")
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line.model_dump_json() + "\n")
    os.replace(tmp, path)
