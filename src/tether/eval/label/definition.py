"""definition_match: did the predicate the agent's calls applied equal the governed one?

The governed predicate is ``gold.definition_sql``; without it, the predicates of the glossary
terms (names or synonyms) named in ``gold.definition`` (several terms: their AND); without
either, null and a human looks. What a call applied: run_sql's WHERE and JOIN ON conditions (and
each FILTER / CASE WHEN condition inside its aggregates); a tether metric tool's governed
predicate (the project's metric, via the tool's ``source_of_truth``, else its glossary terms)
plus its argument filters; a listing tool's argument filters (``fields.arguments``). Only the
conjuncts that touch the governed predicate's columns are compared, so a region or a time
filter beside the definition does not count against it. Several calls filtering one column in
turn (status NEW, then PAID) are also compared as their OR.
"""

from __future__ import annotations

import json
import re
from functools import partial
from typing import Any

import sqlglot
from sqlglot import exp

from tether.eval.label.calls import CallView
from tether.eval.label.predicates import (
    Pred,
    conjunction,
    disjunction,
    equivalent,
    parse_predicate,
    pred,
)
from tether.eval.label.sqlshape import SqlAnalysis
from tether.eval.label.work import Finding, Work


def gold_term_names(work: Work) -> list[str]:
    """Glossary terms whose name or a synonym appears in gold.definition (longest first)."""
    config, prose = work.ctx.config, work.gold.definition or ""
    if config is None or not prose:
        return []
    found: list[tuple[int, str]] = []
    for term, g in config.glossary.items():
        lengths = [len(n) for n in [term, *g.synonyms]
                   if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", prose, re.I)]
        if lengths:
            found.append((max(lengths), term))
    return [t for _, t in sorted(found, key=lambda x: (-x[0], x[1]))]


def gold_definition(work: Work) -> tuple[Pred | None, str | None]:
    """(the governed predicate, why there is none when the case has a definition)."""
    if "gold_def" in work.scratch:
        cached: tuple[Pred | None, str | None] = work.scratch["gold_def"]
        return cached
    gold, ctx = work.gold, work.ctx
    terms = gold_term_names(work)
    work.scratch["gold_term"] = terms[0] if terms else None
    sql: str | None = None
    problem: str | None = None
    if gold.definition_sql:
        sql = gold.definition_sql
    elif gold.definition:
        config = ctx.config
        if config is None:
            problem = "gold.definition is prose and there is no project glossary to resolve it"
        else:
            preds = [config.glossary[t].predicate for t in terms if config.glossary[t].predicate]
            if preds:
                sql = " AND ".join(f"({p})" for p in dict.fromkeys(preds))
            else:
                problem = ("no glossary term with a predicate is named in gold.definition"
                           + (f" (found {', '.join(terms)})" if terms else ""))
    found: Pred | None = None
    if sql is not None:
        try:
            found = pred(ctx, partial(parse_predicate, ctx, sql), ("gold", ctx.dialect, sql))
        except sqlglot.errors.SqlglotError as e:
            problem = f"gold.definition_sql does not parse: {str(e).splitlines()[0]}"
    if found is not None and not found.fields:
        found, problem = None, "the governed predicate names no known column"
    work.scratch["gold_def"] = (found, problem)
    return found, problem


def _literal(value: Any) -> exp.Expr:
    return exp.convert(value)


def argument_predicates(call: CallView) -> list[exp.Expr]:
    """Each mapped argument as the filter it applies (list -> IN, *_from -> >=, *_to -> <)."""
    out: list[exp.Expr] = []
    for arg, value in sorted(call.call.arguments.items()):
        fields = (call.tool.arguments or {}).get(arg, ())
        if value is None or len(fields) != 1 or isinstance(value, dict):
            continue
        table, _, column = fields[0].partition(".")
        col = exp.column(column, table=table)
        col.meta["field"] = fields[0]
        if isinstance(value, list):
            out.append(exp.In(this=col, expressions=[_literal(v) for v in value]))
        elif arg.endswith("_from"):
            out.append(exp.GTE(this=col, expression=_literal(value)))
        elif arg.endswith("_to"):
            out.append(exp.LT(this=col, expression=_literal(value)))
        else:
            out.append(exp.EQ(this=col, expression=_literal(value)))
    return out


def governed_sql(work: Work, call: CallView) -> list[str] | None:
    """The predicates a task-specific tool applies by itself; None when they cannot be known."""
    config = work.ctx.config
    if config is None:
        return None
    sqls = [config.metrics[m].predicate for m in call.tool.metrics if m in config.metrics]
    if not call.tool.metrics:
        sqls = [config.glossary[t].predicate for t in call.tool.definitions if t in config.glossary]
    return [s for s in sqls if s]


def _flatten(node: exp.Expr) -> list[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _flatten(node.left) + _flatten(node.right)
    return [node]


def _tool_parts(work: Work, c: CallView) -> list[Pred] | None:
    """A tether tool's filters, each in normal form: its arguments, and what it governs."""
    ctx = work.ctx
    memo = ("args", c.tool.name, json.dumps(c.call.arguments, sort_keys=True, default=str))
    parts = list(ctx.cache.get(memo) or [])
    if memo not in ctx.cache:
        built = argument_predicates(c)
        parts = [pred(ctx, n) for n in built]
        ctx.cache[memo] = parts
    if c.tool.task_specific:
        sqls = governed_sql(work, c)
        if sqls is None:
            return None
        for sql in sqls:
            for i, n in enumerate(_flatten(parse_predicate(ctx, sql))):
                parts.append(pred(ctx, n, ("governed", ctx.dialect, sql, i)))
    return parts


def _bound(a: SqlAnalysis, nodes: list[exp.Expr]) -> exp.Expr:
    return exp.and_(*[a.bind(p) for p in nodes])


def applied(work: Work, wanted: frozenset[str]) -> tuple[list[Pred], list[Pred], list[str]]:
    """(each call's predicate on the wanted columns, conditional ones, calls not knowable)."""
    ctx = work.ctx
    mains: list[Pred] = []
    extra: list[Pred] = []
    unknown: list[str] = []
    for c in work.ok_calls():
        for a in c.sql:
            picked = [(i, p, names) for i, (p, fs, names) in enumerate(a.shape.conjuncts)
                      if fs & wanted]
            if picked:
                memo = ("sql", a.shape.uid, tuple(i for i, _, _ in picked),
                        a.values_of(tuple(n for _, _, names in picked for n in names)))
                nodes = [p for _, p, _ in picked]
                mains.append(pred(ctx, partial(_bound, a, nodes),
                                  memo if ctx.shape_cache else None))
            for i, (p, fs, names) in enumerate(a.shape.conditional):
                if fs & wanted:
                    cond = ("cond", a.shape.uid, i, a.values_of(names))
                    extra.append(pred(ctx, partial(_bound, a, [p]),
                                      cond if ctx.shape_cache else None))
        touched = {f for fs in (c.tool.arguments or {}).values() for f in fs} | set(c.tool.governed)
        if not touched & wanted:
            continue
        parts = _tool_parts(work, c)
        if parts is None:
            if set(c.tool.governed) & wanted:
                unknown.append(c.label)
            continue
        keep = [p for p in parts if p.fields & wanted]
        if keep:
            mains.append(conjunction(ctx, keep))
    return mains, extra, unknown


def definition(work: Work) -> Finding:
    """definition_match: True, False, or None (no definition, or not decidable: a human looks)."""
    f = Finding()
    gold, problem = gold_definition(work)
    if gold is None:
        f.values["definition_match"] = None
        if problem:
            f.review.append(problem)
        return f
    wanted = gold.fields
    mains, extra, unknown = applied(work, wanted)
    candidates = _unique(mains + extra)
    if len(_unique(mains)) > 1:
        candidates.append(disjunction(work.ctx, _unique(mains)))
    if not candidates:
        grouped = sorted({fld for c in work.ok_calls() for a in c.sql for fld, cl in a.shape.uses
                          if fld in wanted and cl in ("select", "group")})
        if unknown or grouped:
            f.values["definition_match"] = None
            f.review.append(f"no call filtered on {', '.join(sorted(wanted))} but "
                            + (f"{', '.join(unknown)} applied an unknown predicate" if unknown
                               else f"{', '.join(grouped)} was selected or grouped: the agent "
                               "may have applied the definition itself"))
            return f
        f.values["definition_match"] = False
        f.symptom("semantic", f"no call applied the governed definition ({gold.key})")
        return f
    verdicts = [(c, *equivalent(work.ctx, gold, c)) for c in candidates]
    if any(v is True for _, v, _ in verdicts):
        f.values["definition_match"] = True
        return f
    undecided = [why for _, v, why in verdicts if v is None]
    if undecided or unknown:
        f.values["definition_match"] = None
        f.review.append("definition not decided: " + (undecided[0] if undecided else
                                                      f"{', '.join(unknown)} applied an unknown "
                                                      "predicate"))
        return f
    f.values["definition_match"] = False
    c, _, why = verdicts[0]
    f.symptom("semantic", f"definition mismatch: applied {c.key}, governed {gold.key} ({why})")
    return f


def _unique(preds: list[Pred]) -> list[Pred]:
    seen: dict[str, Pred] = {}
    for p in preds:
        seen.setdefault(p.key, p)
    return list(seen.values())
