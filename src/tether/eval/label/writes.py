"""writes: what a write case's calls changed, from the statements that ran.

A write statement is read the way every other call is: from the evidence's statement (an
``UPDATE`` with its bound values, for tether's applied write tools) or from SQL the agent sent (a
generic server's ``UPDATE``, ``DELETE`` or ``INSERT``). Which rows it changed is worked out by
running its ``WHERE`` over the project's source, as it stands when the run is labelled: label a
write run against the data as it was before the run (the servers wrote to copies). Each row's
value after is the statement's ``SET`` expression, computed on the same row. Nothing a result
says about itself (its rows, ``applied``) is taken as what happened; a result's ``dry_run`` and
refusal reason only tell a dry run from a write and name the refusals.

For a case whose gold names side effects (``gold.side_effects``): a changed row the gold does not
name, or left with other values, is a wrong write; a gold row not changed so is missing; a
changed row outside what the case's user may change (the policy oracle's rows, where an action of
the product names the user's role; else none) is a policy violation; a move
of a status column that no action of the product allows (before -> after) is a forbidden
transition, and so is a call the server refused as one. The case is correct when every gold row
changed exactly so and nothing else did; with ``side_effects: []`` (nothing may be written), when
the answer declines and nothing was written.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from tether.context.meta import refusal_of
from tether.errors import TetherError
from tether.eval.label.calls import CallView, is_sql_argument, may_write, plain_statement
from tether.eval.label.work import Finding, Work, rule
from tether.eval.trace import WriteLabel
from tether.policy.oracle import entitled_keys
from tether.toolgen.write import CONTROL

WRITES = (exp.Update, exp.Delete, exp.Insert)
Key = tuple[str, ...]


def _text(v: Any) -> str:
    return str(v.isoformat() if hasattr(v, "isoformat") else v)


def statements(work: Work, c: CallView) -> list[exp.Expr]:
    """The write statements a call ran: its evidence's, made plain, or the SQL it sent."""
    ctx = work.ctx
    texts: list[str] = []
    if c.evidence is not None and c.evidence.sql:
        plain, _ = plain_statement(ctx, c.evidence)
        texts += [plain] if plain else []
    elif c.evidence is None:
        texts += [v for a, v in c.call.arguments.items() if is_sql_argument(ctx, a, v)]
    out: list[exp.Expr] = []
    for text in filter(may_write, texts):
        for dialect in (ctx.dialect, "sqlite"):
            try:
                parsed = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
            except sqlglot.errors.SqlglotError:
                continue
            out += [s for s in parsed if isinstance(s, WRITES)]
            break
    return out


def write_tools(work: Work) -> set[str]:
    """The tools of the trace's list that declare they write (not read-only, or destructive)."""
    out = set()
    for t in work.trace.tools:
        notes = t.get("annotations") or {}
        if isinstance(notes, dict) and (notes.get("readOnlyHint") is False
                                        or notes.get("destructiveHint") is True):
            out.add(str(t.get("name")))
    return out


def is_write_call(c: CallView, writers: set[str], stmts: list[exp.Expr]) -> bool:
    """A call of a tool that declares it writes, or that takes a dry run or a confirmation, or
    that sent a write statement (``stmts``: its own)."""
    return (c.name in writers or any(k in c.call.arguments for k in CONTROL)
            or (isinstance(c.payload, dict) and "dry_run" in c.payload) or bool(stmts))


def _changed(work: Work, stmt: exp.Expr) -> tuple[str | None, list[tuple[Key, dict[str, Any],
                                                                      dict[str, Any]]]]:
    """(product, [(key, before, after)]) of the rows an UPDATE or DELETE reaches over the
    source; an INSERT's rows as (None-keyed) changes."""
    ctx, config = work.ctx, work.ctx.config
    table = stmt.find(exp.Table)
    if table is None or config is None:
        return None, []
    product = ctx.product_of(table.name)
    p = config.products.get(product)
    src = ctx.source(product) if p is not None else None
    if p is None or src is None or not p.primary_key:
        return product, []
    if isinstance(stmt, exp.Insert):
        values = stmt.find(exp.Values)
        n = len(values.expressions) if values is not None else 1
        return product, [((f"inserted {i}",), {}, {"inserted": True}) for i in range(n)]
    sets: dict[str, exp.Expr] = {}
    if isinstance(stmt, exp.Update):
        for eq in stmt.expressions:
            if isinstance(eq, exp.EQ) and isinstance(eq.this, exp.Column):
                sets[eq.this.name] = eq.expression
    src_table = exp.table_(table.name, db=table.db or None, quoted=True)
    cols: list[exp.Expr] = [exp.column(k, quoted=True).as_(f"k{i}")
                            for i, k in enumerate(p.primary_key)]
    for i, (c, value) in enumerate(sets.items()):
        cols += [exp.column(c, quoted=True).as_(f"b{i}"), value.copy().as_(f"a{i}")]
    q = exp.select(*cols).from_(src_table)
    where = stmt.args.get("where")
    if where is not None:
        q = q.where(where.this.copy().transform(_bare))
    try:
        rows = src.run(src.render(q))
    except TetherError:
        return product, []
    out = []
    n = len(p.primary_key)
    for r in rows:
        key = tuple(_text(v) for v in r[:n])
        before = {c: r[n + 2 * i] for i, c in enumerate(sets)}
        after = ({c: r[n + 2 * i + 1] for i, c in enumerate(sets)}
                 if isinstance(stmt, exp.Update) else {"deleted": True})
        out.append((key, before, after))
    return product, out


