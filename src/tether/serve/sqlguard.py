"""run_sql by resolution, not by name matching: what a query reads is worked out, then each data
product it reads is replaced by the caller's entitled relation (policy/entitle.py).

In order, on the parsed AST (sqlglot):
1. exactly one statement, a query, no parameters of its own, nothing that writes or changes the
   session (DDL, DML, SET, PRAGMA, ATTACH, COPY, transaction control: plain errors);
2. no CTE or alias may take the name of a table or a product (``shadowed_name``): a query can
   then never make a product, or a table a row filter reads, mean something else;
3. every function is on an allow-list for the dialect (``function_not_allowed``, naming it):
   anything that runs a SQL string, reads files, sleeps or reports the server is absent;
4. every table is a product the role may read (``denied_table``), or the query's own CTE;
5. no restricted column is named (``restricted``); a masked column is only ever selected, never
   compared, joined, grouped, ordered or passed to a function (``masked_predicate``), also
   through the CTEs and subqueries that select it; a predicate that pins a row-filtered column
   to a value outside the caller's scope is refused (``outside_entitlement``);
6. each product table is replaced by its entitled relation and the whole is capped in rows;
7. (:func:`bounded`) the engine itself keeps the result within the byte cap: it measures each
   value it would send and, from the row that reaches the cap on, sends NULL instead, with the
   position of a value too large to send at all (the server refuses the call naming that
   column). A value built by the statement never reaches the server whole.
The engine connection is read-only as well (DuckDB read_only with external access off and the
configuration locked; a PostgreSQL read-only transaction): two locks, either sufficient.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from tether.context.schema import Column
from tether.context.sqlfunctions import SESSION_NAMES as _SESSION_NAMES
from tether.context.sqlfunctions import disallowed_function
from tether.policy.entitle import NOT_YOURS, Entitled, Refusal


class GuardError(ValueError):
    """The SQL is refused for a reason other than policy; the message says what is allowed."""


MAX_SQL = 20_000

_FORBIDDEN_NODES: tuple[type[exp.Expr], ...] = tuple(
    getattr(exp, n) for n in (
        "Insert", "Update", "Delete", "Create", "Drop", "Alter", "Merge", "Command", "Copy",
        "Attach", "Detach", "Pragma", "Set", "Transaction", "Commit", "Rollback", "Use", "Into",
        "Lock", "LoadData", "Install", "Summarize", "Describe", "Show", "Analyze", "TruncateTable",
        "Placeholder", "Parameter", "SessionParameter", "Kill", "Grant", "Revoke",
        # SELECT TRANSFORM (...) USING 'script': Spark and Hive run the script on the cluster
        "QueryTransform",
    ) if hasattr(exp, n)
)

_TABLE_FUNCTIONS = (exp.GenerateSeries, exp.ExplodingGenerateSeries)
_TABLE_FUNCTION_NAMES = frozenset({"range", "generate_series"})


@dataclass
class Catalog:
    """What one user may read through run_sql on one source."""

    dialect: str
    tables: dict[str, str]
    """table name (lower case, unqualified) -> product"""
    reserved: set[str]
    """every table of the source and every product name (lower case): nothing may shadow one"""
    schemas: set[str]
    """schema qualifiers that mean the source's own default schema (lower case)"""
    entitled: Callable[[str], Entitled]
    """product -> its entitled relation for the user (Refusal when the role may not read it)"""
    restricted: dict[str, set[str]] = field(default_factory=dict)
    masked: dict[str, set[str]] = field(default_factory=dict)
    pinned: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    """product -> {column: the values of it the user may see} (simple row filters)"""


@dataclass
class Secured:
    query: exp.Query
    """the secured statement, capped in rows"""
    params: dict[str, Any]
    products: list[str]
    relations: list[Entitled]
    inner: exp.Query | None = None
    """the secured statement before the cap (:func:`bounded` wraps it)"""


