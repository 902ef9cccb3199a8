"""What one SQL statement an agent sent actually used: fields by clause, predicates, comparisons,
joins that fan out and money columns compared across units.

Parsed with sqlglot in the source's dialect and qualified against the project's schema, so
every column becomes ``product.column`` whichever alias or clause it came through. Analysis is
cached by *shape*: string literals, typed date literals and compared numbers are swapped for
placeholders before parsing, so ``... WHERE zone = 'NORTH'`` and ``... = 'SOUTH'`` share
one parse; the literal values are kept per statement and bound back only where a scorer needs
them (predicates, date bounds, identifier checks).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope

from tether.eval.label.context import LabelContext
from tether.eval.label.sql.shaper import shape_of

_CLAUSES = {"expressions": "select", "where": "where", "joins": "join", "group": "group",
            "having": "having", "order": "order", "qualify": "qualify", "from": "from",
            "laterals": "from"}
_OPS: dict[type[exp.Expr], str] = {exp.EQ: "eq", exp.NEQ: "neq", exp.GT: "gt", exp.GTE: "gte",
                                   exp.LT: "lt", exp.LTE: "lte", exp.Like: "like",
                                   exp.ILike: "like"}
_MIRROR = {"gt": "lt", "gte": "lte", "lt": "gt", "lte": "gte"}


@dataclass(frozen=True)
class Comparison:
    """``field op constant`` (or ``field op other``) found in a WHERE, ON or HAVING clause."""

    field: str
    op: str  # eq neq gt gte lt lte like in
    operands: tuple[exp.Expr, ...]  # constant expressions, possibly with placeholders
    other: str | None  # the other side's field, when a column is compared with a column
    clause: str
    derived: bool  # the column sits inside a function (date_trunc, extract, ...)


_UIDS = itertools.count()


@dataclass
class SqlShape:
    """The literal-independent analysis of one statement shape."""

    uid: int = field(default_factory=lambda: next(_UIDS))
    error: str | None = None
    uses: list[tuple[str, str]] = field(default_factory=list)  # (product.column, clause)
    unresolved: list[str] = field(default_factory=list)
    products: list[str] = field(default_factory=list)
    # predicates: (AST with placeholders, its fields, the placeholders in it)
    conjuncts: list[tuple[exp.Expr, frozenset[str], tuple[str, ...]]] = field(default_factory=list)
    conditional: list[tuple[exp.Expr, frozenset[str], tuple[str, ...]]] = field(
        default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    fanout: list[str] = field(default_factory=list)
    unit_mix: list[str] = field(default_factory=list)
    projections: dict[str, str] = field(default_factory=dict)  # output name -> product.column
    star: list[str] = field(default_factory=list)  # products selected with *

    @property
    def fields(self) -> set[str]:
        return {f for f, _ in self.uses}


@dataclass(frozen=True)
class SqlAnalysis:
    """One statement: its shape plus the literal values its placeholders stand for."""

    sql: str
    shape: SqlShape
    values: Mapping[str, exp.Expr]

    def bind(self, node: exp.Expr) -> exp.Expr:
        """A copy of ``node`` with the statement's literals in place of placeholders."""
        if not self.values:
            return node.copy()

        def put(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Placeholder) and n.name in self.values:
                return self.values[n.name].copy()
            return n

        return node.copy().transform(put)

    def values_of(self, names: tuple[str, ...]) -> tuple[tuple[str, str, bool], ...]:
        """The literal values behind ``names``, as a hashable key."""
        out = []
        for n in names:
            v = self.values.get(n)
            if isinstance(v, exp.Literal):
                out.append((n, str(v.this), bool(v.is_string)))
            elif v is not None:
                out.append((n, v.sql(), False))
        return tuple(out)

    def constant(self, node: exp.Expr) -> Any:
        """The Python value of a constant operand (NOT_CONSTANT when it is not one)."""
        return py_value(self.bind(node))


NOT_CONSTANT = object()


def py_value(node: exp.Expr) -> Any:
    """Literal -> str/int/float, TRUE/FALSE -> bool, NULL -> None, CAST('x' AS DATE) -> 'x'."""
    while isinstance(node, exp.Cast | exp.TryCast | exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg):
        inner = py_value(node.this)
        return -inner if isinstance(inner, int | float) else NOT_CONSTANT
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        try:
            return int(node.this)
        except ValueError:
            try:
                return float(node.this)
            except ValueError:
                return NOT_CONSTANT
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    return NOT_CONSTANT


# --- entry point ---------------------------------------------------------------------------------


