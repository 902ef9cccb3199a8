"""run_sql, read-only for real: one SELECT over known data products, nothing else.

Checked on the parsed AST (sqlglot), not with regular expressions: a single statement that is a
query; every table a data product (or a CTE); no table functions, file or network readers, sleep or
session-changing functions. Each product is then replaced by a subquery carrying the caller's row
filter and column masks, restricted columns left out, and the whole wrapped in a row limit. The
engine connection is read-only as well (DuckDB read_only, PostgreSQL read-only transaction): two
locks, either sufficient.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from tether.config import TetherConfig
from tether.policy.pushdown import mask_of, masked, row_filter
from tether.sources.base import table_ref


class GuardError(ValueError):
    """The SQL is refused; the message says why and what is allowed."""


_DENY = re.compile(
    r"^(read_\w+|\w+_scan|glob|sniff_csv|query|query_table|pg_\w+|lo_\w+|dblink\w*|set_config|"
    r"current_setting|getvariable|setvariable|load_extension|install|load|copy|export_\w+|"
    r"system|shell|http_\w+|sleep|benchmark|txid_\w+|nextval|setval)$",
    re.I,
)
_FORBIDDEN_NODES: tuple[type[exp.Expr], ...] = tuple(
    getattr(exp, n) for n in (
        "Insert", "Update", "Delete", "Create", "Drop", "Alter", "Merge", "Command", "Copy",
        "Attach", "Detach", "Pragma", "Set", "Transaction", "Commit", "Rollback", "Use", "Into",
        "Lock", "LoadData", "Install", "Summarize", "Describe", "Show", "Analyze", "TruncateTable",
    ) if hasattr(exp, n)
)


def _function_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this)
    return str(node.sql_name()) if isinstance(node, exp.Func) else ""


def check(sql: str, dialect: str, tables: dict[str, str]) -> exp.Query:
    """The parsed query, or GuardError. ``tables`` maps table name -> product name."""
    if len(sql) > 20_000:
        raise GuardError("SQL longer than 20,000 characters is refused")
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except sqlglot.errors.SqlglotError as e:
        raise GuardError(f"the SQL does not parse: {str(e).splitlines()[0]}") from None
    if len(statements) != 1:
        raise GuardError("exactly one statement is allowed (no ';'-separated batches)")
    query = statements[0]
    if not isinstance(query, exp.Query):
        raise GuardError("only a SELECT query is allowed (read-only)")
    ctes = {c.alias_or_name.lower() for c in query.find_all(exp.CTE)}
    for node in query.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            raise GuardError(f"{node.key.upper()} is not allowed: this tool only reads")
        if isinstance(node, exp.Func) and _DENY.match(_function_name(node)):
            raise GuardError(f"function {_function_name(node)}() is not allowed here")
        if isinstance(node, exp.Table):
            _check_table(node, ctes, tables)
    return query


def _check_table(node: exp.Table, ctes: set[str], tables: dict[str, str]) -> None:
    if not isinstance(node.this, exp.Identifier):
        raise GuardError("table functions and file paths are not allowed in FROM; "
                         f"query these data products: {', '.join(sorted(tables))}")
    if node.args.get("catalog"):
        raise GuardError("other databases or catalogs are not allowed")
    name = node.name.lower()
    if name in ctes and not node.db:
        return
    if name not in tables:
        raise GuardError(f"unknown table {node.name!r}; the tables here are: "
                         f"{', '.join(sorted(tables))}")


def apply_policy(query: exp.Query, config: TetherConfig, user: str, tables: dict[str, str],
                 columns: dict[str, list[str]], dialect: str, limit: int) -> exp.Query:
    """Each product table -> (SELECT its visible, masked columns WHERE its row filter) AS alias;
    then LIMIT limit + 1 around the whole query."""
    ctes = {c.alias_or_name.lower() for c in query.find_all(exp.CTE)}

    def secure(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Table) or (node.name.lower() in ctes and not node.db):
            return node
        product = tables[node.name.lower()]
        alias = node.alias_or_name
        base = table_ref(config.products[product].table or product, dialect)
        base.set("alias", exp.TableAlias(this=exp.to_identifier("t")))
        projections: list[exp.Expr] = []
        for col in columns[product]:  # already exposable: no restricted column or field
            ref = exp.column(col, table="t", quoted=True)
            mask = mask_of(config, user, product, col)
            projections.append((masked(ref, mask) if mask else ref).as_(col, quoted=True))
        inner = exp.select(*projections).from_(base)
        pred = row_filter(config, user, product, "t", dialect)
        if pred is not None:
            inner = inner.where(pred)
        return exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias)))

    secured = query.transform(secure)
    assert isinstance(secured, exp.Query)
    return exp.select("*").from_(secured.subquery("q")).limit(exp.Literal.number(limit + 1))