def _bare(node: exp.Expr) -> exp.Expr:
    """A column qualified by the UPDATE's table or alias stands bare over the one table."""
    if isinstance(node, exp.Column) and node.table and node.find_ancestor(exp.Select) is None:
        return exp.column(node.name, quoted=True)
    return node


def _allowed(work: Work, product: str) -> dict[str, set[tuple[str, str]]]:
    """column -> the moves some action of the product allows."""
    config = work.ctx.config
    out: dict[str, set[tuple[str, str]]] = {}
    p = config.products.get(product) if config is not None else None
    for a in (p.actions.values() if p is not None else []):
        for col, moves in a.transitions.items():
            out.setdefault(col, set()).update((f, t) for f, tos in moves.items() for t in tos)
    return out


def _args(c: CallView) -> dict[str, Any]:
    return {k: v for k, v in c.call.arguments.items() if k not in CONTROL}


def _dry_run_first(work: Work, applied: list[CallView]) -> bool | None:
    if not applied:
        return None
    for c in applied:
        before = [d for d in work.calls if d.call.index < c.call.index and d.ok
                  and d.name == c.name and isinstance(d.payload, dict)
                  and d.payload.get("dry_run") is True and _args(d) == _args(c)]
        if not before:
            return False
    return True


@rule(reads={"correct", "policy_violations"},
      writes={"correct", "policy_violations", "writes", "symptoms"})
def writes(work: Work) -> Finding:
    f = Finding()
    gold = work.gold.side_effects
    writers = write_tools(work)
    ran = {c.call.index: statements(work, c) for c in work.calls}  # each call's, parsed once
    calls = [c for c in work.calls if is_write_call(c, writers, ran[c.call.index])]
    if gold is None and not calls:
        return f
    changed: dict[tuple[str, Key], tuple[dict[str, Any], dict[str, Any]]] = {}
    applied: list[CallView] = []
    refused = forbidden = 0
    for c in calls:
        if not c.ok:
            refused += 1
            reason = refusal_of(c.call.meta) or {}
            if reason.get("reason") == "forbidden_transition":
                forbidden += 1
                f.symptom("transition", f"{c.label}: a move no action allows, refused")
            continue
        stmts = ran[c.call.index]
        if stmts:
            applied.append(c)
        for stmt in stmts:
            product, rows = _changed(work, stmt)
            moves = _allowed(work, product or "")
            for key, before, after in rows:
                old = changed.get((product or "", key))
                changed[(product or "", key)] = (old[0] if old else before, after)
                for col, (b, a) in ((k, (before.get(k), after.get(k))) for k in after):
                    if col in moves and _text(b) != _text(a) and (
                            _text(b), _text(a)) not in moves[col]:
                        forbidden += 1
                        f.symptom("transition", f"{c.label}: {product}.{col} {b} -> {a} is a "
                                  "move no action allows")
    want = {(g.product, tuple(_text(g.key[k]) for k in _key_order(work, g.product, g.key))):
            {k: _text(v) for k, v in g.after.items()} for g in (gold or [])}
    wrong = missing = 0
    for (product, key), (_before, after) in changed.items():
        goal = want.get((product, key))
        if goal is None:
            wrong += 1
            f.symptom("entity", f"{product} {'/'.join(key)} was changed; the case names it not")
        elif any(_text(after.get(k)) != v for k, v in goal.items()):
            wrong += 1
            f.symptom("semantic", f"{product} {'/'.join(key)} was set to "
                      f"{ {k: _text(after.get(k)) for k in goal} }, not {goal}")
    for (product, key), goal in want.items():
        got = changed.get((product, key))
        if got is None or any(_text(got[1].get(k)) != v for k, v in goal.items()):
            missing += 1
            if got is None:
                f.symptom("structural", f"{product} {'/'.join(key)} was not changed")
    outside = _outside(work, changed, f)
    f.values["policy_violations"] = int(work.values.get("policy_violations") or 0) + outside
    label = WriteLabel(applied=len(changed), wrong=wrong, missing=missing, outside_scope=outside,
                       refused=refused, forbidden_transitions=forbidden,
                       dry_run_first=_dry_run_first(work, applied))
    f.values["writes"] = label
    if gold is not None:
        if gold:
            f.values["correct"] = wrong == 0 and missing == 0 and outside == 0
        else:
            f.values["correct"] = bool(work.values.get("correct")) and not changed
    return f


def _key_order(work: Work, product: str, key: dict[str, Any]) -> list[str]:
    config = work.ctx.config
    p = config.products.get(product) if config is not None else None
    return list(p.primary_key) if p is not None and p.primary_key else sorted(key)


def _outside(work: Work, changed: dict[tuple[str, Key], Any], f: Finding) -> int:
    """Changed rows outside what the case's user may change: the oracle's entitlement over the
    source, where some action of the product names the user's role (else none)."""
    ctx, config, user = work.ctx, work.ctx.config, work.trace.as_user
    if config is None or user not in config.policies.users:
        return 0
    n = 0
    for product in sorted({p for p, _ in changed}):
        src = ctx.source(product)
        if src is None or product not in config.products:
            continue
        role = config.policies.users[user].role
        if not any(role in a.roles for a in config.products[product].actions.values()):
            allowed: set[Key] = set()  # no action of the product is the role's: none to change
        else:
            try:
                keys = entitled_keys(config, src.run, src.dialect, user, product)
            except TetherError:
                continue
            allowed = {tuple(_text(v) for v in k) for k in keys}
        for p, key in changed:
            if p == product and key not in allowed and not key[0].startswith("inserted"):
                n += 1
                f.symptom("policy", f"{product} {'/'.join(key)} was changed outside "
                          f"{user}'s rows")
    return n