def analyse(ctx: LabelContext, sql: str) -> list[SqlAnalysis]:
    """Every statement of ``sql``, analysed (cached by exact text and by shape, unless the
    context turns caching off)."""
    key = ("sql", ctx.dialect, sql)
    hit = ctx.cache.get(key) if ctx.shape_cache else None
    if hit is not None:
        ctx.count("sql_exact_hits")
        result: list[SqlAnalysis] = hit
        return result
    with ctx.timed("sql"):
        shaped = shape_of(sql, ctx.dialect) if ctx.shape_cache else None
        out: list[SqlAnalysis] | None = None
        if shaped is not None:
            text, values = shaped
            skey = ("shape", ctx.dialect, text)
            shapes = ctx.cache.get(skey)
            if shapes is None:
                ctx.count("sql_shapes")
                shapes = _analyse_text(ctx, text)
                ctx.cache[skey] = shapes
            else:
                ctx.count("sql_shape_hits")
            if not any(s.error for s in shapes):
                out = [SqlAnalysis(sql, s, values) for s in shapes]
        if out is None:  # no shape (or the placeholders did not parse): the text itself
            ctx.count("sql_parsed")
            out = [SqlAnalysis(sql, s, {}) for s in _analyse_text(ctx, sql)]
    if ctx.shape_cache:
        ctx.cache[key] = out
    return out


# --- analysis of one text ------------------------------------------------------------------------


def _analyse_text(ctx: LabelContext, text: str) -> list[SqlShape]:
    try:
        statements = [s for s in sqlglot.parse(text, read=ctx.dialect) if s is not None]
    except sqlglot.errors.SqlglotError as e:
        return [SqlShape(error=f"does not parse: {str(e).splitlines()[0]}")]
    shapes = [_analyse_statement(ctx, s) for s in statements if isinstance(s, exp.Query)]
    return shapes or [SqlShape(error="not a query")]


def _qualified(ctx: LabelContext, stmt: exp.Expr) -> exp.Expr:
    def bare(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Table) and n.name.lower() in ctx.table_map and n.args.get("db"):
            n.set("db", None)
            n.set("catalog", None)
        return n

    stmt = stmt.transform(bare, copy=False)
    for schema in (ctx.schema(), None):
        try:
            return qualify(stmt.copy(), dialect=ctx.dialect, schema=schema,
                           validate_qualify_columns=False, expand_stars=False,
                           quote_identifiers=False, identify=False)
        except Exception:  # sqlglot raises many kinds; the next try is simpler
            continue
    return stmt


def _analyse_statement(ctx: LabelContext, stmt: exp.Expr) -> SqlShape:
    q = _qualified(ctx, stmt)
    try:
        root = build_scope(q)
    except Exception as e:  # scope building fails on exotic syntax
        return SqlShape(error=f"cannot follow its scopes: {e}")
    shape = SqlShape()
    if root is None:
        return shape
    scopes = list(root.traverse())
    schema_cols = ctx.schema_columns() or {}
    for scope in scopes:
        _columns(ctx, scope, shape, schema_cols)
    seen: set[int] = set()
    for scope in scopes:
        if isinstance(scope.expression, exp.Select):
            _predicates(ctx, scope, scope.expression, shape, seen)
            _fanout(ctx, scope, scope.expression, shape)
    if isinstance(root.expression, exp.Select):
        _projections(ctx, root, root.expression, shape)
    shape.products = sorted({ctx.product_of(s.name) for sc in scopes
                             for _, s in sc.selected_sources.values() if isinstance(s, exp.Table)})
    return shape


def _source_of(scope: Scope, alias: str) -> exp.Expr | Scope | None:
    s: Scope | None = scope
    while s is not None:
        hit = s.selected_sources.get(alias)
        if hit is not None:
            src: exp.Expr | Scope = hit[1]
            return src
        s = s.parent
    return None


def _resolve(ctx: LabelContext, scope: Scope, col: exp.Column, depth: int = 0
             ) -> tuple[str | None, str]:
    """(product.column, how): how is ``table`` when the column reads a table of this scope,
    ``derived`` when it reads a derived table or CTE (whose own scope counts the base column;
    the field is given when the projection is a plain column), ``unknown`` otherwise."""
    alias = col.table
    if not alias:
        if len(scope.selected_sources) != 1:
            return None, "unknown"
        alias = next(iter(scope.selected_sources))
    src = _source_of(scope, alias)
    name = col.name.lower()
    if isinstance(src, exp.Table):
        return f"{ctx.product_of(src.name)}.{name}", "table"
    if isinstance(src, Scope):
        if depth < 8 and isinstance(src.expression, exp.Select):
            for p in src.expression.expressions:
                if p.alias_or_name.lower() == name:
                    target = p.unalias()
                    if isinstance(target, exp.Column):
                        return _resolve(ctx, src, target, depth + 1)[0], "derived"
        return None, "derived"
    return None, "unknown"