def parse(sql: str, dialect: str) -> exp.Query:
    """One read-only query with no parameters of its own, or GuardError."""
    if len(sql) > MAX_SQL:
        raise GuardError(f"SQL longer than {MAX_SQL:,} characters is refused")
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except sqlglot.errors.SqlglotError as e:
        raise GuardError(f"the SQL does not parse: {str(e).splitlines()[0]}") from None
    except (RecursionError, IndexError, ValueError):  # parser failures sqlglot does not wrap
        raise GuardError("the SQL does not parse (nested too deeply, or a statement this tool "
                         "does not read)") from None
    if len(statements) != 1:
        raise GuardError("exactly one statement is allowed (no ';'-separated batches)")
    query = statements[0]
    if not isinstance(query, exp.Query):
        raise GuardError("only a SELECT query is allowed (read-only)")
    for node in query.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            what = "a query parameter" if node.key in ("placeholder", "parameter",
                                                       "sessionparameter") else node.key.upper()
            raise GuardError(f"{what} is not allowed: this tool only reads, with values "
                             "written into the query")
    return query


def secure(sql: str, catalog: Catalog, max_rows: int) -> Secured:
    """The query as the engine must run it for this user, or GuardError / Refusal."""
    query = parse(sql, catalog.dialect)
    ctes = _check_names(query, catalog)
    _check_functions(query, catalog.dialect)
    reads = _resolve_tables(query, catalog, ctes)
    products = sorted(set(reads.values()))
    relations = {p: catalog.entitled(p) for p in products}  # a denied product refuses here
    _check_columns(query, catalog, products)

    def swap(node: exp.Expr) -> exp.Expr:
        product = reads.get(id(node))
        if product is None:
            return node
        assert isinstance(node, exp.Table)
        alias = node.args.get("alias")
        sub = exp.Subquery(this=relations[product].query.copy(),
                           alias=alias.copy() if isinstance(alias, exp.TableAlias) else
                           exp.TableAlias(this=exp.to_identifier(node.name)))
        for arg in ("pivots", "sample", "laterals", "joins"):
            if node.args.get(arg):
                sub.set(arg, node.args[arg])
        return sub

    secured = query.transform(swap, copy=False)
    assert isinstance(secured, exp.Query)
    params: dict[str, Any] = {}
    for r in relations.values():
        params |= r.params
    capped = exp.select("*").from_(secured.subquery("tether_q"), copy=False).limit(
        exp.Literal.number(max_rows + 1), copy=False)
    return Secured(capped, params, products, list(relations.values()), inner=secured)


# --- the byte cap, in the statement --------------------------------------------------------------

PAGE_OFFSET = "tether_page_offset"
"""The bound parameter of a bounded statement's OFFSET: the rows earlier pages returned."""

_FIXED = frozenset({"integer", "float", "boolean", "date", "time", "timestamp", "timestamptz",
                    "uuid", "interval"})
"""Kinds whose values are a few bytes whatever they hold (counted 8, as the fetch counts them).
DuckDB's DECIMAL is too (38 digits at most); PostgreSQL's NUMERIC is not."""


def _sized(column: Column, dialect: str) -> bool:
    return not (column.kind in _FIXED or (column.kind == "decimal" and dialect == "duckdb"))


def _length(value: exp.Expr, column: Column, dialect: str, cap: int) -> exp.Expr:
    """Bytes of ``value`` as text (as JSON will carry it, near enough); a DuckDB list longer
    than the cap is over it without being written out as text first."""
    text = exp.Cast(this=value.copy(), to=exp.DataType.build("TEXT"))
    if dialect == "duckdb":
        length: exp.Expr = exp.Anonymous(this="strlen", expressions=[text])
        if column.kind == "list":
            return exp.Case(ifs=[exp.If(this=exp.GT(this=exp.Anonymous(
                this="len", expressions=[value.copy()]), expression=exp.Literal.number(cap)),
                true=exp.Literal.number(cap + 1))], default=length)
        return length
    if dialect == "postgres":
        return exp.Anonymous(this="octet_length", expressions=[text])
    return exp.Length(this=text)


def paged(query: exp.Query, max_rows: int) -> exp.Query:
    """``query``'s page: at most ``max_rows`` + 1 rows after the OFFSET :data:`PAGE_OFFSET`
    (what :func:`bounded` sends, less its measuring of values)."""
    return exp.select("*").from_(query.subquery("tether_q"), copy=False).limit(
        exp.Literal.number(max_rows + 1), copy=False).offset(
        exp.Placeholder(this=PAGE_OFFSET), copy=False)


