"""The generic tools (list_tables, describe_table, run_sql): what a general-purpose database
server offers, held to the same policy path as every grounded tool. A role sees only the
products it may read; run_sql is secured by resolution (sqlguard.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from tether.context.config_model import api_product
from tether.context.dialects import sql_name
from tether.context.meta import Evidence
from tether.errors import QueryError, TetherError
from tether.policy import templates
from tether.policy.entitle import column_masks, equality_scope, table_allowed
from tether.policy.model import exposable
from tether.serve import pagination, sqlguard
from tether.serve.executor import jsonable
from tether.serve.kinds import Answered, ToolError
from tether.serve.runners import Runner, register

if TYPE_CHECKING:
    from tether.serve.executor import Executor
    from tether.serve.kinds import Answered, Call


def tables(ex: Executor, user: str | None = None) -> dict[str, str]:
    """{table name (lower case): product} of the products the user may read: a table-backed
    one by its table's name, a product defined by SQL by its own name (run_sql reads it
    through its SQL, as the caller may read what that SQL reads)."""
    config = ex.project.config
    # an API's rows are read only by its tools, each with the caller's own credential
    return {(p.table or name).split(".")[-1].lower(): name for name, p in config.products.items()
            if (p.table or p.sql) and not api_product(config, name)
            and (user is None or table_allowed(config, user, name))}


def _no_data(call: Call, products: list[str]) -> Evidence:
    """Evidence of a call that read the catalog, not data."""
    return Evidence(tool=call.tool, version=call.version, tables=products)


def written(name: str, dialect: str) -> str | None:
    """How SQL on ``dialect`` must write a name, where that differs from the name itself."""
    how = sql_name(name, dialect)
    return how if how != name else None


def catalog(ex: Executor, call: Call) -> Answered:
    config = ex.project.config
    rows = []
    for t, product in sorted(tables(ex, call.user).items()):
        p = config.products[product]
        name = (p.table or product).split(".")[-1]
        how = written(name, _dialect(ex, product))
        rows.append({"table": name if how else t} | ({"write_as": how} if how else {}))
    return Answered({"rows": rows, "row_count": len(rows)}, _no_data(call, []))


def describe(ex: Executor, call: Call) -> Answered:

    known = tables(ex, call.user)
    name = str(call.args.get("table", "")).strip().strip('"`').lower()
    if name not in known:
        raise sqlguard.GuardError(f"unknown table {name[:80]!r}; tables: "
                                  f"{', '.join(sorted(known))}")
    product = known[name]
    shown = set(exposable(ex.project.config, product, ex.columns(product)))
    dialect = _dialect(ex, product)
    rows = [{"column": c.name, "type": c.type, "nullable": c.nullable}
            | ({"write_as": how} if (how := written(c.name, dialect)) else {})
            for c in ex.columns(product) if c.name in shown]
    return Answered({"rows": rows, "row_count": len(rows)}, _no_data(call, [product]))


def reserved(ex: Executor, source: str | None) -> set[str]:
    """Every table name of the source and every product name: what nothing may shadow."""
    src = ex.source(source)
    key = src.name
    if key not in ex.caches.catalog:
        names = {t.split(".")[-1].lower() for t in src.tables()}
        config = ex.project.config
        names |= {n.lower() for n in config.products}
        names |= {(p.table or "").split(".")[-1].lower() for p in config.products.values()}
        names |= filter_tables(ex)
        ex.caches.catalog[key] = names - {""}
    return ex.caches.catalog[key]


def filter_tables(ex: Executor) -> set[str]:
    """Tables the row filters and SQL products read (whatever schema they live in)."""
    config = ex.project.config
    trees: list[exp.Expr] = []
    for role in config.policies.roles.values():
        for product, text in role.row_filters.items():
            try:  # the one grammar (policy/templates.py), each template as NULL
                trees.append(templates.parse(text, _dialect(ex, product)).with_nulls())
            except TetherError:
                continue
    for name, p in config.products.items():
        if p.sql:
            try:
                trees.append(sqlglot.parse_one(p.sql, read=_dialect(ex, name)))
            except sqlglot.errors.SqlglotError:
                continue
    out: set[str] = set()
    for tree in trees:
        out |= {t.name.lower() for t in tree.find_all(exp.Table) if t.name}
    return out


def _dialect(ex: Executor, product: str) -> str:
    p = ex.project.config.products.get(product)
    try:
        return ex.source(p.source if p is not None else None).dialect
    except TetherError:
        return "duckdb"


def sql_catalog(ex: Executor, user: str, source: str | None) -> sqlguard.Catalog:
    """What ``user`` may read through run_sql on one source (worked out once per server)."""
    key = (user, source)
    if key not in ex.caches.sql_catalogs:
        ex.caches.sql_catalogs[key] = _sql_catalog(ex, user, source)
    found: sqlguard.Catalog = ex.caches.sql_catalogs[key]
    return found


def _sql_catalog(ex: Executor, user: str, source: str | None) -> sqlguard.Catalog:
    config = ex.project.config
    src = ex.source(source)
    readable = tables(ex)  # every product: a denied one is refused by name, with its reason
    restricted: dict[str, set[str]] = {}
    masked: dict[str, set[str]] = {}
    pinned: dict[str, dict[str, set[str]]] = {}
    for product in set(readable.values()):
        cols = ex.columns(product)
        shown = set(exposable(config, product, cols))
        hidden = {c.name.lower() for c in cols if c.name not in shown}
        hidden |= {leaf.name.split(".")[-1].lower() for c in cols if c.name not in shown
                   for leaf in c.leaves()}
        restricted[product] = hidden
        masked[product] = {c.lower() for c in column_masks(config, user, product)}
        pinned[product] = {c.lower(): {str(v) for v in vs}
                           for c, vs in equality_scope(config, user, product).items()}
    schema = (src.schema or ("main" if src.dialect == "duckdb" else "public")).lower()
    return sqlguard.Catalog(
        dialect=src.dialect, tables=readable, reserved=reserved(ex, source), schemas={schema},
        entitled=lambda p: ex.relation(user, p, fence=True), restricted=restricted,
        masked=masked,
        pinned=pinned)


STATEMENTS = 512
"""Secured statements kept per server: the same SQL from the same user is resolved once."""


def statement(ex: Executor, call: Call, sql: str
              ) -> tuple[str, dict[str, Any], list[str], str]:
    """The engine statement and parameters for ``sql`` as ``call.user``, bounded in rows and
    bytes and paged by the parameter sqlguard.PAGE_OFFSET, the products it reads, and the
    statement evidence shows (resolved once per user and text: a refusal is raised again each
    time, from the same analysis)."""
    key = (call.user, call.plan.source, call.plan.max_rows, sql)
    hit = ex.caches.statements.get(key)
    if hit is None:
        src = ex.source(call.plan.source)
        secured = sqlguard.secure(sql, sql_catalog(ex, call.user, call.plan.source),
                                  call.plan.max_rows)
        assert secured.inner is not None
        try:  # its result's columns, from the engine (no row read): what bounded() measures
            columns = src.result_columns(src.render(secured.inner), secured.params, ex.timeout)
        except QueryError as e:
            raise ToolError(folded(e.reason, sql, src.dialect)
                            or "the query failed: " + sqlguard.scrub(e.reason, sql)) from None
        query = sqlguard.bounded(secured.inner, columns, call.plan.max_rows,
                                 ex.project.config.serve.max_result_bytes, src.dialect)
        # evidence shows the statement whose rows the page holds: the layer around it that
        # measures values for the byte cap adds no row and changes no value the caller gets
        page = sqlguard.paged(secured.inner, call.plan.max_rows)
        hit = (src.render(query), secured.params, secured.products, src.display(page))
        if len(ex.caches.statements) >= STATEMENTS:
            ex.caches.statements.pop(next(iter(ex.caches.statements)))
        ex.caches.statements[key] = hit
    return hit


_MISSING = re.compile(r'(column|relation) "([^"]+)" does not exist')


def folded(reason: str, sql: str, dialect: str) -> str | None:
    """The error of a statement that named a table or column without quotes, which PostgreSQL
    folded to lower case (``Country`` read as ``country``): said so, with how to write it. Only
    a name the caller wrote is named (the one it folded)."""
    found = _MISSING.search(reason)
    if dialect != "postgres" or found is None:
        return None
    kind, name = found.groups()
    typed = [w for w in re.findall(r'(?<!["\w])([A-Za-z_][A-Za-z0-9_]*)(?!["\w])', sql)
             if w.lower() == name and w != name]
    if not typed:
        return None
    return (f"the query failed: {kind} {typed[0]} does not exist as written: PostgreSQL reads "
            f"a name without quotes in lower case ({name}); write \"{typed[0]}\" in double "
            "quotes (list_tables and describe_table give each name as SQL must write it, "
            "write_as)")


def page_offset(ex: Executor, call: Call) -> int:
    """Where this page starts: 0, or the offset the call's cursor carries (a cursor is signed
    for one user, tool, version and SQL text: pagination.py)."""
    cursor = call.args.get("cursor")
    if not cursor:
        return 0
    found = pagination.decode(ex.cursor_key, str(cursor), call.user, call.tool, call.version,
                              call.args)
    if len(found) != 1 or not isinstance(found[0], int) or isinstance(found[0], bool) or (
            found[0] < 0):
        raise pagination.CursorError("cursor is not one this server issued for run_sql; omit "
                                     "it to start again")
    return found[0]


def run_sql(ex: Executor, call: Call) -> Answered:
    sql = str(call.args.get("sql", ""))
    src = ex.source(call.plan.source)
    offset = page_offset(ex, call)
    text, params, products, shown = statement(ex, call, sql)
    params = {**params, sqlguard.PAGE_OFFSET: offset}

    got = ex.fetch(src, text, params, call.plan.max_rows, (sql,))
    names = got.names[:-1]  # the last column is bounded()'s tether_over
    cap = ex.project.config.serve.max_result_bytes
    rows: list[dict[str, Any]] = []
    capped = got.capped
    for r in got.rows:
        over = r[-1]
        if over is not None:  # the row that reached the byte cap: the engine sent no value
            if over > 0:
                raise sqlguard.GuardError(
                    f"row {offset + len(rows) + 1} of the result holds a value of "
                    f"{names[over - 1]!r} larger than the byte cap (serve.max_result_bytes: "
                    f"{cap:,} bytes), so nothing of it is returned; select a part of it (e.g. "
                    f"left(..., 1000)) or its length instead")
            capped = "bytes"
            break
        rows.append(dict(zip(names, map(jsonable, r[:-1]), strict=False)))
    if capped == "bytes" and not rows:
        raise sqlguard.GuardError(
            f"row {offset + 1} of the result alone holds more than the byte cap "
            f"(serve.max_result_bytes: {cap:,} bytes of values), so no page can hold it; select "
            "fewer or shorter columns")
    more = capped is not None
    out: dict[str, Any] = {"rows": rows, "row_count": len(rows), "truncated": more,
                           "next_cursor": pagination.encode(
                               ex.cursor_key, call.user, call.tool, call.version, call.args,
                               [offset + len(rows)]) if more else None,
                           "as_of": None}
    out["as_of"], basis = ex.as_of_said(call.user, products)
    if out["as_of"] is not None:
        out["as_of_basis"] = basis
    if capped == "bytes":
        out["capped"] = f"stopped at {cap:,} bytes of values"
    return Answered(out, ex.evidence(call, src, shown, params, products, fenced=True))


RUNNERS = [register(Runner("catalog", catalog)), register(Runner("describe", describe)),
           register(Runner("sql", run_sql))]
