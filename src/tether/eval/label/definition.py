"""definition_match: did the predicate the agent's calls applied equal the governed one?

The governed predicate is ``gold.definition_sql``; without it, the predicates of the glossary
terms (names or synonyms) named in ``gold.definition`` (several terms: their AND); without
either, null and a human looks. What a call applied is read from what it ran, never from what a
tool says of itself: the WHERE and JOIN ON conditions (and each FILTER / CASE WHEN condition
inside its aggregates) of its evidence's statement (the policy's own predicates taken out) or
of the SQL it sent. Only the conjuncts that touch the governed predicate's columns are compared,
so a region or a time filter beside the definition does not count against it. Several calls
filtering one column in turn (status NEW, then PAID) are also compared as their OR. A call that
carries neither evidence nor SQL cannot be read: when no readable call decides, the match is
null and a human looks, never a silent false.
"""

from __future__ import annotations

import re
from functools import partial

import sqlglot
from sqlglot import exp

from tether.eval.label.calls import is_metadata
from tether.eval.label.sql import measure as measures
from tether.eval.label.sql.predicates import (
    Pred,
    disjunction,
    equivalent,
    parse_predicate,
    pred,
)
from tether.eval.label.sql.shape import SqlAnalysis
from tether.eval.label.work import Finding, Work, rule


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


def gold_term(work: Work) -> str | None:
    """The glossary term the case's gold definition names (the longest match), if any."""
    terms = gold_term_names(work)
    return terms[0] if terms else None


def gold_measure(work: Work) -> str | None:
    """The governed measure the case means: ``gold.definition_sql`` when it is an aggregate,
    else the measure of a glossary term named in ``gold.definition`` that has no predicate."""
    if "gold_measure" in work.memo:
        hit: str | None = work.memo["gold_measure"]
        return hit
    found: str | None = None
    sql = work.gold.definition_sql
    if sql:
        try:
            if sqlglot.parse_one(sql, read=work.ctx.dialect).find(exp.AggFunc) is not None:
                found = sql
        except sqlglot.errors.SqlglotError:
            found = None
    elif work.ctx.config is not None:
        glossary = work.ctx.config.glossary
        found = next((glossary[t].measure for t in gold_term_names(work)
                      if glossary[t].measure and not glossary[t].predicate), None)
    work.memo["gold_measure"] = found
    return found


def _measure(work: Work, measure: str) -> Finding:
    """definition_match for a governed measure: some call's statement computes it."""
    f = Finding()
    verdicts: list[tuple[bool | None, str | None]] = []
    for c in work.ok_calls():
        for a in c.sql:
            verdicts.append(measures.match(work, measure, a.sql))
    unread = [c.unread for c in work.ok_calls() if not c.ran and not is_metadata(work.ctx, c)]
    if any(v is True for v, _ in verdicts):
        f.values["definition_match"] = True
    elif not verdicts or unread or any(v is None for v, _ in verdicts):
        f.values["definition_match"] = None
        why = next((w for v, w in verdicts if v is None and w), None)
        f.review.append("measure not decided: " + (why or ", ".join(unread)
                                                   or "no call ran a statement"))
    else:
        f.values["definition_match"] = False
        f.symptom("semantic", f"no call computed the governed measure {measure} "
                  f"({verdicts[0][1]})")
    return f


def gold_definition(work: Work) -> tuple[Pred | None, str | None]:
    """(the governed predicate, why there is none when the case has a definition)."""
    if "gold_def" in work.memo:
        cached: tuple[Pred | None, str | None] = work.memo["gold_def"]
        return cached
    gold, ctx = work.gold, work.ctx
    terms = gold_term_names(work)
    sql: str | None = None
    problem: str | None = None
    if gold_measure(work) is not None:
        sql = None  # a measure, not a predicate: measure.py decides
    elif gold.definition_sql:
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
    work.memo["gold_def"] = (found, problem)
    return found, problem


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
        if not c.ran and not is_metadata(ctx, c):
            unknown.append(c.unread)
    return mains, extra, unknown


@rule(writes={"definition_match", "symptoms"})
def definition(work: Work) -> Finding:
    """definition_match: True, False, or None (no definition, or not decidable: a human looks)."""
    measure = gold_measure(work)
    if measure is not None:
        return _measure(work, measure)
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
                            + (", ".join(unknown) if unknown
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
                                                      ", ".join(unknown)))
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