def bounded(query: exp.Query, columns: list[Column], max_rows: int, max_bytes: int,
            dialect: str) -> exp.Query:
    """``query`` as the engine must run it for one page: at most ``max_rows`` + 1 rows after
    the OFFSET bound as :data:`PAGE_OFFSET`, and no more than ``max_bytes`` of values. Each value
    is measured as it will be sent (fixed-size kinds count 8 bytes, a NULL 8, text its bytes +
    2, a row 2 more: as the fetch counts them) and a running total kept in row order; from the
    first row that takes the total over ``max_bytes`` on, the values come as NULL and the last
    column, ``tether_over``, says why (the 1-based position of a value over the cap by itself,
    else 0: the page is full); before it, that column is NULL. Two layers over the query (each
    costs the engine's planner time on every call). ``columns``: the query's result columns as
    the engine describes them (:meth:`Source.result_columns`)."""
    cap = exp.Literal.number(max_bytes)
    names = [f"c{i}" for i in range(1, len(columns) + 1)]
    alias = exp.TableAlias(this=exp.to_identifier("tether_q"),
                           columns=[exp.to_identifier(n) for n in names])
    measured: list[tuple[int, str]] = []
    fixed = 2
    page = exp.select(*names)
    for i, (name, column) in enumerate(zip(names, columns, strict=True), start=1):
        if not _sized(column, dialect):
            fixed += 8
            continue
        size = exp.func("COALESCE", exp.Add(this=_length(exp.column(name), column, dialect,
                                                         max_bytes),
                                            expression=exp.Literal.number(2)),
                        exp.Literal.number(8))
        page = page.select(size.as_(f"s{i}"), copy=False)
        measured.append((i, f"s{i}"))
    total: exp.Expr = exp.Literal.number(fixed)
    for _, s in measured:
        total = exp.Add(this=total, expression=exp.column(s))
    page = page.from_(exp.Subquery(this=query.copy(), alias=alias), copy=False).limit(
        exp.Literal.number(max_rows + 1), copy=False).offset(
        exp.Placeholder(this=PAGE_OFFSET), copy=False)
    running = sqlglot.parse_one("SUM(tether_size) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND "
                                "CURRENT ROW)", read=dialect)
    running.this.set("this", total)  # the row's size, summed in row order
    over = exp.GT(this=running, expression=cap)
    out: list[exp.Expr] = []
    for name, column in zip(names, columns, strict=True):
        value: exp.Expr = exp.column(name)
        if _sized(column, dialect):
            value = exp.Case(ifs=[exp.If(this=over.copy(), true=exp.Null())], default=value)
        out.append(value.as_(exp.to_identifier(column.name, quoted=True)))
    which = exp.Case(ifs=[exp.If(this=exp.GT(this=exp.column(s), expression=cap.copy()),
                                 true=exp.Literal.number(i)) for i, s in measured],
                     default=exp.Literal.number(0)) if measured else exp.Literal.number(0)
    out.append(exp.Case(ifs=[exp.If(this=over.copy(), true=which)]).as_("tether_over"))
    return exp.select(*out).from_(page.subquery("tether_s"), copy=False)


# --- names ---------------------------------------------------------------------------------------


def _check_names(query: exp.Query, catalog: Catalog) -> set[str]:
    """The query's CTE names; Refusal when a CTE or an alias takes a table's or product's name."""
    ctes: set[str] = set()
    for node in query.find_all(exp.TableAlias):
        name = node.name.lower()
        if not name:
            continue
        parent = node.parent
        if isinstance(parent, exp.CTE):
            ctes.add(name)
        elif isinstance(parent, exp.Table) and parent.name.lower() == name:
            continue  # `FROM orders AS orders` names the table itself
        if name in catalog.reserved:
            what = "a CTE" if isinstance(parent, exp.CTE) else "an alias"
            raise Refusal("shadowed_name", f"{what} may not be named {node.name}, which is the "
                          "name of a table or data product here", hint="Rename it.")
    return ctes