def _clause(select: exp.Expr, node: exp.Expr) -> str:
    child, parent = node, node.parent
    while parent is not None and parent is not select:
        child, parent = parent, parent.parent
    return _CLAUSES.get(child.arg_key or "", "other") if parent is select else "other"


def _columns(ctx: LabelContext, scope: Scope, shape: SqlShape,
             schema_cols: dict[str, dict[str, str]]) -> None:
    select = scope.expression
    aliases = {p.alias.lower() for p in getattr(select, "expressions", [])
               if isinstance(p, exp.Alias)}
    for col in scope.columns:
        clause = _clause(select, col)
        if not col.table and col.name.lower() in aliases and clause != "select":
            continue  # ORDER BY / HAVING naming a projection
        f, how = _resolve(ctx, scope, col)
        if f is not None and how == "table":
            table, _, column = f.partition(".")
            known = schema_cols.get(table)
            if known is not None and column not in known:
                f, how = None, "unknown"
        if how == "unknown":
            shape.unresolved.append(col.sql(dialect=ctx.dialect))
        if f is None:
            continue
        col.meta["field"] = f
        if how == "table":
            shape.uses.append((f, clause))


def fields_in(node: exp.Expr) -> frozenset[str]:
    return frozenset(c.meta["field"] for c in node.find_all(exp.Column) if "field" in c.meta)


