"""fields_used, grounding precision and recall, forbidden and name-alike fields.

A call uses every column the statement it ran touches in any clause (SELECT, WHERE, JOIN and its
keys, GROUP BY, HAVING, ORDER BY), qualified to ``product.column``; precision and recall count
them all. What it ran is its evidence (the statement a result reports, made plain: the caller's
policy is not the call's choice) or the SQL it sent. A call that carries neither uses the
arguments it passed, as ``tool.argument``: the labeller cannot know the columns behind them, and
says so (calls.py). Calls the server refused are left out: they read nothing. ``SELECT *`` names
no field. A forbidden or name-alike field is a symptom only where the answer can rest on it: a
column a statement merely returns as it is (a listing's columns) or joins on is not that.
"""

from __future__ import annotations

import re

from tether.eval.label.definition import gold_definition, gold_term
from tether.eval.label.work import Finding, Work, rule

_STOP = {"id", "ids", "at", "is", "no", "of", "the", "by", "a", "an", "and", "in", "to", "on",
         "usd", "cents", "pct", "count", "date", "name", "type", "value", "amount", "number",
         "ref", "key", "code"}


def used_fields(work: Work) -> dict[str, set[str]]:
    """{field: aliases}: the field's ``product.column``, or ``tool.argument`` for what a call
    without evidence or SQL passed."""
    used: dict[str, set[str]] = {}
    for c in work.ok_calls():
        for a in c.sql:
            for f, _ in a.shape.uses:
                used.setdefault(f, set())
        if c.ran:
            continue
        for arg, value in c.call.arguments.items():
            if value is not None:
                used.setdefault(f"{c.name}.{arg}".lower(), set())
    return used


def relied_on(work: Work) -> tuple[set[str], set[str]]:
    """(fields an answer can rest on, fields used only as join keys). A column a statement only
    returns as it is (a listing's columns) is used but not relied on: the answer did not filter,
    group or compute by it. Fields of calls that ran no statement (their arguments) count."""
    relied: set[str] = set()
    keys: set[str] = set()
    other: set[str] = set()
    for c in work.ok_calls():
        if not c.ran:
            relied |= {f"{c.name}.{a}".lower() for a, v in c.call.arguments.items()
                       if v is not None}
        for a in c.sql:
            shown = set(a.shape.projections.values())
            joined = {x for cmp in a.shape.comparisons if cmp.other is not None
                      and cmp.clause == "join" for x in (cmp.field, cmp.other)}
            for fld, clause in a.shape.uses:
                if clause == "select" and fld in shown:
                    continue
                relied.add(fld)
                if clause == "join" and fld in joined:
                    keys.add(fld)
                else:
                    other.add(fld)
    return relied, keys - other


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", name.lower()) if t}


def name_alikes(work: Work, unrequired: list[str], required: set[str]) -> list[str]:
    """Used fields that are not required but whose name shares a meaningful word with a
    required field or with the business term of the definition (a flag named after the term,
    or a legacy code column beside the governed one)."""
    products = set(work.ctx.pks) | {f.split(".")[0] for f in required}
    stop = _STOP | {t for p in products for t in (p, p.rstrip("s"))} | {
        t for p in products for part in p.split("_") for t in (part, part.rstrip("s"))}
    targets: set[str] = set()
    for r in required:
        targets |= _tokens(r.split(".", 1)[-1])
    term = gold_term(work)
    config = work.ctx.config
    if term and config is not None and term in config.glossary:
        for words in [term, *config.glossary[term].synonyms]:
            targets |= _tokens(words)
    targets -= stop
    out = []
    for f in unrequired:
        common = (_tokens(f.split(".", 1)[-1]) - stop) & targets
        if common:
            out.append(f)
    return out


def filtered_fields(work: Work) -> list[tuple[str, str]]:
    """(call label, field) for every field a call filtered rows on: the WHERE and ON conditions
    of what it ran."""
    out: list[tuple[str, str]] = []
    for c in work.ok_calls():
        fields: set[str] = set()
        for a in c.sql:
            for _, fs, _ in a.shape.conjuncts:
                fields |= fs
        out += [(c.label, f) for f in sorted(fields)]
    return out


@rule(writes={"fields_used", "grounding_precision", "grounding_recall", "forbidden_used",
             "symptoms"})
def grounding(work: Work) -> Finding:
    """fields_used, grounding_precision, grounding_recall; forbidden and look-alike symptoms."""
    f = Finding()
    ctx = work.ctx
    gold_definition(work)  # names the business term, for the look-alike check
    used = used_fields(work)
    required = {ctx.field(r) for r in work.gold.required_fields}
    forbidden = {ctx.field(r) for r in work.gold.forbidden_fields}

    def hits(field: str, names: set[str]) -> bool:
        return field in names or bool(used.get(field, set()) & names)

    good = [u for u in used if hits(u, required)]
    covered = [r for r in required if r in used or any(r in a for a in used.values())]
    f.values["fields_used"] = sorted(used)
    f.values["grounding_precision"] = round(len(good) / len(used), 4) if used else None
    f.values["grounding_recall"] = round(len(covered) / len(required), 4) if required else None
    relied, keys = relied_on(work)
    bad = sorted(u for u in used if hits(u, forbidden) and u in relied)
    f.facts["forbidden_used"] = bad
    for b in bad:
        f.symptom("semantic", f"forbidden field {b} used")
    lookalike = name_alikes(work, sorted(u for u in used if u not in good and u not in bad
                                         and u in relied and u not in keys), required)
    for la in lookalike:
        f.symptom("semantic", f"name-alike field {la} used instead of a governed field")
    times = ctx.time_fields()
    if required:
        gold_pred, _ = gold_definition(work)
        meant = required | (gold_pred.fields if gold_pred else frozenset())
        for label, fld in filtered_fields(work):
            if fld not in meant and fld not in times and fld not in bad and fld not in lookalike \
                    and not hits(fld, required):
                f.symptom("semantic", f"{label}: filtered on {fld}, which the question does not "
                          "ask for")
    for r in sorted(required - set(covered)):
        cls = "temporal" if r in times else "semantic"
        f.symptom(cls, f"required field {r} not used")
    if ctx.project is not None and any(c.sql for c in work.ok_calls()) and ctx.schema_problem:
        f.review.append(f"the source's schema could not be read ({ctx.schema_problem}); SQL "
                        "columns were placed from the query alone")
    unresolved = sorted({u for c in work.ok_calls() for a in c.sql for u in a.shape.unresolved})
    if unresolved:
        f.review.append("columns the labeller could not place: " + ", ".join(unresolved[:8]))
    broken = [c.label for c in work.ok_calls() for a in c.sql if a.shape.error]
    if broken:
        f.review.append("SQL the labeller could not analyse in " + ", ".join(broken[:5]))
    return f