def _function_name(node: exp.Func) -> str:
    return str(node.this) if isinstance(node, exp.Anonymous) else type(node).__name__


def _check_functions(query: exp.Query, dialect: str) -> None:
    name = disallowed_function(query, dialect)
    if name is not None:
        raise Refusal("function_not_allowed", f"function {name}() is not allowed in run_sql",
                      hint="Use plain SQL over the data products: aggregates, window, string, "
                      "date and math functions.")
    # the server's own names, written without parentheses (`SELECT user`), and casts to the
    # catalog's object identifier types (`'t'::regclass`) report the server, not the data
    for col in query.find_all(exp.Column):
        if not col.table and col.name.lower() in _SESSION_NAMES:
            raise Refusal("function_not_allowed", f"{col.name} is not allowed in run_sql")
    if query.find(exp.ObjectIdentifier):
        raise Refusal("function_not_allowed", "casts to object identifier types (regclass, "
                      "oid, ...) are not allowed in run_sql")


# --- tables --------------------------------------------------------------------------------------


def _resolve_tables(query: exp.Query, catalog: Catalog, ctes: set[str]) -> dict[int, str]:
    """{id(table node): product} for every table the query reads; CTE references are skipped
    (no CTE may have a table's name, so a name is a CTE or a table, never both)."""
    out: dict[int, str] = {}
    for node in query.find_all(exp.Table):
        if not isinstance(node.this, exp.Identifier):
            if isinstance(node.this, _TABLE_FUNCTIONS) or (
                    isinstance(node.this, exp.Anonymous)
                    and str(node.this.this).lower() in _TABLE_FUNCTION_NAMES):
                continue
            raise GuardError("table functions and file paths are not allowed in FROM; query "
                             f"the data products: {_products(catalog)}")
        if node.args.get("catalog"):
            raise GuardError("other databases or catalogs are not allowed")
        name, db = node.name.lower(), node.db.lower()
        if not db and name in ctes:
            continue
        product = catalog.tables.get(name)
        if product is None or (db and db not in catalog.schemas):
            raise GuardError(f"unknown table {node.sql(dialect=catalog.dialect)}; the data "
                             f"products here are: {_products(catalog)}")
        out[id(node)] = product
    return out


def _products(catalog: Catalog) -> str:
    return ", ".join(sorted(catalog.tables)) or "(none)"


# --- columns -------------------------------------------------------------------------------------


def _check_columns(query: exp.Query, catalog: Catalog, products: list[str]) -> None:
    restricted = {c for p in products for c in catalog.restricted.get(p, set())}
    masked = {c for p in products for c in catalog.masked.get(p, set())}
    pinned: dict[str, set[str]] = {}
    for p in products:
        for column, values in catalog.pinned.get(p, {}).items():
            pinned.setdefault(column, set()).update(values)
    for col in query.find_all(exp.Column):
        if col.name.lower() in restricted:
            raise Refusal("restricted", f"{col.name} is restricted: no tool returns it, and "
                          "no query may read it")
    for ident in _using(query):
        if ident.lower() in restricted:
            raise Refusal("restricted", f"{ident} is restricted: no query may read it")
    if masked:
        _check_masked(query, _derived_masked(query, masked))
    if pinned:
        _check_pinned(query, pinned)


def _using(query: exp.Query) -> list[str]:
    return [i.name for j in query.find_all(exp.Join) for i in j.args.get("using") or []]


def _bare(node: exp.Expr) -> exp.Expr | None:
    """The projection a column is, when it is selected as it is (``c`` or ``c AS x``)."""
    parent = node.parent
    if isinstance(parent, exp.Alias) and isinstance(parent.parent, exp.Select) and (
            parent.arg_key == "expressions"):
        return parent
    if isinstance(parent, exp.Select) and node.arg_key == "expressions":
        return node
    return None