def flatten_and(node: exp.Expr) -> Iterator[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from flatten_and(node.this)
        yield from flatten_and(node.expression)
    else:
        yield node


def _is_key_equality(node: exp.Expr) -> bool:
    return isinstance(node, exp.EQ) and isinstance(node.this, exp.Column) \
        and isinstance(node.expression, exp.Column)


def _column_side(node: exp.Expr) -> tuple[exp.Column | None, bool]:
    while isinstance(node, exp.Paren | exp.Cast | exp.TryCast):
        node = node.this
    if isinstance(node, exp.Column):
        return node, False
    if isinstance(node, exp.Func) and not isinstance(node, exp.AggFunc) \
            and node.find(exp.Select) is None:
        cols = list(node.find_all(exp.Column))
        if len(cols) == 1:
            return cols[0], True
    return None, False


def _is_constant(node: exp.Expr) -> bool:
    return node.find(exp.Column, exp.Select) is None


def _conditions(select: exp.Select) -> Iterator[tuple[exp.Expr, str]]:
    where = select.args.get("where")
    if where is not None:
        yield where.this, "where"
    for j in select.args.get("joins") or []:
        on = j.args.get("on")
        if on is not None:
            yield on, "join"
    having = select.args.get("having")
    if having is not None:
        yield having.this, "having"


def _predicates(ctx: LabelContext, scope: Scope, select: exp.Select, shape: SqlShape,
                seen: set[int]) -> None:
    for cond, clause in _conditions(select):
        if clause != "having":
            for c in flatten_and(cond):
                if not _is_key_equality(c):
                    shape.conjuncts.append(_predicate(c))
        for node in cond.find_all(exp.Binary, exp.In, exp.Between):
            if id(node) not in seen:
                seen.add(id(node))
                shape.comparisons.extend(_comparison(node, clause))
        _unit_mix(ctx, cond, shape)
    for p in select.expressions:
        for f in p.find_all(exp.Filter):
            where = f.expression
            if isinstance(where, exp.Where):
                shape.conditional.append(_predicate(where.this))
        for node in p.find_all(exp.If):
            shape.conditional.append(_predicate(node.this))
        _unit_mix(ctx, p, shape)


def _predicate(node: exp.Expr) -> tuple[exp.Expr, frozenset[str], tuple[str, ...]]:
    names = tuple(p.name for p in node.find_all(exp.Placeholder))
    return node.copy(), fields_in(node), names


def _comparison(node: exp.Expr, clause: str) -> list[Comparison]:
    if isinstance(node, exp.In):
        col, derived = _column_side(node.this)
        exprs = node.expressions
        if col is None or "field" not in col.meta or not exprs \
                or not all(_is_constant(e) for e in exprs):
            return []
        return [Comparison(col.meta["field"], "in", tuple(e.copy() for e in exprs), None, clause,
                           derived)]
    if isinstance(node, exp.Between):
        col, derived = _column_side(node.this)
        lo, hi = node.args.get("low"), node.args.get("high")
        if col is None or "field" not in col.meta or lo is None or hi is None:
            return []
        f = col.meta["field"]
        return [Comparison(f, "gte", (lo.copy(),), None, clause, derived),
                Comparison(f, "lte", (hi.copy(),), None, clause, derived)]
    op = _OPS.get(type(node))
    if op is None or not isinstance(node, exp.Binary):
        return []
    left, ld = _column_side(node.left)
    right, rd = _column_side(node.right)
    if left is not None and "field" in left.meta:
        if right is not None and "field" in right.meta:
            return [Comparison(left.meta["field"], op, (), right.meta["field"], clause, ld)]
        if _is_constant(node.right):
            return [Comparison(left.meta["field"], op, (node.right.copy(),), None, clause, ld)]
    elif right is not None and "field" in right.meta and _is_constant(node.left):
        return [Comparison(right.meta["field"], _MIRROR.get(op, op), (node.left.copy(),), None,
                           clause, rd)]
    return []


def cents_vs_dollars(a: str | None, b: str | None) -> bool:
    """USD_cents against USD (any currency): the same money in units 100 apart."""
    if not a or not b:
        return False
    a, b = a.lower(), b.lower()
    return (a.endswith("_cents") and a[:-6] == b) or (b.endswith("_cents") and b[:-6] == a)


def _unit_mix(ctx: LabelContext, node: exp.Expr, shape: SqlShape) -> None:
    if not ctx.units:
        return
    for b in node.find_all(exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Add, exp.Sub):
        left, _ = _column_side(b.left)
        right, _ = _column_side(b.right)
        if left is None or right is None:
            continue
        fl, fr = left.meta.get("field"), right.meta.get("field")
        if cents_vs_dollars(ctx.units.get(fl or ""), ctx.units.get(fr or "")):
            text = (f"{fl} ({ctx.units[fl or '']}) and {fr} ({ctx.units[fr or '']}) combined "
                    f"with {b.key.upper()}")
            if text not in shape.unit_mix:
                shape.unit_mix.append(text)


# --- fan-out: aggregation after a one-to-many join -----------------------------------------------


def unique_keys(ctx: LabelContext, product: str) -> list[set[str]]:
    """Column sets that identify a row: the primary key, and a crosswalk's scheme columns."""
    keys = [set(ctx.pks[product])] if ctx.pks.get(product) else []
    config = ctx.config
    if config is not None:
        for scheme in config.identifier_schemes.values():
            table, _, column = (scheme.crosswalk or "").partition(".")
            if table and ctx.product_of(table) == product and column:
                keys.append({column.lower()})
    return keys


def _join_keys(select: exp.Select, tables: Mapping[str, str]) -> dict[str, set[str]]:
    keycols: dict[str, set[str]] = {a: set() for a in tables}
    conds: list[exp.Expr] = []
    for cond, clause in _conditions(select):
        if clause != "having":
            conds.extend(flatten_and(cond))
    for c in conds:
        if _is_key_equality(c):
            left, right = c.this, c.expression
            assert isinstance(left, exp.Column) and isinstance(right, exp.Column)
            if left.table in tables and right.table in tables and left.table != right.table:
                keycols[left.table].add(left.name.lower())
                keycols[right.table].add(right.name.lower())
    return keycols


def _fanout(ctx: LabelContext, scope: Scope, select: exp.Select, shape: SqlShape) -> None:
    tables = {alias: ctx.product_of(src.name) for alias, (_, src) in scope.selected_sources.items()
              if isinstance(src, exp.Table)}
    if len(tables) < 2 or not ctx.pks:
        return
    keycols = _join_keys(select, tables)
    many = {a for a, p in tables.items()
            if (keys := unique_keys(ctx, p)) and not any(k <= keycols[a] for k in keys)}
    if not many:
        return
    for agg in _aggregates(select):
        for col in agg.find_all(exp.Column):
            alias = col.table
            culprits = sorted(tables[b] for b in many if b != alias)
            if alias in tables and culprits and "field" in col.meta:
                text = (f"{agg.key.upper()}({col.meta['field']}) after a one-to-many join to "
                        f"{', '.join(culprits)}")
                if text not in shape.fanout:
                    shape.fanout.append(text)


def _aggregates(select: exp.Select) -> Iterable[exp.Expr]:
    having = select.args.get("having")
    for part in [*select.expressions, *([having] if having is not None else [])]:
        for agg in part.find_all(exp.Sum, exp.Avg, exp.Count):
            if agg.find_ancestor(exp.Select) is not select:
                continue
            if isinstance(agg, exp.Count) and isinstance(agg.this, exp.Distinct | exp.Star):
                continue
            yield agg


def _projections(ctx: LabelContext, scope: Scope, select: exp.Select, shape: SqlShape) -> None:
    tables = {alias: ctx.product_of(src.name) for alias, (_, src) in scope.selected_sources.items()
              if isinstance(src, exp.Table)}
    for p in select.expressions:
        target = p.unalias()
        if isinstance(target, exp.Star):
            shape.star.extend(sorted(set(tables.values())))
        elif isinstance(target, exp.Column) and isinstance(target.this, exp.Star):
            if target.table in tables:
                shape.star.append(tables[target.table])
        elif isinstance(target, exp.Column) and "field" in target.meta:
            shape.projections[p.alias_or_name.lower()] = target.meta["field"]