def _derived_masked(query: exp.Query, masked: set[str]) -> set[str]:
    """Masked column names, with every name a CTE or subquery gives a selected masked column."""
    names = set(masked)
    while True:
        grown = set(names)
        for col in query.find_all(exp.Column):
            projection = _bare(col)
            if projection is not None and col.name.lower() in names:
                grown.add(projection.alias_or_name.lower())
        if grown == names:
            return names
        names = grown


def _masked_refusal(what: str) -> Refusal:
    return Refusal("masked_predicate", f"{what} is masked for your role: it may be selected, "
                   "not filtered, joined, grouped, ordered or passed to a function")


def _check_masked(query: exp.Query, masked: set[str]) -> None:
    for col in query.find_all(exp.Column):
        if col.name.lower() in masked and _bare(col) is None:
            raise _masked_refusal(col.name)
    for ident in _using(query):
        if ident.lower() in masked:
            raise _masked_refusal(ident)
    for join in query.find_all(exp.Join):
        if str(join.args.get("method") or "").upper() == "NATURAL":
            raise _masked_refusal("a column of a product this query reads")
    for select in query.find_all(exp.Select):
        shown = [p for p in select.expressions
                 if (p.alias_or_name.lower() in masked) or isinstance(p, exp.Star)
                 or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))]
        if not shown:
            continue
        if select.args.get("distinct"):
            raise _masked_refusal(shown[0].alias_or_name or "a selected column")
        for key in ("group", "order"):
            clause = select.args.get(key)
            if clause is None:
                continue
            if clause.args.get("all") or any(
                    isinstance(e, exp.Var) and e.name.upper() == "ALL" for e in clause.find_all(
                        exp.Var)):
                raise _masked_refusal(shown[0].alias_or_name or "a selected column")
            for lit in clause.find_all(exp.Literal):
                if lit.is_int and not lit.is_string:
                    i = int(lit.this) - 1
                    if 0 <= i < len(select.expressions) and select.expressions[i] in shown:
                        raise _masked_refusal(select.expressions[i].alias_or_name)
    for setop in query.find_all(exp.SetOperation):
        if setop.args.get("distinct") or not isinstance(setop, exp.Union):
            for select in setop.find_all(exp.Select):
                if any(p.alias_or_name.lower() in masked or isinstance(p, exp.Star)
                       for p in select.expressions):
                    raise _masked_refusal("a selected column")


def _literals(node: exp.Expr) -> list[str] | None:
    if isinstance(node, exp.Literal):
        return [str(node.this)]
    return None


def _check_pinned(query: exp.Query, pinned: dict[str, set[str]]) -> None:
    """`col = 'X'` or `col IN ('X', ...)` with a value outside what the row filter allows."""
    for node in query.find_all(exp.EQ, exp.In):
        pairs: list[tuple[exp.Expr, list[str] | None]] = []
        if isinstance(node, exp.EQ):
            pairs = [(node.this, _literals(node.expression)),
                     (node.expression, _literals(node.this))]
        elif not node.args.get("query"):
            each = [_literals(e) for e in node.expressions]
            pairs = [(node.this, None if any(v is None for v in each)
                      else [x for v in each if v for x in v])]
        for side, values in pairs:
            if not isinstance(side, exp.Column) or values is None:
                continue
            allowed = pinned.get(side.name.lower())
            if allowed is None:
                continue
            outside = sorted(v for v in values if v not in allowed)
            if outside:
                raise Refusal("outside_entitlement", f"{side.name} {', '.join(outside)} is "
                              f"outside your scope ({side.name}: "
                              f"{', '.join(sorted(allowed))})", hint=NOT_YOURS)


# --- error texts ---------------------------------------------------------------------------------

_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\b\d[\d.,:\-+eE]*\b")


def scrub(message: str, *known: str) -> str:
    """An engine's error with every quoted text and number the caller did not write replaced by
    '…': an error raised while the engine evaluates rows (a failed cast, an overflow) may quote a
    value from a row outside the caller's entitlement."""
    head = message.strip().splitlines()[0] if message.strip() else message

    def keep(m: re.Match[str]) -> str:
        token = m.group(0)
        inner = token[1:-1] if token[:1] in "'\"" else token
        return token if any(inner in k for k in known) else "…"

    return _QUOTED.sub(keep, head)
